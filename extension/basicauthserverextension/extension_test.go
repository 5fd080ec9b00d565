package basicauthserverextension

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/crypto/bcrypt"
)

func hash(t *testing.T, password string) string { return hashCost(t, password, bcrypt.MinCost) }

func hashCost(t *testing.T, password string, cost int) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	require.NoError(t, err)
	return string(h)
}

func basic(user, password string) map[string][]string {
	return map[string][]string{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))}}
}

// config is the factory's default configuration with edit applied.
func config(edit func(*Config)) *Config {
	cfg := createDefaultConfig().(*Config)
	edit(cfg)
	return cfg
}

func started(t *testing.T, cfg *Config) *authenticator {
	t.Helper()
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return ext.(*authenticator)
}

// probe is an instrumented bcrypt: it records the cost of every hash compared, how many
// comparisons run at once (at most), and can hold comparisons until released.
type probe struct {
	mu      sync.Mutex
	costs   []int
	calls   atomic.Int64
	running atomic.Int64
	peak    atomic.Int64
	hold    chan struct{} // when non-nil, a comparison waits for it to be closed
	entered chan struct{} // when non-nil, a comparison signals here once it runs
}

func (p *probe) compare(hash, password []byte) error {
	n := p.running.Add(1)
	defer p.running.Add(-1)
	for {
		peak := p.peak.Load()
		if n <= peak || p.peak.CompareAndSwap(peak, n) {
			break
		}
	}
	p.calls.Add(1)
	cost, _ := bcrypt.Cost(hash)
	p.mu.Lock()
	p.costs = append(p.costs, cost)
	p.mu.Unlock()
	if p.entered != nil {
		p.entered <- struct{}{}
	}
	if p.hold != nil {
		<-p.hold
	} else {
		time.Sleep(2 * time.Millisecond) // long enough for the others to pile up
	}
	return bcrypt.CompareHashAndPassword(hash, password)
}

func (p *probe) lastCost() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.costs[len(p.costs)-1]
}

// probed starts an authenticator whose comparisons go through p, logging to the returned
// observer.
func probed(t *testing.T, cfg *Config, p *probe) (*authenticator, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	d := defaultDeps(zap.New(core))
	d.compare = p.compare
	a, err := newAuthenticator(cfg, d)
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, a.Shutdown(context.Background())) })
	return a, logs
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

// TestAuthenticate: the right user and password pass; a wrong password, an unknown user,
// another scheme, garbage or no header at all are refused. Users come inline and from an
// htpasswd file (comments and blank lines skipped); gRPC's lower-case header works too.
func TestAuthenticate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, file, "# scrapers\n\ngrafana:"+hash(t, "g-pass")+"\n")
	a := started(t, config(func(c *Config) {
		c.Users = map[string]configopaque.String{"prometheus": configopaque.String(hash(t, "p-pass"))}
		c.HtpasswdFile = file
	}))
	ctx := context.Background()

	for name, ok := range map[string]struct {
		sources map[string][]string
		ok      bool
	}{
		"inline user":          {basic("prometheus", "p-pass"), true},
		"file user":            {basic("grafana", "g-pass"), true},
		"gRPC metadata":        {map[string][]string{"authorization": basic("grafana", "g-pass")["Authorization"]}, true},
		"cached inline user":   {basic("prometheus", "p-pass"), true},
		"wrong password":       {basic("prometheus", "g-pass"), false},
		"unknown user":         {basic("root", "p-pass"), false},
		"empty password":       {basic("prometheus", ""), false},
		"bearer":               {map[string][]string{"Authorization": {"Bearer p-pass"}}, false},
		"not base64":           {map[string][]string{"Authorization": {"Basic %%%"}}, false},
		"no colon":             {map[string][]string{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("prometheus"))}}, false},
		"no header":            {map[string][]string{}, false},
		"hash as the password": {basic("prometheus", string(a.current.Load().users["prometheus"])), false},
	} {
		for range 2 { // the second time, a success comes from the cache
			_, err := a.Authenticate(ctx, ok.sources)
			if ok.ok {
				assert.NoError(t, err, name)
			} else {
				assert.ErrorIs(t, err, errUnauthorized, name)
			}
		}
	}

	// A configuration of before (no reload or bound settings, zero values) still works.
	old := started(t, &Config{Users: map[string]configopaque.String{"prometheus": configopaque.String(hash(t, "p-pass"))}})
	_, err := old.Authenticate(ctx, basic("prometheus", "p-pass"))
	assert.NoError(t, err)
	_, err = old.Authenticate(ctx, basic("prometheus", "x"))
	assert.ErrorIs(t, err, errUnauthorized)
}

