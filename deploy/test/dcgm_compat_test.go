package deploytest

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// TestDCGMCompatOverlayMergesInAnyOrder: configs/dcgm-compat.yaml and
// deploy/config-overlays/full.yaml merge to the same configuration whichever comes first.
// Merged configs replace a list by the later file's, so a list both files set must be the
// same in both (profiling.activities once lost SM occupancy and the FP pipes when full.yaml
// came first); the test names the first such list that differs.
func TestDCGMCompatOverlayMergesInAnyOrder(t *testing.T) {
	root := repoRoot(t)
	agent := filepath.Join(root, "configs", "agent.yaml")
	compat := filepath.Join(root, "configs", "dcgm-compat.yaml")
	full := filepath.Join(root, "deploy", "config-overlays", "full.yaml")
	fullFirst, err := mergeConfigs(agent, full, compat)
	if err != nil {
		t.Fatal(err)
	}
	compatFirst, err := mergeConfigs(agent, compat, full)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fullFirst, compatFirst) {
		t.Errorf("full.yaml before and after dcgm-compat.yaml merge differently: %s", firstDifference("", fullFirst, compatFirst))
	}
	fullCfg, err := mergeConfigs(full)
	if err != nil {
		t.Fatal(err)
	}
	compatCfg, err := mergeConfigs(compat)
	if err != nil {
		t.Fatal(err)
	}
	// The one list the two share: complete in both.
	want := []any{"graphics_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active", "fp64_active", "fp32_active", "fp16_active"}
	for name, cfg := range map[string]map[string]any{"full.yaml": fullCfg, "dcgm-compat.yaml": compatCfg} {
		if got := dig(cfg, "receivers", "gpu", "profiling", "activities"); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: profiling.activities %v, want every activity %v", name, got, want)
		}
	}
}

// firstDifference is the path of the first value that differs between a and b.
func firstDifference(path string, a, b any) string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		return fmt.Sprintf("%s: %v / %v", path, a, b)
	}
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if !reflect.DeepEqual(am[k], bm[k]) {
			return firstDifference(path+"::"+k, am[k], bm[k])
		}
	}
	return path
}

// TestDCGMCompatOverlaysLoadOnTheAgentBuild: the compatibility overlays load on the agent's
// build, which the shipped DaemonSets and systemd unit run, on their own, with the full
// overlay in either order, on a bare host and with the scrape endpoint, in every
// dcgm-exporter generation.
func TestDCGMCompatOverlaysLoadOnTheAgentBuild(t *testing.T) {
	root := repoRoot(t)
	cfg := func(rel string) string { return filepath.Join(root, rel) }
	agent, compat, full := cfg("configs/agent.yaml"), cfg("configs/dcgm-compat.yaml"), cfg("deploy/config-overlays/full.yaml")
	for name, files := range map[string][]string{
		"agent+dcgm-compat":                    {agent, compat},
		"agent+full+dcgm-compat":               {agent, full, compat},
		"agent+dcgm-compat+full":               {agent, compat, full},
		"agent+bare-host+dcgm-compat":          {agent, cfg("deploy/config-overlays/bare-host.yaml"), compat},
		"agent+dcgm-compat+scrape+secure":      {agent, compat, cfg("configs/dcgm-compat-scrape.yaml"), cfg("configs/dcgm-compat-scrape-secure.yaml")},
		"agent+dcgm-compat+remote-write-basic": {agent, compat, cfg("deploy/config-overlays/remote-write-auth-basic.yaml")},
	} {
		for _, gen := range []string{"4.8", "4.8.3", "4.9", "4.10"} {
			t.Run(name+"/"+gen, func(t *testing.T) {
				validateConfigs(t, agentBuild, map[string]string{
					"PROMETHEUS_REMOTE_WRITE_URL": "https://prometheus.example.com/api/v1/write",
					"REMOTE_WRITE_BASIC_AUTH":     "dXNlcjpwYXNzd29yZA==",
					"OTELCOL_GPU_DCGM_GENERATION": gen,
				}, files...)
			})
		}
	}
}
