package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/deploy/test/kpsgen"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"sigs.k8s.io/yaml"
)

// TestKubePrometheusStackIsCurrent: the committed PrometheusRules and dashboard ConfigMaps
// are what rules/ and dashboards/ generate now.
func TestKubePrometheusStackIsCurrent(t *testing.T) {
	root := repoRoot(t)
	want, err := kpsgen.Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, kpsgen.OutputDir)
	for _, name := range []string{"prometheusrules.yaml", "dashboards.yaml", "kustomization.yaml"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		exp, generated := want[name]
		switch {
		case !generated && err == nil:
			t.Errorf("%s/%s is committed but nothing generates it any more", kpsgen.OutputDir, name)
		case generated && string(got) != string(exp):
			t.Errorf("%s/%s is stale: cd deploy/test && go run ./cmd/kpsgen", kpsgen.OutputDir, name)
		}
	}
	// Every rule file and dashboard made it in.
	rules, _ := filepath.Glob(filepath.Join(root, "rules", "*.yaml"))
	o := decodeManifests(t, want["prometheusrules.yaml"], want["dashboards.yaml"])
	if len(o.unstructured["PrometheusRule"]) != len(rules) {
		t.Errorf("%d PrometheusRules for %d rule files", len(o.unstructured["PrometheusRule"]), len(rules))
	}
	dashboards, _ := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if len(o.configMaps) != len(dashboards) {
		t.Errorf("%d dashboard ConfigMaps for %d dashboards", len(o.configMaps), len(dashboards))
	}
	for _, d := range dashboards {
		raw, _ := os.ReadFile(d)
		found := false
		for _, cm := range o.configMaps {
			if cm.Data[filepath.Base(d)] == string(raw) && cm.Labels["grafana_dashboard"] == "1" {
				found = true
			}
		}
		if !found {
			t.Errorf("no ConfigMap labelled grafana_dashboard=1 carries %s verbatim", filepath.Base(d))
		}
	}
}

// TestKPSGenWithoutSources: a checkout without rules/ or dashboards/ generates a valid,
// empty-handed kustomization rather than failing.
func TestKPSGenWithoutSources(t *testing.T) {
	files, err := kpsgen.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["prometheusrules.yaml"]; ok {
		t.Error("rules generated from nothing")
	}
	if !strings.Contains(string(files["kustomization.yaml"]), "podmonitor.yaml") {
		t.Error("the kustomization lost the PodMonitor")
	}
}

// TestAutoscaling: the prometheus-adapter rule is query.promql with the adapter's
// placeholders, and the HPA asks for the metric the rule exposes.
func TestAutoscaling(t *testing.T) {
	query := strings.TrimSpace(string(readRepoFile(t, "deploy/autoscaling/query.promql")))
	var values struct {
		Rules struct {
			Custom []struct {
				SeriesQuery string `json:"seriesQuery"`
				Resources   struct {
					Overrides map[string]struct {
						Resource string `json:"resource"`
					} `json:"overrides"`
				} `json:"resources"`
				Name struct {
					Matches string `json:"matches"`
					As      string `json:"as"`
				} `json:"name"`
				MetricsQuery string `json:"metricsQuery"`
			} `json:"custom"`
		} `json:"rules"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/autoscaling/prometheus-adapter-values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	if len(values.Rules.Custom) != 1 {
		t.Fatalf("want one custom rule, got %d", len(values.Rules.Custom))
	}
	rule := values.Rules.Custom[0]
	// What the adapter sends for "every pod": group by both resource labels, match them
	// as the seriesQuery does.
	matchers := regexp.MustCompile(`\{(.*)\}`).FindStringSubmatch(rule.SeriesQuery)
	if matchers == nil {
		t.Fatalf("seriesQuery %q has no label matchers", rule.SeriesQuery)
	}
	expanded := strings.NewReplacer(
		"<<.GroupBy>>", "k8s_namespace_name, k8s_pod_name",
		"<<.LabelMatchers>>", matchers[1],
	).Replace(rule.MetricsQuery)
	norm := func(s string) string { return strings.Join(strings.Fields(strings.ReplaceAll(s, ",", ", ")), " ") }
	if norm(expanded) != norm(query) {
		t.Errorf("adapter metricsQuery expands to\n  %s\nbut query.promql is\n  %s", norm(expanded), norm(query))
	}
	if rule.Resources.Overrides["k8s_namespace_name"].Resource != "namespace" || rule.Resources.Overrides["k8s_pod_name"].Resource != "pod" {
		t.Errorf("resource overrides = %+v", rule.Resources.Overrides)
	}
	if !regexp.MustCompile(rule.Name.Matches).MatchString("nvidia_gpu_pod_utilization_ratio") {
		t.Errorf("name.matches %q does not match the series", rule.Name.Matches)
	}

	var hpa autoscalingv2.HorizontalPodAutoscaler
	if err := yaml.UnmarshalStrict(readRepoFile(t, "deploy/autoscaling/hpa-example.yaml"), &hpa); err != nil {
		t.Fatalf("hpa-example.yaml: %v", err)
	}
	m := hpa.Spec.Metrics[0]
	if m.Type != autoscalingv2.PodsMetricSourceType || m.Pods.Metric.Name != rule.Name.As {
		t.Errorf("HPA metric %+v does not use the adapter's %q", m, rule.Name.As)
	}
	if v := m.Pods.Target.AverageValue; v == nil || v.MilliValue() <= 0 || v.MilliValue() > 1000 {
		t.Errorf("target %v is not a utilization ratio in (0, 1]", v)
	}
}
