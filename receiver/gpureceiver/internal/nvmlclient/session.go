package nvmlclient

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Session owns the NVML library's lifecycle for one receiver: Init with back-off, the
// answers to symbol look-ups, and Shutdown.
//
// The rule it exists to enforce (DESIGN §4): after a failed Init no other NVML function may
// be called — with the real library that kills the process with a dynamic-linker error that
// recover cannot catch. Callers get the library only from Lib(), which is nil unless Init
// succeeded.
type Session struct {
	lib   nvml.Interface
	now   func() time.Time
	retry RetryPolicy

	mu          sync.Mutex
	initialized bool
	lastFailure nvml.Return
	nextAttempt time.Time
	delay       time.Duration
	failures    map[nvml.Return]int64
	symbols     map[string]bool
}

// RetryPolicy is the back-off between failed Init attempts: the delay starts at Initial and
// doubles after every failure up to Max.
type RetryPolicy struct {
	Initial time.Duration
	Max     time.Duration
}

// NewSession wraps lib; nothing is called on it until EnsureInitialized.
func NewSession(lib nvml.Interface, now func() time.Time, retry RetryPolicy) *Session {
	return &Session{
		lib:      lib,
		now:      now,
		retry:    retry,
		delay:    retry.Initial,
		failures: map[nvml.Return]int64{},
		symbols:  map[string]bool{},
	}
}

// InitOutcome says what EnsureInitialized did, so the caller can log and report status only
// when the state changes.
type InitOutcome int

const (
	// AlreadyInitialized: NVML was up before the call.
	AlreadyInitialized InitOutcome = iota
	// JustInitialized: this call brought NVML up (first time, or after failures).
	JustInitialized
	// Failed: this call tried Init and it failed.
	Failed
	// Waiting: NVML is down and the back-off delay has not passed; nothing was called.
	Waiting
)

// EnsureInitialized calls Init when NVML is not up and the back-off allows it. The returned
// error is the last Init failure (nil once initialized).
func (s *Session) EnsureInitialized() (InitOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.initialized {
		return AlreadyInitialized, nil
	}
	now := s.now()
	if now.Before(s.nextAttempt) {
		return Waiting, NewError("nvmlInit", s.lastFailure)
	}
	ret := s.lib.Init()
	if ret != nvml.SUCCESS {
		s.lastFailure = ret
		s.failures[ret]++
		s.nextAttempt = now.Add(s.delay)
		s.delay = min(2*s.delay, s.retry.Max)
		return Failed, NewError("nvmlInit", ret)
	}
	s.initialized = true
	s.lastFailure = nvml.SUCCESS
	s.delay = s.retry.Initial
	s.symbols = map[string]bool{}
	return JustInitialized, nil
}

// ResetBackoff lets the next EnsureInitialized call Init at once (a deliberate
// re-initialisation, not a retry after failure).
func (s *Session) ResetBackoff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextAttempt = time.Time{}
	s.delay = s.retry.Initial
}

// Lib is the library while NVML is initialized, nil otherwise.
func (s *Session) Lib() nvml.Interface {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.initialized {
		return nil
	}
	return s.lib
}

// Initialized reports whether NVML is up.
func (s *Session) Initialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized
}

// InitFailures counts failed Init attempts by return code since the session was created.
func (s *Session) InitFailures() map[nvml.Return]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[nvml.Return]int64, len(s.failures))
	for k, v := range s.failures {
		out[k] = v
	}
	return out
}

// HasSymbol reports whether the loaded driver exports an NVML entry point. Functions newer
// than the oldest supported driver are checked here before their first call: calling a
// missing one kills the process. Answers are cached until the next Init.
func (s *Session) HasSymbol(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.initialized {
		return false
	}
	if ok, seen := s.symbols[name]; seen {
		return ok
	}
	ok := s.lib.Extensions().LookupSymbol(name) == nil
	s.symbols[name] = ok
	return ok
}

// Shutdown releases NVML if it was initialized. Safe to call more than once.
func (s *Session) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.initialized {
		return
	}
	s.lib.Shutdown()
	s.initialized = false
}
