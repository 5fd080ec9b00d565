package basicauthserverextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/basicauthserverextension"

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/config/configopaque"
	"golang.org/x/crypto/bcrypt"
)

// Config lists who may connect: users with bcrypt hashes of their passwords, inline (as
// exporter-toolkit's basic_auth_users) and/or from an htpasswd file (user:hash per line,
// bcrypt only, as `htpasswd -B` writes it; e.g. a mounted Secret).
type Config struct {
	// Users maps a user name to the bcrypt hash of its password.
	Users map[string]configopaque.String `mapstructure:"users"`
	// HtpasswdFile is a file of user:bcrypt-hash lines; # starts a comment.
	HtpasswdFile string `mapstructure:"htpasswd_file"`
}

// Validate checks that there is at least one user and that every inline hash is bcrypt;
// the file is read (and checked the same way) when the extension starts.
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

// loadUsers merges the inline users with the file's; a user in both is an error.
func (c *Config) loadUsers() (map[string][]byte, error) {
	users := map[string][]byte{}
	for name, hash := range c.Users {
		users[name] = []byte(hash)
	}
	if c.HtpasswdFile == "" {
		return users, nil
	}
	raw, err := os.ReadFile(c.HtpasswdFile)
	if err != nil {
		return nil, fmt.Errorf("htpasswd_file: %w", err)
	}
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hash, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("htpasswd_file %s line %d: want user:hash", c.HtpasswdFile, i+1)
		}
		if err := checkUser(name, hash); err != nil {
			return nil, fmt.Errorf("htpasswd_file %s line %d: %w", c.HtpasswdFile, i+1, err)
		}
		if _, dup := users[name]; dup {
			return nil, fmt.Errorf("htpasswd_file %s line %d: user %q is listed twice", c.HtpasswdFile, i+1, name)
		}
		users[name] = []byte(hash)
	}
	return users, nil
}