// TestConfig: the defaults, and the new settings read from YAML-like maps; a configuration
// with only users/htpasswd_file gets the defaults.
func TestConfig(t *testing.T) {
	def := createDefaultConfig().(*Config)
	assert.Equal(t, &Config{ReloadInterval: 5 * time.Second, MaxConcurrentChecks: 1, MaxQueuedChecks: 32, CacheSize: 256}, def)

	cfg := createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"htpasswd_file": "/x"}).Unmarshal(cfg))
	assert.Equal(t, config(func(c *Config) { c.HtpasswdFile = "/x" }), cfg)

	cfg = createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"htpasswd_file": "/x", "reload_interval": "30s", "max_concurrent_checks": 2, "max_queued_checks": 0, "cache_size": 0,
	}).Unmarshal(cfg))
	assert.Equal(t, &Config{HtpasswdFile: "/x", ReloadInterval: 30 * time.Second, MaxConcurrentChecks: 2}, cfg)
	assert.NoError(t, confmap.Validate(cfg))
}

// TestConfigErrors: every mistake is reported with its field, at validation (inline users,
// the bounds) or at start (the file).
func TestConfigErrors(t *testing.T) {
	assert.ErrorContains(t, confmap.Validate(&Config{}), "at least one user")
	err := confmap.Validate(&Config{Users: map[string]configopaque.String{"prometheus": "plain-password", "a:b": configopaque.String(hash(t, "x"))}})
	assert.ErrorContains(t, err, `user "prometheus": not a bcrypt hash`)
	assert.ErrorContains(t, err, `user "a:b"`)
	err = confmap.Validate(&Config{HtpasswdFile: "/x", ReloadInterval: -1, MaxConcurrentChecks: -1, MaxQueuedChecks: -1, CacheSize: -1})
	for _, field := range []string{"reload_interval:", "max_concurrent_checks:", "max_queued_checks:", "cache_size:"} {
		assert.ErrorContains(t, err, field)
	}

	dir := t.TempDir()
	for content, want := range map[string]string{
		"prometheus\n":        "line 1: want user:hash",
		"prometheus:secret\n": `line 1: user "prometheus": not a bcrypt hash`,
		"# only a comment\n":  "no user in it",
		"prometheus:" + hash(t, "a") + "\nprometheus:" + hash(t, "b") + "\n": `line 2: user "prometheus" is listed twice`,
	} {
		file := filepath.Join(dir, "htpasswd")
		writeFile(t, file, content)
		f := NewFactory()
		ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), config(func(c *Config) { c.HtpasswdFile = file }))
		require.NoError(t, err)
		assert.ErrorContains(t, ext.Start(context.Background(), componenttest.NewNopHost()), want, content)
	}
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), config(func(c *Config) { c.HtpasswdFile = filepath.Join(dir, "missing") }))
	require.NoError(t, err)
	assert.ErrorContains(t, ext.Start(context.Background(), componenttest.NewNopHost()), "htpasswd_file:")
}

