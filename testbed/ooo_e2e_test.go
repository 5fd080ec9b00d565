//go:build e2e

package testbed

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// outageProxy forwards remote-write requests to target, or answers 503 while down.
type outageProxy struct {
	target string
	down   atomic.Bool
}

func (o *outageProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.down.Load() {
		http.Error(w, "backend down", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, o.target, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// tsdbCounter reads one of Prometheus's own counters from its /metrics.
func tsdbCounter(t *testing.T, p *prom.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var total float64
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			total += v
		}
	}
	return total
}

// TestOutOfOrderWindowRejectsTooOldAndDeliveryGoesOn: Prometheus 3 with a 20 s out-of-order
// window, and two agents with the same identity (a host name reused), one of them cut off
// for 40 s. When it comes back, its buffered samples older than the window are refused
// (400, "too old sample"), the agent logs the drop and delivers the rest; samples
// within the window are taken out of order. Neither agent stops.
func TestOutOfOrderWindowRejectsTooOldAndDeliveryGoesOn(t *testing.T) {
	p := prom.Start3(t, "global:\n  scrape_interval: 15s\nstorage:\n  tsdb:\n    out_of_order_time_window: 20s\n")
	live := startAgentOn(t, p, "ooo-twin", "dgxh100", "steady-training", agentNode{})
	proxy := &outageProxy{target: p.RemoteWriteURL()}
	proxy.down.Store(true)
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	late := startAgentOn(t, &prom.Server{Addr: strings.TrimPrefix(srv.URL, "http://")}, "ooo-twin", "dgxh100", "steady-training", agentNode{})

	time.Sleep(40 * time.Second) // the late agent buffers 40 s, twice the window
	proxy.down.Store(false)

	prom.Eventually(t, 60*time.Second, "too-old samples refused and logged", func() error {
		if n := tsdbCounter(t, p, "prometheus_tsdb_too_old_samples_total"); n == 0 {
			return fmt.Errorf("Prometheus refused no sample as too old")
		}
		// prometheus_remote_write logs the status and Prometheus's reason ("failed to send
		// WriteRequest to remote endpoint" with "status": "400 Bad Request" and the body,
		// "too old sample"), then the exporter helper the drop ("Exporting failed. Dropping
		// data.").
		if out := late.Output(); !strings.Contains(out, "Dropping data") || !strings.Contains(out, `"status": "400 Bad Request"`) || !strings.Contains(out, "too old sample") {
			return fmt.Errorf("the late agent logged no refusal naming its reason")
		}
		return nil
	})
	prom.Eventually(t, 60*time.Second, "samples within the window taken out of order", func() error {
		if n := tsdbCounter(t, p, "prometheus_tsdb_head_out_of_order_samples_appended_total"); n == 0 {
			return fmt.Errorf("no out-of-order sample appended")
		}
		return nil
	})
	for _, a := range []struct {
		name   string
		exited func() (bool, error)
	}{{"live", live.Exited}, {"late", late.Exited}} {
		if exited, err := a.exited(); exited {
			t.Errorf("the %s agent exited: %v", a.name, err)
		}
	}
}
