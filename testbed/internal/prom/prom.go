// Package prom runs a real Prometheus for the testbed and queries it through its HTTP API,
// the way a user or a dashboard would. The default is Prometheus 3 (built into bin/ by
// `make deps`); TESTBED_PROMETHEUS=2 runs the same tests on Debian's Prometheus 2.42, the
// compatibility row for users on older versions (`make e2e-compat`).
package prom // import "github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// Server is a running Prometheus with the remote-write receiver enabled.
type Server struct {
	Addr string
	bin  string
	args []string
	proc *proc.Process
}

// Debian2 is Debian's Prometheus 2.42 (package prometheus, installed by `make deps`).
const Debian2 = "/usr/bin/prometheus"

// Binary is the Prometheus the testbed runs by default: Prometheus 3 from bin/, or
// Debian's 2.42 when TESTBED_PROMETHEUS=2. A missing binary fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv("TESTBED_PROMETHEUS"); v {
	case "", "3":
		return proc.BuiltTool(t, "prometheus")
	case "2":
		if _, err := os.Stat(Debian2); err != nil {
			t.Fatalf("Debian's Prometheus 2.42 not found (%v): `make deps` installs it", err)
		}
		return Debian2
	default:
		t.Fatalf("TESTBED_PROMETHEUS=%q: want 3 (the default) or 2 (Debian's 2.42)", v)
		return ""
	}
}

// AgentModeFlag is the flag that runs Binary(t) as a Prometheus agent (it changed in 3.0).
func AgentModeFlag(t testing.TB) string {
	if Binary(t) == Debian2 {
		return "--enable-feature=agent"
	}
	return "--agent"
}

// Start runs the default Prometheus (Binary) on a free loopback port with its TSDB in a temp
// dir and the remote-write receiver on. extraArgs are appended (e.g. --enable-feature=...).
func Start(t testing.TB, configYAML string, extraArgs ...string) *Server {
	t.Helper()
	return StartBinary(t, Binary(t), configYAML, extraArgs...)
}

// Start3 runs Prometheus 3 whatever TESTBED_PROMETHEUS says: for what only 3 has (native
// OTLP ingestion, remote-write 2.0).
func Start3(t testing.TB, configYAML string, extraArgs ...string) *Server {
	t.Helper()
	return StartBinary(t, proc.BuiltTool(t, "prometheus"), configYAML, extraArgs...)
}

// StartBinary is Start with the Prometheus binary given.
func StartBinary(t testing.TB, bin, configYAML string, extraArgs ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if configYAML == "" {
		configYAML = "global:\n  scrape_interval: 15s\nscrape_configs: []\n"
	}
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	args := append([]string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--web.enable-remote-write-receiver",
		"--log.level=warn",
	}, extraArgs...)
	p := proc.Start(t, "prometheus", nil, bin, args...)
	p.WaitHTTP200(t, "http://"+addr+"/-/ready", 60*time.Second)
	return &Server{Addr: addr, bin: bin, args: args, proc: p}
}

// Process is the Prometheus process (for its CPU and memory).
func (s *Server) Process() *proc.Process { return s.proc }

// Stop stops Prometheus (an outage); its data stays.
func (s *Server) Stop() { s.proc.Stop(30 * time.Second) }

// Restart starts Prometheus again on the same address and data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.proc = proc.Start(t, "prometheus (restarted)", nil, s.bin, s.args...)
	s.proc.WaitHTTP200(t, "http://"+s.Addr+"/-/ready", 60*time.Second)
}

// RemoteWriteURL is where remote-write senders post.
func (s *Server) RemoteWriteURL() string { return "http://" + s.Addr + "/api/v1/write" }

// Sample is one series of an instant-vector result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Series is one series of a range-vector result.
type Series struct {
	Labels map[string]string
	Points []Point
}

// Point is one sample of a series.
type Point struct {
	T time.Time
	V float64
}

type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	} `json:"data"`
}

func (s *Server) query(q string) (*apiResponse, error) {
	resp, err := http.Get("http://" + s.Addr + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", q, r.ErrorType, r.Error)
	}
	return &r, nil
}

// Query runs an instant query whose result is a vector.
func (s *Server) Query(q string) ([]Sample, error) {
	r, err := s.query(q)
	if err != nil {
		return nil, err
	}
	return vector(q, r)
}

// Metadata is Prometheus's /api/v1/metadata: each metric family's type, help and unit, as
// Prometheus shows them to Grafana.
func (s *Server) Metadata() (map[string][]struct{ Type, Help, Unit string }, error) {
	resp, err := http.Get("http://" + s.Addr + "/api/v1/metadata")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string                                         `json:"status"`
		Data   map[string][]struct{ Type, Help, Unit string } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("metadata: status %q", r.Status)
	}
	return r.Data, nil
}

// QueryRange runs an instant query of a range selector (e.g. `x[5m]`) and returns the raw
// samples of each series.
func (s *Server) QueryRange(q string) ([]Series, error) {
	r, err := s.query(q)
	if err != nil {
		return nil, err
	}
	if r.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("query %q: result is a %s, not a matrix", q, r.Data.ResultType)
	}
	out := make([]Series, 0, len(r.Data.Result))
	for _, raw := range r.Data.Result {
		var v struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		series := Series{Labels: v.Metric}
		for _, pv := range v.Values {
			ts, _ := pv[0].(float64)
			f, err := parseValue(pv[1])
			if err != nil {
				return nil, err
			}
			series.Points = append(series.Points, Point{T: time.Unix(0, int64(ts*1e9)), V: f})
		}
		out = append(out, series)
	}
	return out, nil
}

func parseValue(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("unexpected sample value %v", v)
	}
	return strconv.ParseFloat(s, 64)
}

// Eventually retries check until it returns nil or the timeout passes, and fails the test
// with the last error.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = check(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s: %v", what, timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
