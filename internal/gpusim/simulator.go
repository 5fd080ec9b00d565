package gpusim

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Options select what is simulated.
type Options struct {
	System   string // dgxa100 | dgxh100 | dgxh200 | dgxb200
	Scenario string // see Scenarios()
	Seed     int64
	// Now is the simulator's clock; values are a function of Now() - (Now() at New).
	Now func() time.Time
	// NVMLMissingFor makes Init fail with ERROR_LIBRARY_NOT_FOUND for this long after New,
	// as on a node whose driver is installed after the collector started.
	NVMLMissingFor time.Duration
	// Driver is the driver release simulated, e.g. "535.104.05": which calls and fields
	// exist, and how processes are listed (driver.go). Empty: the system's default, a
	// current R580 release for the DGX systems.
	Driver string
	// PIDNamespace is where the caller runs, PIDNamespaceHost (the default) or
	// PIDNamespaceContainer: from 535.113 on the driver then lists no other container's
	// processes.
	PIDNamespace string
	// NoMIGMonitor simulates a caller without NVIDIA's MIG monitor capability
	// (/proc/driver/nvidia/capabilities/mig/monitor; NVIDIA_MIG_MONITOR_DEVICES in a
	// container): the calls nvml.h says "require privileged user" answer NO_PERMISSION.
	NoMIGMonitor bool
}

// Simulator implements nvml.Interface. Functions the receiver uses are methods of
// Simulator and Device; everything else falls through to go-nvml's mock server, where
// unset functions answer ERROR_NOT_SUPPORTED instead of panicking.
type Simulator struct {
	*server.Server

	system   string
	seed     int64
	machine  *machine
	scenario scenario
	now      func() time.Time
	start    time.Time
	devices  []*Device
	missing  time.Duration

	driverVersion    string
	driver           driverRelease
	hostPIDNamespace bool
	migMonitor       bool

	events *eventSource

	mu             sync.Mutex
	calls          map[string]int64
	missingSymbols map[string]bool
}

var _ nvml.Interface = (*Simulator)(nil)

// New builds a simulator for one system and scenario.
func New(opts Options) (*Simulator, error) {
	sys, err := lookupSystem(opts.System)
	if err != nil {
		return nil, err
	}
	sc, err := lookupScenario(opts.Scenario)
	if err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Driver == "" {
		opts.Driver = sys.defaultDriver
	}
	driver, err := parseDriverRelease(opts.Driver)
	if err != nil {
		return nil, err
	}
	switch opts.PIDNamespace {
	case "", PIDNamespaceHost, PIDNamespaceContainer:
	default:
		return nil, fmt.Errorf("unknown PID namespace %q (%s or %s)", opts.PIDNamespace, PIDNamespaceHost, PIDNamespaceContainer)
	}
	srv := sys.newServer()
	FillNotSupported(&srv.Interface)
	m := &machine{sys: sys, seed: opts.Seed}
	s := &Simulator{
		Server:           srv,
		system:           opts.System,
		seed:             opts.Seed,
		machine:          m,
		scenario:         newScenarioMemo(sc, m, len(srv.Devices)).reading,
		now:              opts.Now,
		start:            opts.Now(),
		missing:          opts.NVMLMissingFor,
		driverVersion:    opts.Driver,
		driver:           driver,
		hostPIDNamespace: opts.PIDNamespace != PIDNamespaceContainer,
		migMonitor:       !opts.NoMIGMonitor,
		calls:            map[string]int64{},
		missingSymbols:   map[string]bool{},
	}
	for i, d := range srv.Devices {
		md := d.(*server.Device)
		FillNotSupported(&md.Device)
		s.devices = append(s.devices, newDevice(s, md, i, opts))
	}
	if err := s.setUpMIG(opts.Scenario); err != nil {
		return nil, err
	}
	s.events = newEventSource(s)
	return s, nil
}

// deterministicUUID replaces the mock server's random UUIDs so that golden files are stable.
func deterministicUUID(opts Options, index int) string {
	b := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", opts.System, opts.Seed, index))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// FillNotSupported makes every unset XxxFunc of a go-nvml mock answer zero values and
// ERROR_NOT_SUPPORTED: an unexpected call then looks like an old driver, not a panic.
func FillNotSupported(mockStruct any) {
	v := reflect.ValueOf(mockStruct).Elem()
	returnType := reflect.TypeOf(nvml.SUCCESS)
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Func || !f.IsNil() || !f.CanSet() {
			continue
		}
		ft := f.Type()
		if ft.NumOut() == 0 || ft.Out(ft.NumOut()-1) != returnType {
			continue
		}
		f.Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, ft.NumOut())
			for j := 0; j < ft.NumOut()-1; j++ {
				out[j] = reflect.Zero(ft.Out(j))
			}
			out[ft.NumOut()-1] = reflect.ValueOf(nvml.ERROR_NOT_SUPPORTED)
			return out
		}))
	}
}

func (s *Simulator) count(call string) {
	s.mu.Lock()
	s.calls[call]++
	s.mu.Unlock()
}

