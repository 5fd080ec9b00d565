package drainextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/drainextension"

import (
	"errors"
	"time"
)

// Config says how long shutdown may spend sending, and what a refused request means for
// its data (only the log's wording depends on it).
type Config struct {
	// FlushTimeout is the time from the start of shutdown during which requests still go
	// out; it must be shorter than the supervisor's grace period (Kubernetes'
	// terminationGracePeriodSeconds, systemd's TimeoutStopSec).
	FlushTimeout time.Duration `mapstructure:"flush_timeout"`
	// OnDisk says the exporters keep what they could not send on disk (a remote-write WAL):
	// the log then says the data waits there for the restart instead of calling it dropped.
	OnDisk bool `mapstructure:"on_disk"`
}

// Validate refuses a flush timeout that is zero or negative: zero would drop everything
// buffered at every shutdown, even a quick one with the backend up.
func (c *Config) Validate() error {
	if c.FlushTimeout <= 0 {
		return errors.New("flush_timeout must be positive (e.g. 20s, shorter than the grace period before SIGKILL); to wait without a bound, leave the extension out")
	}
	return nil
}
