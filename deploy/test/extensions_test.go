package deploytest

import (
	"fmt"
	"os"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"
)

// `otelcol-gpu validate` does not resolve authenticators and middlewares: a receiver whose
// auth names an extension that service::extensions leaves out validates, then refuses to
// start ("failed to resolve authenticator"). Merged configs replace lists, so an overlay
// that sets service::extensions for one tier can drop another tier's extension. This
// check runs with every validate of a shipped config combination.

// mergeConfigs merges collector config files the way confmap does by default: maps
// merge key by key, every other value (lists included) is replaced by the later file's.
func mergeConfigs(files ...string) (map[string]any, error) {
	merged := map[string]any{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		mergeInto(merged, m)
	}
	return merged, nil
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		sm, srcIsMap := v.(map[string]any)
		dm, dstIsMap := dst[k].(map[string]any)
		if srcIsMap && dstIsMap {
			mergeInto(dm, sm)
			continue
		}
		dst[k] = v
	}
}

// extensionsInUse lists the extension IDs that components refer to: authenticators
// (auth::authenticator on receivers and exporters, and an extension's own authenticator,
// as auth_audit's), middlewares ({id: …}) and storage (an exporter's sending_queue).
func extensionsInUse(v any, path string, uses map[string][]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			p := path + "::" + k
			switch k {
			case "authenticator", "storage":
				if id, ok := child.(string); ok {
					uses[id] = append(uses[id], path)
				}
			case "middlewares":
				if list, ok := child.([]any); ok {
					for _, m := range list {
						if mm, ok := m.(map[string]any); ok {
							if id, ok := mm["id"].(string); ok {
								uses[id] = append(uses[id], p)
							}
						}
					}
				}
			}
			extensionsInUse(child, p, uses)
		}
	case []any:
		for i, child := range x {
			extensionsInUse(child, fmt.Sprintf("%s[%d]", path, i), uses)
		}
	}
}

// checkExtensionsStarted fails when a component of the merged config uses an extension
// that service::extensions does not start.
func checkExtensionsStarted(t testing.TB, files ...string) {
	t.Helper()
	cfg, err := mergeConfigs(files...)
	if err != nil {
		t.Fatal(err)
	}
	started := map[string]bool{}
	if service, ok := cfg["service"].(map[string]any); ok {
		if list, ok := service["extensions"].([]any); ok {
			for _, id := range list {
				if s, ok := id.(string); ok {
					started[s] = true
				}
			}
		}
	}
	uses := map[string][]string{}
	for _, section := range []string{"receivers", "exporters", "processors", "connectors"} {
		extensionsInUse(cfg[section], section, uses)
	}
	// A started extension that wraps another (auth_audit's authenticator) looks it up when
	// it starts: that one must be started too. Extensions defined but not started use
	// nothing.
	if defined, ok := cfg["extensions"].(map[string]any); ok {
		for id := range started {
			extensionsInUse(defined[id], "extensions::"+id, uses)
		}
	}
	var missing []string
	for id, where := range uses {
		if !started[id] {
			sort.Strings(where)
			missing = append(missing, fmt.Sprintf("%s (used by %v)", id, where))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("extension %s is not in service::extensions of %v: the collector would refuse to start", m, files)
	}
}

func TestExtensionCheckCatchesADroppedAuthenticator(t *testing.T) {
	dir := t.TempDir()
	base := dir + "/base.yaml"
	overlay := dir + "/overlay.yaml"
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(base, `
receivers:
  otlp:
    protocols:
      grpc:
        auth:
          authenticator: bearertokenauth/agents
extensions:
  bearertokenauth/agents: {}
service:
  extensions: [bearertokenauth/agents]
`)
	write(overlay, `
exporters:
  prometheus_remote_write:
    http:
      auth:
        authenticator: bearertokenauth/remote_write
extensions:
  bearertokenauth/remote_write: {}
service:
  extensions: [bearertokenauth/remote_write]
`)
	rec := &recordingTB{TB: t}
	checkExtensionsStarted(rec, base, overlay)
	if len(rec.errors) != 1 {
		t.Fatalf("want one error (bearertokenauth/agents dropped by the overlay's list), got %v", rec.errors)
	}
	rec = &recordingTB{TB: t}
	checkExtensionsStarted(rec, base)
	if len(rec.errors) != 0 {
		t.Fatalf("base alone starts every extension it uses, got %v", rec.errors)
	}
}

// recordingTB records Errorf calls instead of failing the test.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Helper() {}
