package prom

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// StartVictoriaMetrics runs VictoriaMetrics single-node (built into bin/ by `make deps`) on
// a free loopback port. It takes Prometheus remote-write at /api/v1/write and OTLP at
// /opentelemetry/v1/metrics, and answers the Prometheus query API, so the returned Server's
// RemoteWriteURL, Query, Stop and Restart work on it. extraArgs are appended.
func StartVictoriaMetrics(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	bin := proc.BuiltTool(t, "victoria-metrics")
	addr := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	args := []string{
		"-storageDataPath=" + filepath.Join(t.TempDir(), "vm"),
		"-httpListenAddr=" + addr,
		// VictoriaMetrics hides samples younger than this (30 s by default) from queries.
		"-search.latencyOffset=1s",
		"-loggerLevel=WARN",
	}
	args = append(args, extraArgs...)
	p := proc.Start(t, "victoria-metrics", nil, bin, args...)
	p.WaitHTTP200(t, "http://"+addr+"/health", 60*time.Second)
	return &Server{Addr: addr, bin: bin, args: args, proc: p}
}
