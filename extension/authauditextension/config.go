package authauditextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/authauditextension"

import (
	"errors"
	"fmt"
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
	return errors.Join(errs...)
}