// TestUnknownUserCostsAsMuchAsAWrongPassword: the decoy compared for an unknown user has
// the highest cost among the users (htpasswd -nB writes cost 5; bcrypt's default is 10),
// so an unknown user and a wrong password do the same bcrypt work. Inline users count, and
// a reload that raises the cost raises the decoy's.
func TestUnknownUserCostsAsMuchAsAWrongPassword(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "htpasswd")
	writeFile(t, file, "low:"+hashCost(t, "l", 4)+"\nhtpasswd:"+hashCost(t, "h", 5)+"\n")
	p := &probe{}
	a, _ := probed(t, config(func(c *Config) { c.HtpasswdFile = file; c.ReloadInterval = 0 }), p)
	ctx := context.Background()

	_, err := a.Authenticate(ctx, basic("htpasswd", "wrong"))
	require.ErrorIs(t, err, errUnauthorized)
	wrongPassword := p.lastCost()
	_, err = a.Authenticate(ctx, basic("nobody", "wrong"))
	require.ErrorIs(t, err, errUnauthorized)
	assert.Equal(t, 5, wrongPassword)
	assert.Equal(t, wrongPassword, p.lastCost(), "an unknown user must cost as much bcrypt work as a wrong password")
	cost, err := bcrypt.Cost(a.current.Load().decoy)
	require.NoError(t, err)
	assert.Equal(t, 5, cost)

	// A reload with a cost-6 user: the decoy follows.
	writeFile(t, file, "low:"+hashCost(t, "l", 4)+"\nstrong:"+hashCost(t, "s", 6)+"\n")
	a.reload()
	_, err = a.Authenticate(ctx, basic("htpasswd", "h"))
	require.ErrorIs(t, err, errUnauthorized)
	assert.Equal(t, 6, p.lastCost())

	// Inline users only.
	p = &probe{}
	a, _ = probed(t, config(func(c *Config) {
		c.Users = map[string]configopaque.String{"a": configopaque.String(hashCost(t, "a", 4)), "b": configopaque.String(hashCost(t, "b", 6))}
	}), p)
	_, err = a.Authenticate(ctx, basic("nobody", "x"))
	require.ErrorIs(t, err, errUnauthorized)
	assert.Equal(t, 6, p.lastCost())
}

// TestDecoyWithoutBcryptUsers: with no bcrypt hash to take the cost from (Start's checks
// rule that out; only bcrypt is accepted), the decoy has bcrypt's default cost; an
// unchanged cost reuses the decoy.
func TestDecoyWithoutBcryptUsers(t *testing.T) {
	var costs []int
	d := defaultDeps(zap.NewNop())
	d.generate = func(password []byte, cost int) ([]byte, error) {
		costs = append(costs, cost)
		return bcrypt.GenerateFromPassword(password, bcrypt.MinCost)
	}
	a, err := newAuthenticator(createDefaultConfig().(*Config), d)
	require.NoError(t, err)
	set, err := a.newUserSet(map[string][]byte{}, [sha256.Size]byte{}, nil)
	require.NoError(t, err)
	assert.Equal(t, bcrypt.DefaultCost, set.decoyCost)
	again, err := a.newUserSet(map[string][]byte{"x": []byte(hash(t, "x"))}, [sha256.Size]byte{1}, set)
	require.NoError(t, err)
	assert.Equal(t, bcrypt.MinCost, again.decoyCost)
	same, err := a.newUserSet(map[string][]byte{"y": []byte(hash(t, "y"))}, [sha256.Size]byte{2}, again)
	require.NoError(t, err)
	assert.Equal(t, again.decoy, same.decoy)
	assert.Equal(t, []int{bcrypt.DefaultCost, bcrypt.MinCost}, costs)
}

