package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// stopMargin is what a stop takes besides the flush timeout: the receivers and processors
// shut down, the exporters see their last refusals, extensions and telemetry close
// (measured in the testbed: about a second), with room to spare on a loaded node.
const stopMargin = 5 * time.Second

// defaultGracePeriod is Kubernetes' terminationGracePeriodSeconds when a pod sets none.
const defaultGracePeriod = 30 * time.Second

// TestGracePeriodsOutlastTheFlushTimeout: every form that runs the collector (each
// rendered DaemonSet and Deployment, the operator's resource, the systemd unit) leaves it
// longer between SIGTERM and SIGKILL than the flush timeout its own config and environment
// give the drain extension, plus stopMargin; and every remote-write or OTLP/HTTP exporter
// it runs is bounded by that extension. A SIGKILL that comes first drops the whole buffer,
// which is what the flush timeout is there to avoid.
func TestGracePeriodsOutlastTheFlushTimeout(t *testing.T) {
	for _, set := range renderedSets(t) {
		t.Run(set.name, func(t *testing.T) {
			for name, ds := range set.o.daemonSets {
				spec := ds.Spec.Template.Spec
				files, env := podConfigs(t, set.o, spec)
				checkStopBounded(t, "DaemonSet "+name, gracePeriod(spec), loadConfigs(t, files), env)
			}
			for name, d := range set.o.deployments {
				spec := d.Spec.Template.Spec
				files, env := podConfigs(t, set.o, spec)
				checkStopBounded(t, "Deployment "+name, gracePeriod(spec), loadConfigs(t, files), env)
			}
			for _, cr := range set.o.unstructured["OpenTelemetryCollector"] {
				raw, err := yaml.Marshal(cr)
				if err != nil {
					t.Fatal(err)
				}
				var c otelCollector
				if err := yaml.Unmarshal(raw, &c); err != nil {
					t.Fatal(err)
				}
				grace := defaultGracePeriod
				if s := c.Spec.TerminationGracePeriodSeconds; s != nil {
					grace = time.Duration(*s) * time.Second
				}
				env := map[string]string{}
				for _, e := range c.Spec.Env {
					env[e.Name] = e.Value
				}
				checkStopBounded(t, "OpenTelemetryCollector "+c.Metadata.Name, grace, []map[string]any{c.Spec.Config}, env)
			}
		})
	}

	t.Run("systemd", func(t *testing.T) {
		var stop time.Duration
		for _, line := range strings.Split(string(readRepoFile(t, "deploy/systemd/otelcol-gpu.service")), "\n") {
			if v, ok := strings.CutPrefix(line, "TimeoutStopSec="); ok {
				var err error
				if stop, err = time.ParseDuration(v); err != nil {
					t.Fatalf("TimeoutStopSec=%s: %v", v, err)
				}
			}
		}
		if stop == 0 {
			t.Fatal("the unit sets no TimeoutStopSec (systemd's default, 90 s, may be changed host-wide)")
		}
		env := map[string]string{}
		for _, line := range strings.Split(string(readRepoFile(t, "deploy/systemd/otelcol-gpu.env.example")), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				env[k] = v
			}
		}
		for _, overlays := range [][]string{{"bare-host.yaml"}, {"bare-host.yaml", "remote-write-wal.yaml"}} {
			files := []string{filepath.Join(repoRoot(t), "configs", "agent.yaml")}
			for _, o := range overlays {
				files = append(files, filepath.Join(repoRoot(t), "deploy", "config-overlays", o))
			}
			checkStopBounded(t, "otelcol-gpu.service with "+strings.Join(overlays, ", "), stop, loadConfigs(t, files), env)
		}
	})
}

