//go:build e2e

package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// A minimal valid pipeline; each case below breaks one thing in it.
const validPipeline = `
receivers:
  gpu:
%s
processors:
  gpu_enrich:
%s
exporters:
  debug: {}
service:
  pipelines:
    metrics:
      receivers: [gpu]
      processors: [gpu_enrich]
      exporters: [debug]
`

// TestInvalidConfigsAreRejectedNamingTheField runs `otelcol-gpu validate` on configs that
// are wrong in one place each: it must exit non-zero, say which field, and never panic.
func TestInvalidConfigsAreRejectedNamingTheField(t *testing.T) {
	for name, c := range map[string]struct{ receiver, processor, field string }{
		"unknown backend":           {"    backend: cuda", "", "backend"},
		"zero interval":             {"    collection_interval: 0s", "", "collection_interval"},
		"interval not a duration":   {"    collection_interval: often", "", "collection_interval"},
		"negative timeout":          {"    timeout: -1s", "", "timeout"},
		"timeout over interval":     {"    collection_interval: 1s\n    timeout: 5s", "", "timeout"},
		"relative library path":     {"    nvml: {library_path: libnvidia-ml.so.1}", "", "nvml.library_path"},
		"zero retry":                {"    nvml: {init_retry: {initial_interval: 0s}}", "", "nvml.init_retry.initial_interval"},
		"retry max below initial":   {"    nvml: {init_retry: {initial_interval: 1m, max_interval: 1s}}", "", "nvml.init_retry.max_interval"},
		"unknown system":            {"    backend: simulated\n    simulated: {system: dgx2}", "", "simulated.system"},
		"unknown scenario":          {"    backend: simulated\n    simulated: {scenario: on-fire}", "", "simulated.scenario"},
		"device filter junk":        {"    include_devices: [first]", "", "include_devices[0]"},
		"device listed twice":       {"    include_devices: [\"2\", \"2\"]", "", "include_devices[1]"},
		"misspelt receiver key":     {"    colection_interval: 10s", "", "colection_interval"},
		"unknown metric":            {"    metrics: {hw.gpu.temperature: {enabled: true}}", "", "hw.gpu.temperature"},
		"metric enabled not a bool": {"    metrics: {hw.power: {enabled: sometimes}}", "", "enabled"},
		"kubelet endpoint relative": {"", "    kubelet: {endpoint: kubelet.sock}", "kubelet.endpoint"},
		"kubelet endpoint tcp":      {"", "    kubelet: {endpoint: \"tcp://1.2.3.4:10250\"}", "kubelet.endpoint"},
		"kubelet refresh zero":      {"", "    kubelet: {refresh_interval: 0s}", "kubelet.refresh_interval"},
		"no resource names":         {"", "    kubelet: {resource_names: []}", "kubelet.resource_names"},
		"bad resource wildcard":     {"", "    kubelet: {resource_names: [\"a*b\"]}", "kubelet.resource_names[0]"},
		"proc root relative":        {"", "    processes: {proc_root: proc}", "processes.proc_root"},
		"idle threshold as percent": {"", "    idle: {threshold: 5}", "idle.threshold"},
		"leak window zero":          {"", "    leak: {window: 0s}", "leak.window"},
		"leak growth over 1":        {"", "    leak: {min_growth: 2}", "leak.min_growth"},
		"saturation zero":           {"", "    bottleneck: {saturation: 0}", "bottleneck.saturation"},
		"misspelt processor key":    {"", "    idle: {treshold: 0.1}", "treshold"},
	} {
		t.Run(name, func(t *testing.T) {
			recv, procCfg := c.receiver, c.processor
			if recv == "" {
				recv = "    backend: simulated"
			}
			if procCfg == "" {
				procCfg = "    processes: {enabled: false}"
			}
			path := filepath.Join(t.TempDir(), "config.yaml")
			doc := strings.Replace(strings.Replace(validPipeline, "%s", recv, 1), "%s", procCfg, 1)
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(proc.CollectorBinary(t), "validate", "--config", path).CombinedOutput()
			if err == nil {
				t.Fatalf("accepted:\n%s", doc)
			}
			if strings.Contains(string(out), "panic") {
				t.Fatalf("panicked:\n%s", out)
			}
			if !strings.Contains(string(out), c.field) {
				t.Fatalf("the error does not name %q:\n%s", c.field, out)
			}
		})
	}
}
