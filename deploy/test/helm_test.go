package deploytest

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

const (
	releaseName      = "otelcol-gpu"
	releaseNamespace = "otelcol-gpu"
)

func chartDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deploy", "helm", "otelcol-gpu")
}

// valuesFiles are the values the chart is rendered, linted and validated with: the
// defaults and every file under ci/.
func valuesFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(chartDir(t), "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{""}, files...) // "" = the defaults
}

func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return v.AsMap()
}

// helmTemplate renders the chart like `helm template otelcol-gpu -n otelcol-gpu -f file`,
// in strict mode (a reference to a value that does not exist is an error).
func helmTemplate(t *testing.T, file string) *objects {
	t.Helper()
	return helmTemplateValues(t, readValues(t, file))
}

// renderChart renders the chart with values given inline (`--set`); the error is the
// chart's own (a `fail` in a template) or the engine's.
func renderChart(t *testing.T, values map[string]any) (map[string]string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(chrt, values, opts, chartutil.DefaultCapabilities.Copy())
	if err != nil {
		t.Fatal(err)
	}
	return engine.Engine{Strict: true}.Render(chrt, vals)
}

// helmTemplateValues is helmTemplate with the values given inline (`--set`).
func helmTemplateValues(t *testing.T, values map[string]any) *objects {
	t.Helper()
	out, err := renderChart(t, values)
	if err != nil {
		t.Fatalf("rendering the chart with %v: %v", values, err)
	}
	var names []string
	for name := range out {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var streams [][]byte
	for _, name := range names {
		streams = append(streams, []byte(out[name]))
	}
	return decodeManifests(t, streams...)
}

func TestHelmLint(t *testing.T) {
	for _, file := range valuesFiles(t) {
		name := filepath.Base(file)
		if file == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersion(chartDir(t), readValues(t, file), releaseNamespace, nil)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestHelmDefaults: with default values the chart is deploy/kubernetes/base — the same
// config byte for byte, the same pod.
func TestHelmDefaults(t *testing.T) {
	o := helmTemplate(t, "")
	ds := o.daemonSet(t, "otelcol-gpu-agent")
	spec := ds.Spec.Template.Spec
	checkAgentPod(t, spec, defaultAgent)
	checkRBAC(t, o, "otelcol-gpu-agent", "otelcol-gpu-agent", releaseNamespace)

	c := spec.Containers[0]
	if want := []string{"--config=/etc/otelcol-gpu/config/agent.yaml"}; !slices.Equal(c.Args, want) {
		t.Errorf("args = %q, want %q: default values must run configs/agent.yaml alone", c.Args, want)
	}
	cm, ok := o.configMaps["otelcol-gpu-agent"]
	if !ok {
		t.Fatalf("no agent ConfigMap in %v", o.names())
	}
	if got, want := cm.Data["agent.yaml"], string(readRepoFile(t, "configs/agent.yaml")); got != want {
		t.Error("the chart's agent.yaml differs from configs/agent.yaml: run deploy/sync-configs.sh")
	}
	if len(cm.Data) != 1 {
		t.Errorf("agent ConfigMap keys = %v, want only agent.yaml", keys(cm.Data))
	}
	if len(o.deployments) != 0 || len(o.secrets) != 0 {
		t.Errorf("default values render a gateway or a Secret: %v", o.names())
	}
	validatePod(t, o, spec)

	// The same pod as the kustomize base, field by field where it matters.
	base := kustomizeBuild(t, "base", "").daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
	bc := base.Containers[0]
	same := func(what string, a, b any) {
		t.Helper()
		if !reflect.DeepEqual(a, b) {
			t.Errorf("chart and kustomize base differ in %s:\n chart: %+v\n base:  %+v", what, a, b)
		}
	}
	same("env", envMap(c), envMap(bc))
	same("pod securityContext", spec.SecurityContext, base.SecurityContext)
	same("container securityContext", c.SecurityContext, bc.SecurityContext)
	same("affinity", spec.Affinity, base.Affinity)
	same("tolerations", spec.Tolerations, base.Tolerations)
	same("resources", c.Resources, bc.Resources)
	same("probes", []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe}, []*corev1.Probe{bc.LivenessProbe, bc.ReadinessProbe})
	same("ports", c.Ports, bc.Ports)
	same("volume mounts", c.VolumeMounts, bc.VolumeMounts)
	same("update strategy", ds.Spec.UpdateStrategy, kustomizeBuild(t, "base", "").daemonSet(t, "otelcol-gpu-agent").Spec.UpdateStrategy)
	hostPaths := func(vs []corev1.Volume) map[string]corev1.HostPathVolumeSource {
		m := map[string]corev1.HostPathVolumeSource{}
		for _, v := range vs {
			if v.HostPath != nil {
				m[v.Name] = *v.HostPath
			}
		}
		return m
	}
	same("hostPath volumes", hostPaths(spec.Volumes), hostPaths(base.Volumes))
}

func TestHelmFullValues(t *testing.T) {
	o := helmTemplate(t, filepath.Join(chartDir(t), "ci", "full-values.yaml"))
	spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
	checkAgentPod(t, spec, agentExpect{kubelet: true, processes: false})
	// agent.nodePoolLabel: the agents may read nodes (TestHelmNodePool).
	checkRBAC(t, o, "otelcol-gpu-agent", "otelcol-gpu-agent", releaseNamespace, nodesRule)
	if spec.RuntimeClassName == nil || *spec.RuntimeClassName != "nvidia" {
		t.Error("runtimeClassName nvidia not rendered")
	}
	// What makes the GPU Operator's driver and MIG managers wait for the agent (26.7+).
	if v := spec.NodeSelector["nvidia.com/gpu.deploy.client"]; v != "true" {
		t.Errorf("nodeSelector = %v: agent.nodeSelector not rendered", spec.NodeSelector)
	}
	c := spec.Containers[0]
	want := []string{
		"--config=/etc/otelcol-gpu/config/agent.yaml",
		nodePoolArg,
		// Before overrides.yaml, whose pipeline adds the extra exporter to the WAL's.
		"--config=/etc/otelcol-gpu/config/remote-write-wal.yaml",
		"--config=/etc/otelcol-gpu/config/overrides.yaml",
		"--config=/etc/otelcol-gpu/config/remote-write-auth-bearer.yaml",
	}
	if !slices.Equal(c.Args, want) {
		t.Errorf("args = %q, want %q", c.Args, want)
	}
	cm := o.configMaps["otelcol-gpu-agent"]
	if cm.Data["agent.yaml"] != string(readRepoFile(t, "configs/agent.yaml")) {
		t.Error("agent.yaml must stay configs/agent.yaml; overrides belong in overrides.yaml")
	}
	if cm.Data["remote-write-auth-bearer.yaml"] != string(readRepoFile(t, "deploy/config-overlays/remote-write-auth-bearer.yaml")) {
		t.Error("the chart's bearer overlay differs from deploy/config-overlays: run deploy/sync-configs.sh")
	}
	var over map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["overrides.yaml"]), &over); err != nil {
		t.Fatal(err)
	}
	wantOver := map[string]any{
		"processors": map[string]any{"gpu_enrich": map[string]any{"processes": map[string]any{"enabled": false}}},
		"exporters": map[string]any{
			"prometheus_remote_write": map[string]any{"http": map[string]any{"tls": map[string]any{
				"ca_file":              "/etc/otelcol-gpu/remote-write-ca/ca.crt",
				"insecure_skip_verify": false,
				"server_name_override": "mimir.internal",
			}}},
			"otlp_http/extra": map[string]any{"endpoint": "https://otlp.example.com:4318", "compression": "gzip"},
		},
		"service": map[string]any{"pipelines": map[string]any{"metrics": map[string]any{
			// The remote-write exporter, with the extra one.
			"exporters": []any{"prometheus_remote_write", "otlp_http/extra"},
		}}},
	}
	if !reflect.DeepEqual(over, wantOver) {
		t.Errorf("overrides.yaml =\n%s\nwant %+v", cm.Data["overrides.yaml"], wantOver)
	}
	env := envMap(c)
	if env["OTELCOL_GPU_INTERVAL"].Value != "5s" || env["PROMETHEUS_REMOTE_WRITE_URL"].Value != "https://mimir.example.com/api/v1/push" {
		t.Errorf("interval/url not mapped to the environment: %+v", env)
	}
	if env[nodePoolEnv].Value != "cloud.google.com/gke-nodepool" {
		t.Errorf("%s = %q: agent.nodePoolLabel not rendered", nodePoolEnv, env[nodePoolEnv].Value)
	}
	if env["REMOTE_WRITE_BEARER_TOKEN_FILE"].Value != "/etc/otelcol-gpu/auth/token" {
		t.Error("bearer token file not set")
	}
	if _, ok := o.secrets["mimir-token"]; ok || len(o.secrets) != 0 {
		t.Error("an existing Secret must not be rendered")
	}
	validatePod(t, o, spec)
}