// TestCachedSuccessDoesNoBcryptWork: a user that authenticated once is let in again
// without a comparison; a wrong password still costs one; the cache keeps an HMAC of the
// password, never the password, and holds at most cache_size entries (least recently used
// evicted); cache_size 0 turns it off.
func TestCachedSuccessDoesNoBcryptWork(t *testing.T) {
	p := &probe{}
	users := map[string]configopaque.String{}
	for _, u := range []string{"a", "b", "c"} {
		users[u] = configopaque.String(hash(t, u+"-pass"))
	}
	a, _ := probed(t, config(func(c *Config) { c.Users = users; c.CacheSize = 2 }), p)
	ctx := context.Background()
	auth := func(user, password string) error { _, err := a.Authenticate(ctx, basic(user, password)); return err }

	require.NoError(t, auth("a", "a-pass"))
	require.EqualValues(t, 1, p.calls.Load())
	for range 5 {
		require.NoError(t, auth("a", "a-pass"))
	}
	assert.EqualValues(t, 1, p.calls.Load(), "a cached success does no bcrypt work")
	assert.ErrorIs(t, auth("a", "wrong"), errUnauthorized)
	assert.EqualValues(t, 2, p.calls.Load(), "a wrong password is never answered from the cache")

	for el := a.cache.order.Front(); el != nil; el = el.Next() {
		e := el.Value.(*cacheEntry)
		assert.NotEqual(t, sha256.Sum256([]byte("a-pass")), e.key.mac, "an unkeyed hash of the password")
		assert.NotContains(t, string(e.key.mac[:]), "a-pass")
	}

	require.NoError(t, auth("b", "b-pass"))
	require.NoError(t, auth("a", "a-pass")) // a is now the most recently used
	require.NoError(t, auth("c", "c-pass")) // evicts b
	assert.Equal(t, 2, a.cache.len())
	calls := p.calls.Load()
	require.NoError(t, auth("a", "a-pass"))
	require.NoError(t, auth("c", "c-pass"))
	assert.Equal(t, calls, p.calls.Load())
	require.NoError(t, auth("b", "b-pass"))
	assert.Equal(t, calls+1, p.calls.Load(), "b was evicted")

	p = &probe{}
	off, _ := probed(t, config(func(c *Config) { c.Users = users; c.CacheSize = 0 }), p)
	for range 3 {
		_, err := off.Authenticate(ctx, basic("a", "a-pass"))
		require.NoError(t, err)
	}
	assert.EqualValues(t, 3, p.calls.Load())
}

// TestConcurrentFailuresAreBounded: however many failing requests arrive at once, no more
// than max_concurrent_checks bcrypt comparisons run at a time; the rest wait their turn.
func TestConcurrentFailuresAreBounded(t *testing.T) {
	for _, bound := range []int{1, 3} {
		p := &probe{}
		a, _ := probed(t, config(func(c *Config) {
			c.Users = map[string]configopaque.String{"a": configopaque.String(hash(t, "a-pass"))}
			c.MaxConcurrentChecks = bound
			c.MaxQueuedChecks = 64
		}), p)
		var wg sync.WaitGroup
		for i := range 24 {
			wg.Go(func() {
				user := "a"
				if i%2 == 1 {
					user = "unknown"
				}
				_, err := a.Authenticate(context.Background(), basic(user, "wrong"))
				assert.ErrorIs(t, err, errUnauthorized)
			})
		}
		wg.Wait()
		assert.EqualValues(t, 24, p.calls.Load(), "each waited its turn")
		assert.LessOrEqual(t, p.peak.Load(), int64(bound))
		assert.Positive(t, p.peak.Load())
	}
}

// TestWaitingIsBounded: with max_concurrent_checks comparisons running and
// max_queued_checks requests waiting, the next one is refused at once; a waiting request
// whose context ends is refused without a comparison.
func TestWaitingIsBounded(t *testing.T) {
	p := &probe{hold: make(chan struct{}), entered: make(chan struct{}, 8)}
	a, _ := probed(t, config(func(c *Config) {
		c.Users = map[string]configopaque.String{"a": configopaque.String(hash(t, "a-pass"))}
		c.MaxConcurrentChecks = 1
		c.MaxQueuedChecks = 1
	}), p)

	running := make(chan error, 1)
	go func() { _, err := a.Authenticate(context.Background(), basic("a", "a-pass")); running <- err }()
	<-p.entered // the slot is taken

	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	go func() { _, err := a.Authenticate(ctx, basic("a", "wrong")); waiting <- err }()
	require.Eventually(t, func() bool { return a.pending.Load() == 2 }, 5*time.Second, time.Millisecond)

	_, err := a.Authenticate(context.Background(), basic("unknown", "x"))
	assert.ErrorIs(t, err, errBusy, "the queue is full")

	cancel()
	assert.ErrorIs(t, <-waiting, errBusy, "its request ended while it waited")
	assert.EqualValues(t, 1, p.calls.Load())

	close(p.hold)
	assert.NoError(t, <-running)
	assert.EqualValues(t, 0, a.pending.Load())
	_, err = a.Authenticate(context.Background(), basic("a", "wrong"))
	assert.ErrorIs(t, err, errUnauthorized, "room again")
}