// TestEveryOverlayKeepsTheDrainExtension: configs merge lists by replacing them, so an
// overlay that sets service.extensions must name drain again, or the remote-write
// exporter's middleware would point at an extension that is not running.
func TestEveryOverlayKeepsTheDrainExtension(t *testing.T) {
	for _, dir := range []string{"configs", "deploy/config-overlays"} {
		entries, err := os.ReadDir(filepath.Join(repoRoot(t), dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			rel := filepath.Join(dir, e.Name())
			if rel == "configs/demo.yaml" || rel == "configs/agent-to-gateway.yaml" {
				continue // configs of their own, not over agent.yaml or gateway.yaml
			}
			exts, ok := dig(loadConfigs(t, []string{filepath.Join(repoRoot(t), rel)})[0], "service", "extensions").([]any)
			if ok && !slices.Contains(exts, any("drain")) {
				t.Errorf("%s sets service.extensions %v without drain", rel, exts)
			}
		}
	}
}

func gracePeriod(spec corev1.PodSpec) time.Duration {
	if spec.TerminationGracePeriodSeconds == nil {
		return defaultGracePeriod
	}
	return time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
}

func loadConfigs(t *testing.T, files []string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, m)
	}
	return out
}

// checkStopBounded checks one collector: configs are merged in order as the collector
// merges them (maps merged, the last value or list wins).
func checkStopBounded(t *testing.T, what string, grace time.Duration, configs []map[string]any, env map[string]string) {
	t.Helper()
	last := func(path ...string) any {
		var v any
		for _, c := range configs {
			if x := dig(c, path...); x != nil {
				v = x
			}
		}
		return v
	}
	// Exporters whose shutdown only the drain extension bounds: remote-write, ours and
	// contrib's (retries
	// without a deadline from an in-memory queue) and OTLP/HTTP (one attempt per queued
	// request, each up to its timeout). otlp_grpc with its on-disk queue stops by itself.
	var unbounded []string
	for _, c := range configs {
		exporters, _ := dig(c, "exporters").(map[string]any)
		for id := range exporters {
			typ, _, _ := strings.Cut(id, "/")
			if typ != "remote_write" && typ != "prometheus_remote_write" && typ != "otlp_http" || slices.Contains(unbounded, id) {
				continue
			}
			unbounded = append(unbounded, id)
		}
	}
	if len(unbounded) == 0 {
		return
	}
	slices.Sort(unbounded)
	exts, _ := last("service", "extensions").([]any)
	if !slices.Contains(exts, any("drain")) {
		t.Errorf("%s: exporters %v, but the drain extension is not in service.extensions %v: a SIGTERM during a backend outage never ends", what, unbounded, exts)
		return
	}
	for _, id := range unbounded {
		path := []string{"exporters", id, "middlewares"}
		if strings.HasPrefix(id, "prometheus_remote_write") || strings.HasPrefix(id, "remote_write") {
			path = []string{"exporters", id, "http", "middlewares"}
		}
		mw, _ := last(path...).([]any)
		if !slices.ContainsFunc(mw, func(m any) bool { return dig(m, "id") == "drain" }) {
			t.Errorf("%s: exporter %s does not use the drain middleware (%s)", what, id, strings.Join(path, "."))
		}
	}

	flush := 20 * time.Second // the extension's default
	if v, ok := last("extensions", "drain", "flush_timeout").(string); ok {
		var err error
		if flush, err = time.ParseDuration(expandEnv(v, env)); err != nil {
			t.Errorf("%s: drain.flush_timeout %q: %v", what, v, err)
			return
		}
	}
	if grace < flush+stopMargin {
		t.Errorf("%s: grace period %s before SIGKILL, flush timeout %s: the grace period must be at least %s longer",
			what, grace, flush, stopMargin)
	}
	t.Logf("%s: flush timeout %s, grace period %s", what, flush, grace)
}

var envRef = regexp.MustCompile(`\$\{env:([A-Za-z0-9_]+)(?::-([^}]*))?\}`)

// expandEnv resolves ${env:NAME} and ${env:NAME:-default} as the collector does.
func expandEnv(s string, env map[string]string) string {
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		if v, ok := env[m[1]]; ok { // set, even empty: the default is for unset only
			return v
		}
		return m[2]
	})
}

// dig walks nested maps; nil when a key is missing.
func dig(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