func TestHelmGatewayMode(t *testing.T) {
	o := helmTemplate(t, filepath.Join(chartDir(t), "ci", "gateway-values.yaml"))

	agent := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
	checkAgentPod(t, agent, defaultAgent)
	ac := agent.Containers[0]
	if want := []string{"--config=/etc/otelcol-gpu/config/agent-to-gateway.yaml"}; !slices.Equal(ac.Args, want) {
		t.Errorf("agent args = %q, want %q", ac.Args, want)
	}
	env := envMap(ac)
	checkGatewaySecured(t, o, gatewayNames{
		agentNamespace: releaseNamespace, gatewayNamespace: "otelcol-gpu-gateway",
		gateway: "otelcol-gpu-gateway", tlsSecret: "otelcol-gpu-gateway-tls",
		caConfigMap: "otelcol-gpu-gateway-ca", tokenSecret: "otelcol-gpu-gateway-token",
		agentNetpol: "otelcol-gpu-agent", monitoring: "monitoring",
	})
	if _, ok := env["REMOTE_WRITE_BASIC_AUTH"]; ok {
		t.Error("remote-write credentials on the agents in gateway mode")
	}
	if cm := o.configMaps["otelcol-gpu-agent"]; cm.Data["agent-to-gateway.yaml"] != string(readRepoFile(t, "configs/agent-to-gateway.yaml")) {
		t.Error("the chart's agent-to-gateway.yaml differs from configs/: run deploy/sync-configs.sh")
	}
	validatePod(t, o, agent)

	gw := o.deployment(t, "otelcol-gpu-gateway")
	gspec := gw.Spec.Template.Spec
	checkGatewayPod(t, gspec)
	want := []string{
		"--config=/etc/otelcol-gpu/config/gateway.yaml",
		"--config=/etc/otelcol-gpu/config/overrides.yaml",
		"--config=/etc/otelcol-gpu/config/remote-write-auth-basic.yaml",
	}
	if !slices.Equal(gspec.Containers[0].Args, want) {
		t.Errorf("gateway args = %q, want %q", gspec.Containers[0].Args, want)
	}
	if cm := o.configMaps["otelcol-gpu-gateway"]; cm.Data["gateway.yaml"] != string(readRepoFile(t, "configs/gateway.yaml")) {
		t.Error("the chart's gateway.yaml differs from configs/: run deploy/sync-configs.sh")
	}
	sec, ok := o.secrets["otelcol-gpu-remote-write"]
	if !ok || sec.StringData["basic-auth"] != "Z3B1LWZsZWV0Om5vdC1hLXJlYWwtcGFzc3dvcmQ=" || sec.Namespace != "otelcol-gpu-gateway" {
		t.Errorf("basic-auth Secret = %+v, want base64 of user:password in the gateway's namespace", sec)
	}
	if hpa := o.hpas["otelcol-gpu-gateway"]; hpa == nil || hpa.Spec.MaxReplicas != 6 {
		t.Errorf("gateway HPA = %+v", hpa)
	}
	if gw.Spec.Replicas != nil {
		t.Error("replicas set although the HPA owns them")
	}
	if _, ok := o.services["otelcol-gpu-gateway"]; !ok {
		t.Error("no gateway Service")
	}
	if _, ok := o.pdbs["otelcol-gpu-gateway"]; !ok {
		t.Error("no gateway PodDisruptionBudget")
	}
	validatePod(t, o, gspec)
}