// TestChangedPasswordInvalidatesCache: after the file changes a user's password, the old
// password is checked again (and refused) instead of being let in from the cache; other
// users' cached successes stay.
func TestChangedPasswordInvalidatesCache(t *testing.T) {
	file := filepath.Join(t.TempDir(), "htpasswd")
	keep := hash(t, "k-pass")
	writeFile(t, file, "keep:"+keep+"\nrotate:"+hash(t, "old")+"\n")
	p := &probe{}
	a, _ := probed(t, config(func(c *Config) { c.HtpasswdFile = file; c.ReloadInterval = 0 }), p)
	ctx := context.Background()
	auth := func(user, password string) error { _, err := a.Authenticate(ctx, basic(user, password)); return err }
	require.NoError(t, auth("rotate", "old"))
	require.NoError(t, auth("keep", "k-pass"))
	require.EqualValues(t, 2, p.calls.Load())

	writeFile(t, file, "keep:"+keep+"\nrotate:"+hash(t, "new")+"\n")
	a.reload()
	assert.ErrorIs(t, auth("rotate", "old"), errUnauthorized)
	assert.EqualValues(t, 3, p.calls.Load(), "the old password was compared again")
	require.NoError(t, auth("rotate", "new"))
	require.NoError(t, auth("keep", "k-pass"))
	assert.EqualValues(t, 4, p.calls.Load(), "keep's cached success stays")

	// A removed user is gone from the cache at once.
	writeFile(t, file, "rotate:"+hash(t, "new")+"\n")
	a.reload()
	assert.ErrorIs(t, auth("keep", "k-pass"), errUnauthorized)

	// A success cached against the old hash by a check that finished after the reload
	// does not match the new hash.
	key := cacheKey{user: "rotate", mac: a.mac("old")}
	a.cache.add(key, []byte(hash(t, "old")))
	assert.False(t, a.cache.hit(key, a.current.Load().users["rotate"]))
}

// secretVolume lays out dir as the kubelet does a Secret volume: the key is a symlink
// through ..data, a symlink to a timestamped directory that an update replaces by an
// atomic rename of a new ..data symlink.
type secretVolume struct {
	t   *testing.T
	dir string
	n   int
}

func (s *secretVolume) update(content string) {
	s.t.Helper()
	s.n++
	version := filepath.Join(s.dir, "..2026_12_07_11_00_00."+string(rune('0'+s.n)))
	require.NoError(s.t, os.Mkdir(version, 0o755))
	writeFile(s.t, filepath.Join(version, "htpasswd"), content)
	tmp := filepath.Join(s.dir, "..data_tmp")
	require.NoError(s.t, os.Symlink(filepath.Base(version), tmp))
	old, _ := os.Readlink(filepath.Join(s.dir, "..data"))
	require.NoError(s.t, os.Rename(tmp, filepath.Join(s.dir, "..data")))
	if old != "" {
		require.NoError(s.t, os.RemoveAll(filepath.Join(s.dir, old)))
	}
	if _, err := os.Lstat(filepath.Join(s.dir, "htpasswd")); os.IsNotExist(err) {
		require.NoError(s.t, os.Symlink("..data/htpasswd", filepath.Join(s.dir, "htpasswd")))
	}
}

