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

// stopMargin is what a stop takes besides the requests' timeouts: the receivers and
// processors shut down, extensions and telemetry close (measured in the testbed: about a
// second), with room to spare on a loaded node.
const stopMargin = 5 * time.Second

// defaultGracePeriod is Kubernetes' terminationGracePeriodSeconds when a pod sets none.
const defaultGracePeriod = 30 * time.Second

// outage is the backend outage (a Prometheus restart) that must lose nothing.
const outage = 20 * time.Second

// TestGracePeriodsOutlastTheRemoteWriteTimeout: every form that runs the collector (each
// rendered DaemonSet and Deployment, the operator's resource, the systemd unit) runs each
// prometheus_remote_write exporter with retries every second or slower, a timeout per
// request long enough for a 20 s outage to lose nothing, and a grace period before SIGKILL
// that leaves the request in flight its whole timeout. contrib's exporter retries a request
// until its timeout, at shutdown too, and nothing else bounds a stop during an outage: with
// no timeout a SIGTERM during an outage never ends and the SIGKILL drops the whole buffer
// uncounted; a grace period shorter than the timeout does the same to the request in
// flight. (Each request still queued behind it gets its own timeout: deploy/README.md,
// "Stopping".)
func TestGracePeriodsOutlastTheRemoteWriteTimeout(t *testing.T) {
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
	var ids []string
	for _, c := range configs {
		exporters, _ := dig(c, "exporters").(map[string]any)
		for id := range exporters {
			if typ, _, _ := strings.Cut(id, "/"); typ == "prometheus_remote_write" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	duration := func(id, field string, def time.Duration, path ...string) time.Duration {
		v, ok := last(append([]string{"exporters", id}, path...)...).(string)
		if !ok {
			return def
		}
		d, err := time.ParseDuration(expandEnv(v, env))
		if err != nil {
			t.Errorf("%s: exporter %s: %s %q: %v", what, id, field, v, err)
		}
		return d
	}
	for _, id := range ids {
		// contrib's defaults: 5 s per request, a retry every 50 ms.
		timeout := duration(id, "timeout", 5*time.Second, "timeout")
		interval := duration(id, "retry_on_failure.initial_interval", 50*time.Millisecond, "retry_on_failure", "initial_interval")
		t.Logf("%s: exporter %s: timeout %s, retries every %s, grace period %s", what, id, timeout, interval, grace)
		switch {
		case timeout == 0:
			t.Errorf("%s: exporter %s has no timeout: a SIGTERM during an outage never ends and the SIGKILL drops everything buffered, uncounted", what, id)
		case timeout < outage+2*interval:
			t.Errorf("%s: exporter %s gives a request %s, retrying every %s: a %s outage drops data", what, id, timeout, interval, outage)
		case grace < timeout+stopMargin:
			t.Errorf("%s: grace period %s before SIGKILL, exporter %s's timeout %s: the grace period must be at least %s longer, or a SIGTERM during an outage loses the request in flight uncounted",
				what, grace, id, timeout, stopMargin)
		}
		// The exporter ignores max_interval: every retry comes after initial_interval.
		if interval < time.Second {
			t.Errorf("%s: exporter %s retries every %s: a backend that is down gets %.0f requests a second from every node", what, id, interval, float64(time.Second)/float64(interval))
		}
	}
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