// TestHelmRemoteWriteWAL: remoteWrite.wal.enabled merges config-overlays/remote-write-wal.yaml
// into whichever workload remote-writes — the agents, or the gateway in gateway mode — with
// the WAL directory on its writable state volume; it is off by default (TestHelmDefaults).
func TestHelmRemoteWriteWAL(t *testing.T) {
	const walArg = "--config=/etc/otelcol-gpu/config/remote-write-wal.yaml"
	walOverlay := string(readRepoFile(t, "deploy/config-overlays/remote-write-wal.yaml"))
	check := func(t *testing.T, o *objects, spec corev1.PodSpec, cmName string) {
		t.Helper()
		c := spec.Containers[0]
		// Right after the base config: overrides.yaml may add exporters to its pipeline.
		if i := slices.Index(c.Args, walArg); i != 1 {
			t.Errorf("args = %q, want %s second", c.Args, walArg)
		}
		if o.configMaps[cmName].Data["remote-write-wal.yaml"] != walOverlay {
			t.Errorf("ConfigMap %s: remote-write-wal.yaml differs from deploy/config-overlays: run deploy/sync-configs.sh", cmName)
		}
		checkWALOnStateVolume(t, spec, c)
		validatePod(t, o, spec)
	}
	wal := map[string]any{"wal": map[string]any{"enabled": true}}

	t.Run("agent", func(t *testing.T) {
		o := helmTemplateValues(t, map[string]any{"remoteWrite": wal})
		spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
		checkAgentPod(t, spec, defaultAgent)
		if want := []string{"--config=/etc/otelcol-gpu/config/agent.yaml", walArg}; !slices.Equal(spec.Containers[0].Args, want) {
			t.Errorf("args = %q, want %q", spec.Containers[0].Args, want)
		}
		check(t, o, spec, "otelcol-gpu-agent")
	})
	t.Run("gateway mode", func(t *testing.T) {
		o := helmTemplateValues(t, map[string]any{"remoteWrite": wal, "gateway": map[string]any{"enabled": true}})
		agent := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
		checkAgentPod(t, agent, defaultAgent)
		if want := []string{"--config=/etc/otelcol-gpu/config/agent-to-gateway.yaml"}; !slices.Equal(agent.Containers[0].Args, want) {
			t.Errorf("agent args = %q, want %q: the agents send OTLP, the gateway remote-writes", agent.Containers[0].Args, want)
		}
		if _, ok := o.configMaps["otelcol-gpu-agent"].Data["remote-write-wal.yaml"]; ok {
			t.Error("the WAL overlay is in the agents' ConfigMap in gateway mode")
		}
		gspec := o.deployment(t, "otelcol-gpu-gateway").Spec.Template.Spec
		checkGatewayPod(t, gspec)
		if want := []string{"--config=/etc/otelcol-gpu/config/gateway.yaml", walArg}; !slices.Equal(gspec.Containers[0].Args, want) {
			t.Errorf("gateway args = %q, want %q", gspec.Containers[0].Args, want)
		}
		check(t, o, gspec, "otelcol-gpu-gateway")
	})
}

