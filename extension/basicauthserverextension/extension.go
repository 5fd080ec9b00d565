package basicauthserverextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/basicauthserverextension"

import (
	"bytes"
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
)

var (
	errUnauthorized = errors.New("basic authentication: missing or wrong credentials")
	// errBusy refuses a request that found too many others waiting for a bcrypt comparison,
	// or whose request ended while it waited. The HTTP server answers it with 401 like any
	// other refusal (confighttp does not let an authenticator choose the status).
	errBusy = errors.New("basic authentication: too many credential checks at once, try again")
)

// comparer compares a bcrypt hash with a password, as bcrypt.CompareHashAndPassword does.
type comparer func(hash, password []byte) error

// hasher hashes a password with bcrypt at a cost, as bcrypt.GenerateFromPassword does.
type hasher func(password []byte, cost int) ([]byte, error)

// deps is what the authenticator uses from outside: the bcrypt functions (tests count and
// time the comparisons through them), the source of the cache's HMAC key and of the decoy
// password, and the logger.
type deps struct {
	compare  comparer
	generate hasher
	random   io.Reader
	logger   *zap.Logger
}

func defaultDeps(logger *zap.Logger) deps {
	return deps{compare: bcrypt.CompareHashAndPassword, generate: bcrypt.GenerateFromPassword, random: rand.Reader, logger: logger}
}

// userSet is one loaded generation of the users; a reload replaces it whole.
type userSet struct {
	users map[string][]byte
	// decoy is compared against when the user is not known: a hash of a random password at
	// the highest cost among the users, so that an unknown user costs the same bcrypt work
	// as a wrong password and names cannot be told apart by timing.
	decoy     []byte
	decoyCost int
	// digest is the SHA-256 of the htpasswd file these users were read from.
	digest [sha256.Size]byte
}

// authenticator checks the Authorization header of every request against the users.
type authenticator struct {
	cfg *Config
	deps

	current atomic.Pointer[userSet]
	// cache remembers successful checks (nil when cache_size is 0); macKey keys the HMAC of
	// the password that, with the user name, identifies one.
	cache  *successCache
	macKey []byte
	// slots holds one token per bcrypt comparison running; pending counts the requests
	// running or waiting for one, bounded by max_concurrent_checks + max_queued_checks.
	slots      chan struct{}
	pending    atomic.Int64
	maxPending int64

	// stop ends the file watcher, done says it has ended; nil without a watcher.
	stop, done chan struct{}
	// lastReloadErr is the last reload failure logged (only the watcher touches it), so a
	// file that stays broken is logged once, not at every poll.
	lastReloadErr string
}

var _ extensionauth.Server = (*authenticator)(nil)

func newAuthenticator(cfg *Config, d deps) (*authenticator, error) {
	concurrent := max(cfg.MaxConcurrentChecks, 1)
	a := &authenticator{
		cfg:        cfg,
		deps:       d,
		slots:      make(chan struct{}, concurrent),
		maxPending: int64(concurrent + max(cfg.MaxQueuedChecks, 0)),
	}
	if cfg.CacheSize > 0 {
		a.cache = newSuccessCache(cfg.CacheSize)
		a.macKey = make([]byte, sha256.Size)
		if _, err := io.ReadFull(d.random, a.macKey); err != nil {
			return nil, fmt.Errorf("cache key: %w", err)
		}
	}
	return a, nil
}

// Start loads the users (the file is read here, so a Secret mounted late is found) and,
// with a file and a reload_interval, starts watching the file for changes.
func (a *authenticator) Start(context.Context, component.Host) error {
	users, digest, err := a.cfg.loadUsers()
	if err != nil {
		return err
	}
	set, err := a.newUserSet(users, digest, nil)
	if err != nil {
		return err
	}
	a.current.Store(set)
	a.logger.Info("Basic auth users loaded", zap.Int("users", len(users)), zap.String("htpasswd_file", a.cfg.HtpasswdFile))
	if a.cfg.HtpasswdFile != "" && a.cfg.ReloadInterval > 0 {
		a.stop, a.done = make(chan struct{}), make(chan struct{})
		go a.watch(a.cfg.ReloadInterval)
	}
	return nil
}

// Shutdown stops the file watcher.
func (a *authenticator) Shutdown(context.Context) error {
	if a.stop != nil {
		close(a.stop)
		<-a.done
		a.stop = nil
	}
	return nil
}

// newUserSet makes the decoy hash at the highest cost among the users (bcrypt's default
// cost if none could be read, which Start's checks rule out), reusing prev's when the cost
// did not change.
func (a *authenticator) newUserSet(users map[string][]byte, digest [sha256.Size]byte, prev *userSet) (*userSet, error) {
	cost := -1
	for _, h := range users {
		if c, err := bcrypt.Cost(h); err == nil && c > cost {
			cost = c
		}
	}
	if cost < 0 {
		cost = bcrypt.DefaultCost
	}
	set := &userSet{users: users, decoyCost: cost, digest: digest}
	if prev != nil && prev.decoyCost == cost {
		set.decoy = prev.decoy
		return set, nil
	}
	password := make([]byte, 18)
	if _, err := io.ReadFull(a.random, password); err != nil {
		return nil, fmt.Errorf("decoy password: %w", err)
	}
	decoy, err := a.generate([]byte(base64.StdEncoding.EncodeToString(password)), cost)
	if err != nil {
		return nil, fmt.Errorf("decoy hash at cost %d: %w", cost, err)
	}
	set.decoy = decoy
	return set, nil
}