// Calls returns how often each NVML function was called, by name.
func (s *Simulator) Calls() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// TotalCalls is the number of NVML calls of any kind.
func (s *Simulator) TotalCalls() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, v := range s.calls {
		n += v
	}
	return n
}

// SetSymbolMissing makes LookupSymbol report an entry point as absent (an older driver).
func (s *Simulator) SetSymbolMissing(symbol string, missing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.missingSymbols[symbol] = missing
}

// SetLost makes GPU `index` answer ERROR_GPU_IS_LOST to every call (fallen off the bus),
// or brings it back.
func (s *Simulator) SetLost(index int, lost bool) {
	s.devices[index].lost.Store(lost)
}

// elapsed is the simulated time in seconds, to the millisecond: the simulated driver's
// state moves in millisecond steps, as a real driver refreshes its readings every few
// milliseconds at most, so the calls of one GPU's collection, microseconds apart, see one
// state (and the scenario is computed once for them: scenarioMemo).
func (s *Simulator) elapsed() float64 {
	return float64(s.now().Sub(s.start).Milliseconds()) / 1000
}

// Init succeeds, unless the library is still "missing" (Options.NVMLMissingFor).
func (s *Simulator) Init() nvml.Return {
	s.count("Init")
	if s.now().Sub(s.start) < s.missing {
		return nvml.ERROR_LIBRARY_NOT_FOUND
	}
	return nvml.SUCCESS
}

// InitWithFlags behaves as Init.
func (s *Simulator) InitWithFlags(uint32) nvml.Return {
	s.count("InitWithFlags")
	return nvml.SUCCESS
}

// Shutdown releases nothing.
func (s *Simulator) Shutdown() nvml.Return {
	s.count("Shutdown")
	return nvml.SUCCESS
}

// Extensions returns the simulator itself, which implements LookupSymbol.
func (s *Simulator) Extensions() nvml.ExtendedInterface { return s }

// LookupSymbol reports an NVML entry point as present where the simulated driver release
// has it, unless SetSymbolMissing said otherwise.
func (s *Simulator) LookupSymbol(symbol string) error {
	s.count("LookupSymbol")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.missingSymbols[symbol] || s.driver.missingSymbol(symbol) {
		return fmt.Errorf("symbol %q not found", symbol)
	}
	return nil
}

// SystemGetDriverVersion returns the simulated driver release.
func (s *Simulator) SystemGetDriverVersion() (string, nvml.Return) {
	s.count("SystemGetDriverVersion")
	return s.driverVersion, nvml.SUCCESS
}

// SystemGetNVMLVersion returns the NVML version the simulated release ships.
func (s *Simulator) SystemGetNVMLVersion() (string, nvml.Return) {
	s.count("SystemGetNVMLVersion")
	return s.driver.nvmlVersion(s.driverVersion), nvml.SUCCESS
}

// SystemGetCudaDriverVersion returns the CUDA version the simulated release supports.
func (s *Simulator) SystemGetCudaDriverVersion() (int, nvml.Return) {
	s.count("SystemGetCudaDriverVersion")
	return s.driver.cudaVersion(), nvml.SUCCESS
}

// DeviceGetCount returns the number of simulated GPUs.
func (s *Simulator) DeviceGetCount() (int, nvml.Return) {
	s.count("DeviceGetCount")
	return len(s.devices), nvml.SUCCESS
}

// DeviceGetHandleByIndex returns GPU `index`.
func (s *Simulator) DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return) {
	s.count("DeviceGetHandleByIndex")
	if index < 0 || index >= len(s.devices) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return s.devices[index], nvml.SUCCESS
}

// DeviceGetHandleByUUID returns the GPU with that UUID. As nvml.h documents, it answers
// ERROR_GPU_IS_LOST while any GPU has fallen off the bus, whichever is asked for.
func (s *Simulator) DeviceGetHandleByUUID(uuid string) (nvml.Device, nvml.Return) {
	s.count("DeviceGetHandleByUUID")
	for _, d := range s.devices {
		if d.lostNow() {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
	}
	for _, d := range s.devices {
		if strings.EqualFold(d.uuid, uuid) {
			return d, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// GPU is one simulated GPU as a device plugin or DRA driver would name it.
type GPU struct {
	Index int
	// Minor is the device node's minor number (/dev/nvidia<Minor>).
	Minor int
	UUID  string
	// MIG are the UUIDs of its MIG instances, if MIG is on.
	MIG []string
}

// GPUs lists the simulated GPUs by index.
func (s *Simulator) GPUs() []GPU {
	out := make([]GPU, len(s.devices))
	for i, d := range s.devices {
		out[i] = GPU{Index: d.index, Minor: s.machine.sys.minor(d.index), UUID: d.uuid}
		for _, m := range d.migs {
			out[i].MIG = append(out[i].MIG, m.uuid)
		}
	}
	return out
}

// UUIDs are the simulated GPUs' UUIDs by index.
func (s *Simulator) UUIDs() []string {
	out := make([]string, len(s.devices))
	for i, d := range s.devices {
		out[i] = d.uuid
	}
	return out
}