func TestHelmNonRoot(t *testing.T) {
	o := helmTemplate(t, filepath.Join(chartDir(t), "ci", "non-root-values.yaml"))
	spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
	checkAgentPod(t, spec, agentExpect{nonRoot: true, processes: true})
	validatePod(t, o, spec)
}

// TestHelmGatewayBearer: bearer auth on the gateway's remote-write merges the gateway's
// variant of the overlay, whose extension list keeps bearertokenauth/agents (the agents'
// token on the OTLP receiver); the agent's variant would leave the gateway unable to start.
func TestHelmGatewayBearer(t *testing.T) {
	o := helmTemplateValues(t, map[string]any{
		"remoteWrite": map[string]any{
			"url":  "https://mimir.example.com/api/v1/push",
			"auth": map[string]any{"type": "bearer", "existingSecret": "mimir-token"},
		},
		"gateway": map[string]any{"enabled": true},
	})
	gspec := o.deployment(t, "otelcol-gpu-gateway").Spec.Template.Spec
	want := "--config=/etc/otelcol-gpu/config/remote-write-auth-bearer-gateway.yaml"
	if !slices.Contains(gspec.Containers[0].Args, want) {
		t.Errorf("gateway args = %q, want %s", gspec.Containers[0].Args, want)
	}
	if o.configMaps["otelcol-gpu-gateway"].Data["remote-write-auth-bearer-gateway.yaml"] != string(readRepoFile(t, "deploy/config-overlays/remote-write-auth-bearer-gateway.yaml")) {
		t.Error("the gateway's bearer overlay differs from deploy/config-overlays: run deploy/sync-configs.sh")
	}
	validatePod(t, o, gspec)
}