// watch reloads the file every interval until Shutdown.
func (a *authenticator) watch(interval time.Duration) {
	defer close(a.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-tick.C:
			a.reload()
		}
	}
}

// reload reads the file again and, if its content changed and is valid, replaces the users
// (cached successes of users whose hash changed or who are gone are dropped). A file that
// cannot be read or is invalid keeps the users loaded before, and says so at error level.
func (a *authenticator) reload() {
	old := a.current.Load()
	users, digest, err := a.cfg.loadUsers()
	if err == nil && digest == old.digest {
		if a.lastReloadErr != "" {
			a.logger.Info("Basic auth htpasswd_file is valid again, unchanged", zap.String("htpasswd_file", a.cfg.HtpasswdFile), zap.Int("users", len(old.users)))
			a.lastReloadErr = ""
		}
		return
	}
	var set *userSet
	if err == nil {
		set, err = a.newUserSet(users, digest, old)
	}
	if err != nil {
		if msg := err.Error(); msg != a.lastReloadErr {
			a.logger.Error("Basic auth htpasswd_file changed but cannot be loaded; keeping the users loaded before",
				zap.String("htpasswd_file", a.cfg.HtpasswdFile), zap.Int("users", len(old.users)), zap.Error(err))
			a.lastReloadErr = msg
		}
		return
	}
	a.current.Store(set)
	if a.cache != nil {
		a.cache.retain(users)
	}
	a.lastReloadErr = ""
	a.logger.Info("Basic auth htpasswd_file reloaded", zap.String("htpasswd_file", a.cfg.HtpasswdFile), zap.Int("users", len(users)))
}

// Authenticate accepts a request whose Authorization header carries a known user and its
// password. HTTP servers pass the header as "Authorization", gRPC as "authorization".
func (a *authenticator) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	header := first(sources, "Authorization", "authorization")
	scheme, encoded, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ctx, errUnauthorized
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return ctx, errUnauthorized
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return ctx, errUnauthorized
	}
	set := a.current.Load()
	if set == nil { // not started
		return ctx, errUnauthorized
	}
	hash, known := set.users[user]
	var key cacheKey
	if a.cache != nil {
		key = cacheKey{user: user, mac: a.mac(password)}
		if known && a.cache.hit(key, hash) {
			return ctx, nil
		}
	}
	if !known {
		hash = set.decoy
	}
	if err := a.compareBounded(ctx, hash, []byte(password)); err != nil {
		if errors.Is(err, errBusy) {
			return ctx, errBusy
		}
		return ctx, errUnauthorized
	}
	if !known {
		return ctx, errUnauthorized
	}
	if a.cache != nil {
		a.cache.add(key, hash)
	}
	return ctx, nil
}

// compareBounded runs one bcrypt comparison once a slot is free. A request that finds
// max_queued_checks others waiting, or whose context ends while it waits, gets errBusy.
func (a *authenticator) compareBounded(ctx context.Context, hash, password []byte) error {
	if a.pending.Add(1) > a.maxPending {
		a.pending.Add(-1)
		return errBusy
	}
	defer a.pending.Add(-1)
	select {
	case a.slots <- struct{}{}:
	default:
		select {
		case a.slots <- struct{}{}:
		case <-ctx.Done():
			return errBusy
		}
	}
	defer func() { <-a.slots }()
	return a.compare(hash, password)
}

// mac is the keyed hash of a password that the cache keeps instead of the password.
func (a *authenticator) mac(password string) [sha256.Size]byte {
	h := hmac.New(sha256.New, a.macKey)
	_, _ = io.WriteString(h, password)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func first(sources map[string][]string, keys ...string) string {
	for _, k := range keys {
		if v := sources[k]; len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// successCache is a bounded LRU of successful checks. An entry keeps the hash it was
// checked against, so a check cached before the user's password changed never matches
// again, even one added after the reload that changed it.
type successCache struct {
	mu      sync.Mutex
	size    int
	entries map[cacheKey]*list.Element // of *cacheEntry
	order   *list.List                 // most recently used first
}

type cacheKey struct {
	user string
	mac  [sha256.Size]byte
}

type cacheEntry struct {
	key  cacheKey
	hash []byte
}

func newSuccessCache(size int) *successCache {
	return &successCache{size: size, entries: make(map[cacheKey]*list.Element, size), order: list.New()}
}

// hit says whether key was a success against hash, and marks it recently used.
func (c *successCache) hit(key cacheKey, hash []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.entries[key]
	if el == nil {
		return false
	}
	if !bytes.Equal(el.Value.(*cacheEntry).hash, hash) {
		c.remove(el)
		return false
	}
	c.order.MoveToFront(el)
	return true
}

// add remembers a success, evicting the least recently used entry when full.
func (c *successCache) add(key cacheKey, hash []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.entries[key]; el != nil {
		el.Value.(*cacheEntry).hash = hash
		c.order.MoveToFront(el)
		return
	}
	if c.order.Len() >= c.size {
		c.remove(c.order.Back())
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, hash: hash})
}

// retain drops the entries of users that are gone or whose hash changed.
func (c *successCache) retain(users map[string][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, el := range c.entries {
		e := el.Value.(*cacheEntry)
		if h, ok := users[e.key.user]; !ok || !bytes.Equal(h, e.hash) {
			c.remove(el)
		}
	}
}

func (c *successCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *successCache) remove(el *list.Element) {
	c.order.Remove(el)
	delete(c.entries, el.Value.(*cacheEntry).key)
}
