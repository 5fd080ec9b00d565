package authauditextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/authauditextension"

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Config of the auth_audit extension.
type Config struct {
	// Authenticator is the server authenticator that decides (e.g. bearertokenauth/agents).
	Authenticator component.ID `mapstructure:"authenticator"`
	// LogInterval bounds the log: the first refusal after a quiet interval is logged at
	// once, later ones are summed into one line per interval (counts by reason and the
	// clients that caused most).
	LogInterval time.Duration `mapstructure:"log_interval"`
	// TopClients is how many client addresses a summary line names.
	TopClients int `mapstructure:"top_clients"`
	// RequireAttributes holds an accepted identity to more than the audited authenticator
	// checks: each key names an attribute of the identity it returned ("subject", or a
	// nested claim as "claims.kubernetes.io/node/name": the attribute, then keys into its
	// map), each value is a regular expression the attribute's whole value must match. A
	// request whose identity lacks one or fails one is refused (reason "identity"). The
	// gateway uses it so that only the agents' ServiceAccount, with a token bound to a pod
	// on a node, is accepted: contrib's oidc checks issuer, audience and signature only.
	RequireAttributes map[string]string `mapstructure:"require_attributes"`
}

// requirement is one compiled entry of require_attributes.
type requirement struct {
	attribute string   // the name passed to client.AuthData.GetAttribute
	path      []string // keys into its nested maps
	name      string   // the entry's key as configured, for messages
	pattern   *regexp.Regexp
}

// requirements compiles require_attributes, in a stable order.
func (c *Config) requirements() ([]requirement, error) {
	names := make([]string, 0, len(c.RequireAttributes))
	for name := range c.RequireAttributes {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []requirement
	var errs []error
	for _, name := range names {
		parts := strings.Split(name, "/")
		if slices.Contains(parts, "") {
			errs = append(errs, fmt.Errorf("require_attributes: %q: an attribute name, then optional /keys into its value (e.g. claims.kubernetes.io/node/name)", name))
			continue
		}
		re, err := regexp.Compile("^(?:" + c.RequireAttributes[name] + ")$")
		if err != nil {
			errs = append(errs, fmt.Errorf("require_attributes: %q: %w", name, err))
			continue
		}
		out = append(out, requirement{attribute: parts[0], path: parts[1:], name: name, pattern: re})
	}
	return out, errors.Join(errs...)
}

const (
	defaultLogInterval = time.Minute
	defaultTopClients  = 5
)

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Authenticator.String() == "" || c.Authenticator.Type().String() == "" {
		errs = append(errs, errors.New("authenticator: required, the id of the server authenticator to audit (e.g. bearertokenauth/agents)"))
	}
	if c.LogInterval <= 0 {
		errs = append(errs, fmt.Errorf("log_interval: must be positive, got %s", c.LogInterval))
	}
	if c.TopClients < 1 {
		errs = append(errs, fmt.Errorf("top_clients: must be at least 1, got %d", c.TopClients))
	}
	if _, err := c.requirements(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
