package deploytest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentialsInClearAreRefused: the built collector refuses to start (and `validate`
// fails) with remote-write credentials over http:// or in the URL, and says why without
// repeating the password; OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS=true lets the first
// through, never the second.
func TestCredentialsInClearAreRefused(t *testing.T) {
	root := repoRoot(t)
	cfg := func(rel string) string { return filepath.Join(root, rel) }
	basic := []string{cfg("configs/agent.yaml"), cfg("deploy/config-overlays/remote-write-auth-basic.yaml")}
	bearer := []string{cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/remote-write-auth-bearer-gateway.yaml")}
	for _, tc := range []struct {
		name    string
		files   []string
		url     string
		allow   bool
		wantErr string
	}{
		{"basic over http", basic, "http://mimir.example.com/api/v1/push", false, "sends credentials in plain text"},
		{"bearer over http (gateway)", bearer, "http://mimir.example.com/api/v1/push", false, "sends credentials in plain text"},
		{"basic over http, allowed", basic, "http://127.0.0.1:9090/api/v1/write", true, ""},
		{"basic over https", basic, "https://mimir.example.com/api/v1/push", false, ""},
		{"password in the URL", []string{cfg("configs/agent.yaml")}, "https://fleet:s3cret@mimir.example.com/api/v1/push", false, "credentials in its URL"},
		{"password in the URL, plaintext allowed", []string{cfg("configs/agent.yaml")}, "https://fleet:s3cret@mimir.example.com/api/v1/push", true, "credentials in its URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"validate"}
			for _, f := range tc.files {
				args = append(args, "--config="+f)
			}
			cmd := exec.Command(collectorBinary(t, fullBuild), args...)
			cmd.Env = []string{"HOME=" + t.TempDir(), "PROMETHEUS_REMOTE_WRITE_URL=" + tc.url, "REMOTE_WRITE_BASIC_AUTH=dXNlcjpwYXNz"}
			if tc.allow {
				cmd.Env = append(cmd.Env, "OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS=true")
			}
			out, err := cmd.CombinedOutput()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v\n%s", err, out)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted, want %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(string(out), tc.wantErr):
				t.Fatalf("output %s, want %q", out, tc.wantErr)
			}
			if strings.Contains(string(out), "s3cret") {
				t.Errorf("the message repeats the password: %s", out)
			}
		})
	}
}

// TestHelmRefusesCredentialsInClear: the chart fails to render auth over http:// unless
// remoteWrite.auth.allowPlaintext (which it then passes to the collector), and a URL with
// user:password@ always.
func TestHelmRefusesCredentialsInClear(t *testing.T) {
	render := func(values map[string]any) error { return helmRenderError(t, values) }
	rw := func(url string, auth map[string]any, gateway bool) map[string]any {
		return map[string]any{
			"remoteWrite": map[string]any{"url": url, "auth": auth},
			"gateway":     map[string]any{"enabled": gateway},
		}
	}
	bearer := map[string]any{"type": "bearer", "existingSecret": "token"}
	for _, gateway := range []bool{false, true} {
		if err := render(rw("http://mimir.example.com/api/v1/push", bearer, gateway)); err == nil || !strings.Contains(err.Error(), "in clear") {
			t.Errorf("gateway=%v: bearer over http:// rendered (err %v)", gateway, err)
		}
		for _, url := range []string{
			"https://u:p@mimir.example.com/api/v1/push",
			"https://u:p/q@mimir.example.com/api/v1/push", // '/' in the password
			"https://u:p#q@mimir.example.com/api/v1/push", // '#' in the password
			"https://token@mimir.example.com/api/v1/push",
		} {
			if err := render(rw(url, map[string]any{"type": "none"}, gateway)); err == nil || !strings.Contains(err.Error(), "user:password@") {
				t.Errorf("gateway=%v: %s rendered (err %v)", gateway, url, err)
			}
		}
		for _, url := range []string{"https://mimir.example.com/api/v1/push?api_key=x", "https://store.example.com/push?sv=1&sig=x", "https://m.example.com/push?X-Auth-Token=x"} {
			if err := render(rw(url, map[string]any{"type": "none"}, gateway)); err == nil || !strings.Contains(err.Error(), "secret in its query") {
				t.Errorf("gateway=%v: %s rendered (err %v)", gateway, url, err)
			}
		}
	}
	allowed := map[string]any{"type": "bearer", "existingSecret": "token", "allowPlaintext": true}
	o := helmTemplateValues(t, rw("http://127.0.0.1:9090/api/v1/write", allowed, false))
	spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
	if envMap(spec.Containers[0])["OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS"].Value != "true" {
		t.Error("allowPlaintext does not reach the collector")
	}
	validatePod(t, o, spec)

	// NOTES shows where the data goes, not a query that might hold more than it should.
	out, err := renderChart(t, rw("https://mimir.example.com/api/v1/push?tenant=gpu", map[string]any{"type": "none"}, false))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range out {
		if strings.HasSuffix(name, "NOTES.txt") {
			if strings.Contains(text, "tenant=gpu") || !strings.Contains(text, "https://mimir.example.com/api/v1/push (query not shown)") {
				t.Errorf("NOTES:\n%s", text)
			}
		}
	}
}

// helmRenderError renders the chart with values and returns the error (a `fail` in a
// template), for values the chart must refuse.
func helmRenderError(t *testing.T, values map[string]any) error {
	t.Helper()
	_, err := renderChart(t, values)
	return err
}