// TestHelmGeneratedGatewayCertificateExpires: the chart's generated CA and certificate live
// gateway.tls.generatedValidityDays (1 year by default, not 10), and the Secret says when
// they expire, so that a rotation can be planned.
func TestHelmGeneratedGatewayCertificateExpires(t *testing.T) {
	for _, days := range []int{0, 90} {
		values := map[string]any{"gateway": map[string]any{"enabled": true}}
		want := 365
		if days > 0 {
			values["gateway"].(map[string]any)["tls"] = map[string]any{"generatedValidityDays": days}
			want = days
		}
		o := helmTemplateValues(t, values)
		sec, ok := o.secrets["otelcol-gpu-gateway-tls"]
		if !ok {
			t.Fatal("no generated gateway TLS Secret")
		}
		certPEM := sec.Data["tls.crt"]
		if len(certPEM) == 0 {
			certPEM = []byte(sec.StringData["tls.crt"])
		}
		caPEM := sec.Data["ca.crt"]
		if len(caPEM) == 0 {
			caPEM = []byte(sec.StringData["ca.crt"])
		}
		for name, raw := range map[string][]byte{"certificate": certPEM, "CA": caPEM} {
			block, _ := pem.Decode(raw)
			if block == nil {
				t.Fatalf("%s: no PEM", name)
			}
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if life := c.NotAfter.Sub(c.NotBefore); life > time.Duration(want+1)*24*time.Hour {
				t.Errorf("validity %d days: the %s lives %v", want, name, life)
			}
		}
		notAfter := sec.Annotations["otelcol-gpu.io/not-after"]
		if wantDate := time.Now().AddDate(0, 0, want).Format("2006-01-02"); notAfter != wantDate && notAfter != time.Now().AddDate(0, 0, want-1).Format("2006-01-02") {
			t.Errorf("otelcol-gpu.io/not-after = %q, want %s", notAfter, wantDate)
		}
	}
}

// TestHelmEgressPolicies: with networkPolicy.egress.enabled the agents may reach only DNS,
// the API server's endpoints and the backend (the gateway instead, in gateway mode), and the
// gateway only DNS and the backend; off (the default) egress stays open.
func TestHelmEgressPolicies(t *testing.T) {
	egress := map[string]any{
		"enabled":   true,
		"apiServer": []any{map[string]any{"cidr": "172.18.0.2/32", "port": 6443}},
		"backend":   []any{map[string]any{"namespace": "monitoring", "podLabels": map[string]any{"app.kubernetes.io/name": "prometheus"}, "port": 9090}},
	}
	peers := func(np *networkingv1.NetworkPolicy) []string {
		var out []string
		for _, r := range np.Spec.Egress {
			for _, to := range r.To {
				for _, p := range r.Ports {
					switch {
					case to.IPBlock != nil:
						out = append(out, fmt.Sprintf("%s:%s", to.IPBlock.CIDR, p.Port.String()))
					default:
						out = append(out, fmt.Sprintf("%s/%v:%s/%s", to.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"], to.PodSelector.MatchLabels, p.Port.String(), *p.Protocol))
					}
				}
			}
		}
		sort.Strings(out)
		return out
	}
	dns := []string{"kube-system/map[k8s-app:kube-dns]:53/TCP", "kube-system/map[k8s-app:kube-dns]:53/UDP"}

	o := helmTemplateValues(t, map[string]any{"networkPolicy": map[string]any{"egress": egress}})
	agent := o.netpols["otelcol-gpu-agent"]
	want := append(append([]string{"172.18.0.2/32:6443"}, dns...), "monitoring/map[app.kubernetes.io/name:prometheus]:9090/TCP")
	sort.Strings(want)
	if got := peers(agent); !slices.Equal(got, want) || !slices.Contains(agent.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("agent egress %v (types %v), want %v", got, agent.Spec.PolicyTypes, want)
	}

	o = helmTemplateValues(t, map[string]any{"networkPolicy": map[string]any{"egress": egress}, "gateway": map[string]any{"enabled": true}})
	agent = o.netpols["otelcol-gpu-agent"]
	gwPeer := fmt.Sprintf("otelcol-gpu-gateway/%v:4317/TCP", o.deployment(t, "otelcol-gpu-gateway").Spec.Selector.MatchLabels)
	want = append([]string{"172.18.0.2/32:6443", gwPeer}, dns...)
	sort.Strings(want)
	if got := peers(agent); !slices.Equal(got, want) {
		t.Errorf("agent egress in gateway mode %v, want %v (the gateway, not the backend)", got, want)
	}
	gw := o.netpols["otelcol-gpu-gateway"]
	want = append(append([]string(nil), dns...), "monitoring/map[app.kubernetes.io/name:prometheus]:9090/TCP")
	sort.Strings(want)
	if got := peers(gw); !slices.Equal(got, want) || !slices.Contains(gw.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("gateway egress %v, want %v", got, want)
	}

	o = helmTemplateValues(t, map[string]any{})
	if np := o.netpols["otelcol-gpu-agent"]; len(np.Spec.Egress) != 0 || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("egress restricted by default: %+v", np.Spec)
	}
	if _, err := renderChart(t, map[string]any{"networkPolicy": map[string]any{"egress": map[string]any{"enabled": true, "backend": []any{map[string]any{"port": 9090}}}}}); err == nil || !strings.Contains(err.Error(), "needs cidr or namespace") {
		t.Errorf("a backend entry without cidr or namespace: %v", err)
	}
}
