package basicauthserverextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/basicauthserverextension"

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
	"golang.org/x/crypto/bcrypt"
)

// Defaults of the settings that bound the work an unauthenticated client can cause and
// that reload the file. Each is explained in Config and in the README.
const (
	defaultReloadInterval      = 5 * time.Second
	defaultMaxConcurrentChecks = 1
	defaultMaxQueuedChecks     = 32
	defaultCacheSize           = 256
)

// Config lists who may connect: users with bcrypt hashes of their passwords, inline (as
// exporter-toolkit's basic_auth_users) and/or from an htpasswd file (user:hash per line,
// bcrypt only, as `htpasswd -B` writes it; e.g. a mounted Secret).
type Config struct {
	// Users maps a user name to the bcrypt hash of its password.
	Users map[string]configopaque.String `mapstructure:"users"`
	// HtpasswdFile is a file of user:bcrypt-hash lines; # starts a comment.
	HtpasswdFile string `mapstructure:"htpasswd_file"`
	// ReloadInterval is how often the htpasswd file is read again (its content compared by
	// SHA-256) to pick up changed users; 0 reads it only at start.
	ReloadInterval time.Duration `mapstructure:"reload_interval"`
	// MaxConcurrentChecks is how many bcrypt comparisons may run at once (0 means 1).
	MaxConcurrentChecks int `mapstructure:"max_concurrent_checks"`
	// MaxQueuedChecks is how many requests may wait for a comparison; one more is refused
	// at once (401), and a waiting one is refused when its request ends.
	MaxQueuedChecks int `mapstructure:"max_queued_checks"`
	// CacheSize is how many successful checks (user and an HMAC of the password, never the
	// password) are remembered, so that a returning client costs no bcrypt work; 0: none.
	CacheSize int `mapstructure:"cache_size"`
}

// Validate checks that there is at least one user, that every inline hash is bcrypt and
// that no bound is negative; the file is read (and checked the same way) when the
// extension starts.
func (c *Config) Validate() error {
	if len(c.Users) == 0 && c.HtpasswdFile == "" {
		return errors.New("users or htpasswd_file: at least one user is needed")
	}
	var errs []error
	for _, name := range sortedNames(c.Users) {
		if err := checkUser(name, string(c.Users[name])); err != nil {
			errs = append(errs, fmt.Errorf("users: %w", err))
		}
	}
	if c.ReloadInterval < 0 {
		errs = append(errs, fmt.Errorf("reload_interval: %v is negative (0 turns reloading off)", c.ReloadInterval))
	}
	if c.MaxConcurrentChecks < 0 {
		errs = append(errs, fmt.Errorf("max_concurrent_checks: %d is negative", c.MaxConcurrentChecks))
	}
	if c.MaxQueuedChecks < 0 {
		errs = append(errs, fmt.Errorf("max_queued_checks: %d is negative", c.MaxQueuedChecks))
	}
	if c.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("cache_size: %d is negative (0 turns the cache off)", c.CacheSize))
	}
	return errors.Join(errs...)
}

func sortedNames(users map[string]configopaque.String) []string {
	names := make([]string, 0, len(users))
	for n := range users {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// checkUser rejects an empty or colon-bearing name and a hash that is not bcrypt (a plain
// password would otherwise never match, silently).
func checkUser(name, hash string) error {
	if name == "" || strings.Contains(name, ":") {
		return fmt.Errorf("user %q: a name must be non-empty and without ':'", name)
	}
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		return fmt.Errorf("user %q: not a bcrypt hash (make one with `htpasswd -nB %s`): %w", name, name, err)
	}
	return nil
}

// loadUsers merges the inline users with the file's; a user in both is an error, and so is
// having no user at all. It returns the SHA-256 of the file's content too (zero without a
// file), by which a reload tells whether the file changed.
func (c *Config) loadUsers() (map[string][]byte, [sha256.Size]byte, error) {
	users := map[string][]byte{}
	for name, hash := range c.Users {
		users[name] = []byte(hash)
	}
	if c.HtpasswdFile == "" {
		return users, [sha256.Size]byte{}, nil
	}
	raw, err := os.ReadFile(c.HtpasswdFile)
	if err != nil {
		return nil, [sha256.Size]byte{}, fmt.Errorf("htpasswd_file: %w", err)
	}
	digest := sha256.Sum256(raw)
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hash, ok := strings.Cut(line, ":")
		if !ok {
			return nil, digest, fmt.Errorf("htpasswd_file %s line %d: want user:hash", c.HtpasswdFile, i+1)
		}
		if err := checkUser(name, hash); err != nil {
			return nil, digest, fmt.Errorf("htpasswd_file %s line %d: %w", c.HtpasswdFile, i+1, err)
		}
		if _, dup := users[name]; dup {
			return nil, digest, fmt.Errorf("htpasswd_file %s line %d: user %q is listed twice", c.HtpasswdFile, i+1, name)
		}
		users[name] = []byte(hash)
	}
	if len(users) == 0 {
		return nil, digest, fmt.Errorf("htpasswd_file %s: no user in it", c.HtpasswdFile)
	}
	return users, digest, nil
}