// TestReloadSecretVolume: the file is watched; a Secret update (the ..data symlink swap)
// replaces the users and is logged at info with their count; a bad file keeps the users
// loaded before and is logged at error, once; a good one after it is loaded again.
func TestReloadSecretVolume(t *testing.T) {
	vol := &secretVolume{t: t, dir: t.TempDir()}
	vol.update("prometheus:" + hash(t, "one") + "\n")
	p := &probe{}
	a, logs := probed(t, config(func(c *Config) {
		c.HtpasswdFile = filepath.Join(vol.dir, "htpasswd")
		c.ReloadInterval = 5 * time.Millisecond
	}), p)
	ctx := context.Background()
	auth := func(user, password string) error { _, err := a.Authenticate(ctx, basic(user, password)); return err }
	require.NoError(t, auth("prometheus", "one"))

	vol.update("prometheus:" + hash(t, "two") + "\ngrafana:" + hash(t, "g") + "\n")
	require.Eventually(t, func() bool { return auth("grafana", "g") == nil }, 5*time.Second, 5*time.Millisecond)
	assert.ErrorIs(t, auth("prometheus", "one"), errUnauthorized)
	assert.NoError(t, auth("prometheus", "two"))
	reloaded := logs.FilterMessage("Basic auth htpasswd_file reloaded").All()
	require.Len(t, reloaded, 1)
	assert.Equal(t, zapcore.InfoLevel, reloaded[0].Level)
	assert.EqualValues(t, 2, reloaded[0].ContextMap()["users"])

	vol.update("prometheus:plain-text\n")
	bad := func() []observer.LoggedEntry { return logs.FilterLevelExact(zapcore.ErrorLevel).All() }
	require.Eventually(t, func() bool { return len(bad()) == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.Contains(t, bad()[0].ContextMap()["error"], `line 1: user "prometheus": not a bcrypt hash`)
	assert.EqualValues(t, 2, bad()[0].ContextMap()["users"], "the users kept")
	time.Sleep(50 * time.Millisecond) // ten polls of the same bad file
	assert.Len(t, bad(), 1, "a file that stays bad is logged once")
	assert.NoError(t, auth("grafana", "g"), "the users loaded before stay")
	assert.NoError(t, auth("prometheus", "two"))

	vol.update("grafana:" + hash(t, "g2") + "\n")
	require.Eventually(t, func() bool { return auth("grafana", "g2") == nil }, 5*time.Second, 5*time.Millisecond)
	assert.ErrorIs(t, auth("prometheus", "two"), errUnauthorized)
	reloaded = logs.FilterMessage("Basic auth htpasswd_file reloaded").All()
	require.Len(t, reloaded, 2)
	assert.EqualValues(t, 1, reloaded[1].ContextMap()["users"])
}

// TestReloadKeepsUsersOnBadFile: a missing, empty or malformed file, or one that lists a
// user twice, keeps the users loaded before, each logged at error; reading the same good
// file again changes nothing and logs nothing.
func TestReloadKeepsUsersOnBadFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "htpasswd")
	good := "grafana:" + hash(t, "g") + "\n"
	writeFile(t, file, good)
	p := &probe{}
	a, logs := probed(t, config(func(c *Config) {
		c.HtpasswdFile = file
		c.ReloadInterval = 0
	}), p)
	loaded := a.current.Load()
	a.reload()
	assert.True(t, loaded == a.current.Load(), "unchanged content")
	assert.Equal(t, 1, logs.Len(), "only Start's line")

	for name, change := range map[string]func(){
		"missing":   func() { require.NoError(t, os.Remove(file)) },
		"empty":     func() { writeFile(t, file, "# nobody\n") },
		"malformed": func() { writeFile(t, file, "grafana\n") },
		"duplicate": func() { writeFile(t, file, good+good) },
	} {
		change()
		errorsBefore := logs.FilterLevelExact(zapcore.ErrorLevel).Len()
		a.reload()
		assert.True(t, loaded == a.current.Load(), name)
		assert.Equal(t, errorsBefore+1, logs.FilterLevelExact(zapcore.ErrorLevel).Len(), name)
		_, err := a.Authenticate(context.Background(), basic("grafana", "g"))
		assert.NoError(t, err, name)
		writeFile(t, file, good)
		a.reload() // back to the loaded content: logged as such, users unchanged
		assert.True(t, loaded == a.current.Load(), name)
	}
	assert.Equal(t, 4, logs.FilterMessage("Basic auth htpasswd_file is valid again, unchanged").Len())
}
