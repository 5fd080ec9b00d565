package deploytest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSyncedCopiesAreCurrent: kustomize and Helm read copies of configs/*.yaml and
// deploy/config-overlays/*.yaml (they cannot read outside their directory); every copy is
// byte-identical to its source.
func TestSyncedCopiesAreCurrent(t *testing.T) {
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "deploy", "sync-configs.sh"), "--check")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copies are stale (%v):\n%s\nrun deploy/sync-configs.sh", err, out)
	}
}

func loadYAML(t *testing.T, rel string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(readRepoFile(t, rel), &m); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return m
}

// TestGatewayConfigsMatchAgent: the gateway variants must not drift from agent.yaml — the
// agent in gateway mode reads and attributes exactly as the direct agent does, and the
// gateway promotes and writes exactly as the direct agent would.
func TestGatewayConfigsMatchAgent(t *testing.T) {
	agent := loadYAML(t, "configs/agent.yaml")
	toGateway := loadYAML(t, "configs/agent-to-gateway.yaml")
	gateway := loadYAML(t, "configs/gateway.yaml")
	for _, section := range []string{"receivers", "processors"} {
		if !reflect.DeepEqual(agent[section], toGateway[section]) {
			t.Errorf("configs/agent-to-gateway.yaml %s differ from configs/agent.yaml", section)
		}
	}
	pipeline := func(cfg map[string]any) map[string]any {
		return cfg["service"].(map[string]any)["pipelines"].(map[string]any)["metrics"].(map[string]any)
	}
	if !reflect.DeepEqual(pipeline(agent)["processors"], pipeline(toGateway)["processors"]) {
		t.Error("agent-to-gateway.yaml runs other processors than agent.yaml")
	}
	if !reflect.DeepEqual(agent["service"].(map[string]any)["telemetry"], toGateway["service"].(map[string]any)["telemetry"]) {
		t.Error("agent-to-gateway.yaml's telemetry differs from agent.yaml's")
	}
	exporter := func(cfg map[string]any) any { return cfg["exporters"].(map[string]any)["prometheus_remote_write"] }
	if !reflect.DeepEqual(exporter(agent), exporter(gateway)) {
		t.Errorf("configs/gateway.yaml's prometheus_remote_write differs from configs/agent.yaml's:\n agent:   %v\n gateway: %v", exporter(agent), exporter(gateway))
	}
}

// TestRemoteWriteSendsOneRequestAtATime: the agent's and the gateway's pipelines export
// through contrib's prometheus_remote_write alone, one request at a time (a series'
// samples stay in order: Prometheus rejects out-of-order samples).
func TestRemoteWriteSendsOneRequestAtATime(t *testing.T) {
	for _, rel := range []string{"configs/agent.yaml", "configs/gateway.yaml"} {
		cfg := loadYAML(t, rel)
		if exporters := dig(cfg, "exporters").(map[string]any); len(exporters) != 1 || exporters["prometheus_remote_write"] == nil {
			t.Errorf("%s defines exporters %v, want prometheus_remote_write alone", rel, exporters)
		}
		if pipeline := dig(cfg, "service", "pipelines", "metrics", "exporters"); !reflect.DeepEqual(pipeline, []any{"prometheus_remote_write"}) {
			t.Errorf("%s's pipeline exports to %v, want [prometheus_remote_write]", rel, pipeline)
		}
		if p := dig(cfg, "exporters", "prometheus_remote_write", "max_batch_request_parallelism"); fmt.Sprint(p) != "1" {
			t.Errorf("%s: max_batch_request_parallelism %v, want 1", rel, p)
		}
	}
}

// TestConfigsValidate runs `otelcol-gpu validate` on the shipped configs and on every
// overlay merged over the configs it is meant for.
func TestConfigsValidate(t *testing.T) {
	root := repoRoot(t)
	cfg := func(rel string) string { return filepath.Join(root, rel) }
	env := map[string]string{
		"PROMETHEUS_REMOTE_WRITE_URL": "https://prometheus.example.com/api/v1/write",
		"REMOTE_WRITE_BASIC_AUTH":     "dXNlcjpwYXNzd29yZA==",
		"PROMETHEUS_OTLP_URL":         "http://prometheus.example.com:9090/api/v1/otlp/v1/metrics",
		// Per-agent identity (gateway-agent-identity.yaml): the issuer has no default.
		"OTELCOL_GPU_AGENT_TOKEN_ISSUER": "https://kubernetes.default.svc.cluster.local",
	}
	for name, files := range map[string][]string{
		"agent":                     {cfg("configs/agent.yaml")},
		"agent-to-gateway":          {cfg("configs/agent-to-gateway.yaml")},
		"gateway":                   {cfg("configs/gateway.yaml")},
		"gateway+basic":             {cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/remote-write-auth-basic.yaml")},
		"gateway+bearer":            {cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/remote-write-auth-bearer-gateway.yaml")},
		"agent+basic":               {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/remote-write-auth-basic.yaml")},
		"agent+bearer":              {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/remote-write-auth-bearer.yaml")},
		"agent+bare-host (systemd)": {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/bare-host.yaml")},
		"agent+bare-host+bearer":    {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/bare-host.yaml"), cfg("deploy/config-overlays/remote-write-auth-bearer.yaml")},
		"agent+non-root component":  {cfg("configs/agent.yaml"), cfg("deploy/kubernetes/components/non-root/non-root.yaml")},
		"agent-to-gateway (no env)": {cfg("configs/agent-to-gateway.yaml")},
		"agent+wal":                 {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/remote-write-wal.yaml")},
		"agent+bearer+wal":          {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/remote-write-auth-bearer.yaml"), cfg("deploy/config-overlays/remote-write-wal.yaml")},
		"agent+bare-host+wal":       {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/bare-host.yaml"), cfg("deploy/config-overlays/remote-write-wal.yaml")},
		"agent+tls+basic":           {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/remote-write-tls.yaml"), cfg("deploy/config-overlays/remote-write-auth-basic.yaml")},
		"gateway+tls+bearer":        {cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/remote-write-tls.yaml"), cfg("deploy/config-overlays/remote-write-auth-bearer-gateway.yaml")},
		"agent+prometheus-otlp":     {cfg("configs/agent.yaml"), cfg("deploy/config-overlays/prometheus-otlp.yaml")},
		"gateway+prometheus-otlp":   {cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/prometheus-otlp.yaml"), cfg("deploy/config-overlays/prometheus-otlp-gateway.yaml")},
		"gateway+basic+wal":         {cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/remote-write-auth-basic.yaml"), cfg("deploy/config-overlays/remote-write-wal.yaml")},
		"gateway+identity":          {cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/gateway-agent-identity.yaml")},
		"gateway+basic+identity":    {cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/remote-write-auth-basic.yaml"), cfg("deploy/config-overlays/gateway-agent-identity.yaml")},
		"gateway+tls+bearer+identity+extension list": {cfg("configs/gateway.yaml"), cfg("deploy/config-overlays/remote-write-tls.yaml"), cfg("deploy/config-overlays/remote-write-auth-bearer-gateway.yaml"),
			cfg("deploy/config-overlays/gateway-agent-identity.yaml"), cfg("deploy/config-overlays/gateway-agent-identity-remote-write-bearer.yaml")},
	} {
		t.Run(name, func(t *testing.T) {
			if strings.HasPrefix(name, "agent") {
				// What the DaemonSets and the systemd unit run; the full build is a superset.
				validateConfigs(t, agentBuild, env, files...)
			}
			validateConfigs(t, fullBuild, env, files...)
		})
	}
}

// TestRemoteWriteWALIsOptIn: the shipped configs buffer remote-write in memory; the WAL
// (contrib's retries a rejected request forever, contrib #41785) comes only from
// deploy/config-overlays/remote-write-wal.yaml, which sets nothing else.
func TestRemoteWriteWALIsOptIn(t *testing.T) {
	prw := func(cfg map[string]any) map[string]any {
		return cfg["exporters"].(map[string]any)["prometheus_remote_write"].(map[string]any)
	}
	for _, rel := range []string{"configs/agent.yaml", "configs/gateway.yaml"} {
		if _, ok := prw(loadYAML(t, rel))["wal"]; ok {
			t.Errorf("%s turns the remote-write WAL on: it is opt-in (deploy/config-overlays/remote-write-wal.yaml)", rel)
		}
	}
	overlay := loadYAML(t, "deploy/config-overlays/remote-write-wal.yaml")
	if len(overlay) != 1 || len(overlay["exporters"].(map[string]any)) != 1 || len(prw(overlay)) != 1 {
		t.Errorf("remote-write-wal.yaml must set exporters.prometheus_remote_write.wal only: %v", overlay)
	}
	wal, _ := prw(overlay)["wal"].(map[string]any)
	if dir, _ := wal["directory"].(string); !strings.Contains(dir, "${env:OTELCOL_GPU_WAL_DIR") {
		t.Errorf("the WAL directory %q is not taken from OTELCOL_GPU_WAL_DIR (the manifests set it on the state volume)", dir)
	}
}

// TestDockerfileBuildsLikeMake: the image's build stage compiles with the Makefile's flags.
func TestDockerfileBuildsLikeMake(t *testing.T) {
	mk := string(readRepoFile(t, "Makefile"))
	df := string(readRepoFile(t, "distribution/Dockerfile"))
	cflags := regexp.MustCompile(`(?m)^export CGO_CFLAGS := (.+)$`).FindStringSubmatch(mk)
	build := regexp.MustCompile(`(?m)^\tcd distribution && (go build .+)$`).FindStringSubmatch(mk)
	agentBuild := regexp.MustCompile(`(?m)^\tcd distribution/agent && (go build .+)$`).FindStringSubmatch(mk)
	if cflags == nil || build == nil || agentBuild == nil {
		t.Fatal("cannot find CGO_CFLAGS or the two build commands in the Makefile")
	}
	for _, want := range []string{
		`CGO_CFLAGS="` + cflags[1] + `"`,
		"CGO_ENABLED=1",
		"GOFLAGS=-buildvcs=false",
		"cd distribution && " + build[1],
		"cd /src/distribution/agent && " + agentBuild[1],
		"COPY --from=build /src/distribution/agent/otelcol-gpu-agent /otelcol-gpu-agent",
		"FROM golang:${GO_VERSION}-bookworm AS build",
		"FROM gcr.io/distroless/base-debian12:nonroot",
		"USER 10001:10001",
		`ENTRYPOINT ["/otelcol-gpu"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("distribution/Dockerfile lacks %q", want)
		}
	}
	var code []string
	for _, line := range strings.Split(df, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			code = append(code, line)
		}
	}
	if c := strings.Join(code, "\n"); strings.Contains(c, "-static") || strings.Contains(c, "-z now") || strings.Contains(c, "CGO_ENABLED=0") {
		t.Error("the image must be built with cgo, dynamically, without -z now (DESIGN §3)")
	}
	// The whole version, patch included: a patch release is where Go's security fixes land.
	goMod := regexp.MustCompile(`(?m)^go (\d+\.\d+\.\d+)$`).FindStringSubmatch(string(readRepoFile(t, "go.mod")))
	if goMod == nil || !regexp.MustCompile(`(?m)^ARG GO_VERSION=`+regexp.QuoteMeta(goMod[1])+`$`).MatchString(df) {
		t.Errorf("the Dockerfile's GO_VERSION does not match go.mod's go %v", goMod)
	}
	if strings.Contains(df, "COPY configs") {
		t.Error("no config is baked into the image")
	}
}

// TestSystemdUnit: the unit's hardening, and an env file that covers every variable
// agent.yaml reads.
func TestSystemdUnit(t *testing.T) {
	unit := map[string][]string{}
	for _, line := range strings.Split(string(readRepoFile(t, "deploy/systemd/otelcol-gpu.service")), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			unit[k] = append(unit[k], v)
		}
	}
	for k, want := range map[string]string{
		"DynamicUser":           "no",
		"User":                  "otelcol-gpu",
		"SupplementaryGroups":   "video",
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
		"PrivateTmp":            "yes",
		"NoNewPrivileges":       "yes",
		"StateDirectory":        "otelcol-gpu",
		"EnvironmentFile":       "/etc/otelcol-gpu/otelcol-gpu.env",
		"CapabilityBoundingSet": "",
		"AmbientCapabilities":   "",
		"DevicePolicy":          "closed",
		"ReadOnlyPaths":         "/etc/otelcol-gpu",
	} {
		if got := unit[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got := unit["DeviceAllow"]; !reflect.DeepEqual(got, []string{"char-nvidia rw", "char-nvidiactl rw", "char-nvidia-frontend rw", "char-nvidia-caps r"}) {
		t.Errorf("DeviceAllow = %q", got)
	}
	if _, ok := unit["PrivateDevices"]; ok {
		t.Error("PrivateDevices hides /dev/nvidia*")
	}
	exec := unit["ExecStart"]
	if len(exec) != 1 || !strings.HasPrefix(exec[0], "/usr/local/bin/otelcol-gpu-agent --config=/etc/otelcol-gpu/agent.yaml --config=/etc/otelcol-gpu/bare-host.yaml") {
		t.Errorf("ExecStart = %q", exec)
	}

	envFile := map[string]string{}
	for _, line := range strings.Split(string(readRepoFile(t, "deploy/systemd/otelcol-gpu.env.example")), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			envFile[k] = v
		}
	}
	for _, m := range regexp.MustCompile(`\$\{env:([A-Z0-9_]+)`).FindAllStringSubmatch(string(readRepoFile(t, "configs/agent.yaml")), -1) {
		if _, ok := envFile[m[1]]; !ok {
			t.Errorf("otelcol-gpu.env.example does not set %s, which configs/agent.yaml reads", m[1])
		}
	}
	if envFile["GOMAXPROCS"] != "1" {
		t.Errorf("otelcol-gpu.env.example: GOMAXPROCS = %q, want 1 (one scheduler thread, as the DaemonSets)", envFile["GOMAXPROCS"])
	}
	if envFile["GOGC"] != "200" {
		t.Errorf("otelcol-gpu.env.example: GOGC = %q, want 200 (as the DaemonSets)", envFile["GOGC"])
	}
	if wal := envFile["OTELCOL_GPU_WAL_DIR"]; !strings.HasPrefix(wal, "/var/lib/otelcol-gpu/") {
		t.Errorf("OTELCOL_GPU_WAL_DIR = %q is outside StateDirectory", wal)
	}
	delete(envFile, "OTELCOL_GPU_EXTRA_ARGS")
	overlays := filepath.Join(repoRoot(t), "deploy", "config-overlays")
	validateConfigs(t, agentBuild, envFile, filepath.Join(repoRoot(t), "configs", "agent.yaml"), filepath.Join(overlays, "bare-host.yaml"))
	// The opt-in WAL (OTELCOL_GPU_EXTRA_ARGS), with the env file's WAL directory.
	validateConfigs(t, agentBuild, envFile, filepath.Join(repoRoot(t), "configs", "agent.yaml"), filepath.Join(overlays, "bare-host.yaml"), filepath.Join(overlays, "remote-write-wal.yaml"))
}
