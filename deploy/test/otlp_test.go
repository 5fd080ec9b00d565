package deploytest

import (
	"path"
	"slices"
	"testing"
)

// TestOTLPPromotesWhatRemoteWritePromotes: deploy/prometheus/otlp.yaml lists, by exact
// name, every resource attribute that configs/agent.yaml's remote-write promotes by
// pattern — those the receiver and gpu_enrich declare in their metadata.yaml and those
// k8s_attributes extracts, deploy/config-overlays/node-pool.yaml included —, so the native OTLP path labels series as remote-write does on
// every kind of node (Kubernetes, MIG, Slurm) and with every opt-in attribute on.
func TestOTLPPromotesWhatRemoteWritePromotes(t *testing.T) {
	agent := loadYAML(t, "configs/agent.yaml")
	prw := agent["exporters"].(map[string]any)["prometheus_remote_write"].(map[string]any)
	var patterns []string
	for _, p := range prw["resource_constant_labels"].(map[string]any)["included"].([]any) {
		patterns = append(patterns, p.(string))
	}
	promoted := func(attr string) bool {
		for _, p := range patterns {
			// The exporter's patterns are globs on the attribute name.
			if ok, _ := path.Match(p, attr); ok {
				return true
			}
		}
		return false
	}

	var attrs []string
	for _, f := range []string{"receiver/gpureceiver/metadata.yaml", "processor/gpuenrichprocessor/metadata.yaml"} {
		for a := range loadYAML(t, f)["resource_attributes"].(map[string]any) {
			attrs = append(attrs, a)
		}
	}
	k8s := agent["processors"].(map[string]any)["k8s_attributes"].(map[string]any)["extract"].(map[string]any)
	for _, m := range k8s["metadata"].([]any) {
		attrs = append(attrs, m.(string))
	}
	// With the node-pool overlay's labels too (its list holds agent.yaml's and the pool).
	overlay := loadYAML(t, "deploy/config-overlays/node-pool.yaml")
	for _, labels := range []any{k8s["labels"], dig(overlay, "processors", "k8s_attributes", "extract", "labels")} {
		for _, l := range labels.([]any) {
			attrs = append(attrs, l.(map[string]any)["tag_name"].(string))
		}
	}
	var want []string
	for _, a := range attrs {
		if promoted(a) && !slices.Contains(want, a) {
			want = append(want, a)
		}
	}
	slices.Sort(want)

	var got []string
	for _, a := range loadYAML(t, "deploy/prometheus/otlp.yaml")["otlp"].(map[string]any)["promote_resource_attributes"].([]any) {
		got = append(got, a.(string))
	}
	slices.Sort(got)
	for _, a := range want {
		if !slices.Contains(got, a) {
			t.Errorf("deploy/prometheus/otlp.yaml does not promote %s (remote-write does)", a)
		}
	}
}
