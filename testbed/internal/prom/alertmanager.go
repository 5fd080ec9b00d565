package prom

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// Alertmanager is a running Alertmanager (0.31, built into bin/ by `make deps`) that sends
// every alert to a webhook inside the test.
type Alertmanager struct {
	Addr string

	mu       sync.Mutex
	received []WebhookAlert
}

// WebhookAlert is one alert as Alertmanager's webhook delivers it.
type WebhookAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// StartAlertmanager runs Alertmanager with a route that delivers everything at once.
func StartAlertmanager(t testing.TB) *Alertmanager {
	t.Helper()
	bin := proc.BuiltTool(t, "alertmanager")
	am := &Alertmanager{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Alerts []WebhookAlert `json:"alerts"`
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err == nil {
			am.mu.Lock()
			am.received = append(am.received, msg.Alerts...)
			am.mu.Unlock()
		}
	}))
	t.Cleanup(hook.Close)

	dir := t.TempDir()
	cfg := fmt.Sprintf(`route:
  receiver: test
  group_by: [alertname, host_name]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: test
    webhook_configs:
      - url: %s
        send_resolved: false
`, hook.URL)
	path := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	am.Addr = fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	p := proc.Start(t, "alertmanager", nil, bin,
		"--config.file="+path,
		"--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+am.Addr,
		"--cluster.listen-address=",
		"--log.level=warn",
	)
	p.WaitHTTP200(t, "http://"+am.Addr+"/-/ready", 60*time.Second)
	return am
}

// Received returns the alerts delivered to the webhook so far.
func (am *Alertmanager) Received() []WebhookAlert {
	am.mu.Lock()
	defer am.mu.Unlock()
	return append([]WebhookAlert(nil), am.received...)
}
