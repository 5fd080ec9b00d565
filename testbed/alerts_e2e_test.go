//go:build e2e

package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// forScale shrinks the shipped rules' `for:` durations for the testbed only: a minute of
// production becomes a second here, so that alerts fire within the test.
var forDuration = regexp.MustCompile(`(?m)^(\s+for:\s*)(\d+)([smh])\s*$`)

func fastRules(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(proc.RepoRoot(), "rules", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rules: %v", err)
	}
	dir := t.TempDir()
	var out []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fast := forDuration.ReplaceAllStringFunc(string(raw), func(m string) string {
			parts := forDuration.FindStringSubmatch(m)
			n, _ := strconv.Atoi(parts[2])
			seconds := map[string]int{"s": 1, "m": 60, "h": 3600}[parts[3]] * n / 60
			return fmt.Sprintf("%s%ds", parts[1], max(seconds, 1))
		})
		path := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(path, []byte(fast), 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, path)
	}
	return out
}

// allocatedNode: a kubelet that gives GPU i to ml/train-i, so attribution is fresh.
func allocatedNode(t *testing.T, system string) agentNode {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	uuids := simulatedUUIDs(t, system)
	var pods []fakekubelet.Pod
	for i, u := range uuids {
		pods = append(pods, fakekubelet.Pod{Namespace: "ml", Name: fmt.Sprintf("train-%d", i), Containers: []fakekubelet.Container{
			{Name: "pytorch", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{u}}}},
		}})
	}
	socket := filepath.Join(dir, "kubelet.sock")
	startFakeKubelet(t, socket, pods, []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: uuids}})
	return agentNode{kubeletSocket: socket}
}

// TestScenariosFireTheirAlerts loads the shipped rules (with shortened `for:`) into a real
// Prometheus wired to a real Alertmanager, runs one agent per scenario, and checks that
// each scenario's alert fires and reaches the webhook, while steady training fires nothing.
func TestScenariosFireTheirAlerts(t *testing.T) {
	am := prom.StartAlertmanager(t)
	rules := fastRules(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 15s
  evaluation_interval: 1s
rule_files: [%s]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["%s"]
scrape_configs: []
`, strings.Join(rules, ", "), am.Addr)
	p := prom.Start(t, cfg)

	windows := []string{
		"processors::gpu_enrich::idle::window=10s",
		"processors::gpu_enrich::leak::window=20s",
	}
	steady := allocatedNode(t, "dgxh100")
	steady.sets = windows
	startAgentOn(t, p, "e2e-steady", "dgxh100", "steady-training", steady)
	idle := allocatedNode(t, "dgxa100")
	idle.sets = windows
	startAgentOn(t, p, "e2e-idle", "dgxa100", "idle", idle)
	startAgentOn(t, p, "e2e-hot", "dgxh100", "thermal-throttle", agentNode{sets: windows})
	startAgentOn(t, p, "e2e-leak", "dgxh200", "memory-leak", agentNode{sets: windows})
	startAgentOn(t, p, "e2e-lost", "dgxb200", "gpu-lost", agentNode{sets: windows})
	startAgentOn(t, p, "e2e-xid", "dgxh100", "xid-storm", agentNode{sets: windows})

	expect := map[string][]string{
		"e2e-hot":  {"GPUThermalThrottling", "GPUTemperatureHigh"},
		"e2e-leak": {"GPUMemoryLeakSuspected"},
		"e2e-lost": {"GPUFailed", "GPUXidErrorFatal"},
		"e2e-xid":  {"GPUXidError", "GPUDegraded"},
		"e2e-idle": {"GPUIdleWhileAllocated"},
	}
	for host, alerts := range expect {
		for _, alert := range alerts {
			prom.Eventually(t, 3*time.Minute, alert+" on "+host+" reaches the webhook", func() error {
				for _, a := range am.Received() {
					if a.Labels["alertname"] == alert && a.Labels["host_name"] == host {
						for _, key := range []string{"summary", "description", "runbook_url"} {
							if a.Annotations[key] == "" {
								return fmt.Errorf("%s arrived without %s: %v", alert, key, a.Annotations)
							}
						}
						if a.Labels["severity"] == "" {
							return fmt.Errorf("%s has no severity", alert)
						}
						return nil
					}
				}
				return fmt.Errorf("not received yet")
			})
		}
	}

	firing, err := p.Query(`ALERTS{alertstate="firing",host_name="e2e-steady"}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range firing {
		t.Errorf("steady training fired %s: %v", a.Labels["alertname"], a.Labels)
	}
	for _, a := range am.Received() {
		if a.Labels["host_name"] == "e2e-steady" {
			t.Errorf("steady training notified %s", a.Labels["alertname"])
		}
	}
}
