package deploytest

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizeBuild renders a kustomization. dir is relative to deploy/kubernetes; with a
// non-empty overlay, a kustomization with that content is written to dir first (in memory:
// the tree is copied, nothing is written to disk).
func kustomizeBuild(t *testing.T, dir, overlay string) *objects {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	src := filepath.Join(repoRoot(t), "deploy", "kubernetes")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		return mem.WriteFile(filepath.Join("/k", rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	if overlay != "" {
		if err := mem.WriteFile(filepath.Join("/k", dir, "kustomization.yaml"), []byte(overlay)); err != nil {
			t.Fatal(err)
		}
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(mem, filepath.Join("/k", dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, out)
}

func TestKustomizeBase(t *testing.T) {
	o := kustomizeBuild(t, "base", "")
	ds := o.daemonSet(t, "otelcol-gpu-agent")
	spec := ds.Spec.Template.Spec
	checkAgentPod(t, spec, defaultAgent)
	checkRBAC(t, o, "otelcol-gpu-agent", "otelcol-gpu-agent", "otelcol-gpu")

	if ns, ok := o.namespaces["otelcol-gpu"]; !ok {
		t.Error("no Namespace otelcol-gpu")
	} else if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Error("the namespace must admit read-only hostPath volumes (pod-security enforce=privileged)")
	}
	for _, obj := range o.all {
		switch obj.kind {
		case "Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			continue // cluster-scoped
		}
		if !strings.Contains(string(obj.raw), "namespace: otelcol-gpu") {
			t.Errorf("%s %s is not in namespace otelcol-gpu", obj.kind, obj.name)
		}
	}

	// One source of truth: the generated ConfigMap holds configs/agent.yaml byte for byte,
	// and the agent runs it alone.
	c := spec.Containers[0]
	if want := []string{"--config=/etc/otelcol-gpu/config/agent.yaml"}; !slices.Equal(c.Args, want) {
		t.Errorf("args = %q, want %q", c.Args, want)
	}
	var cmName string
	for _, v := range spec.Volumes {
		if v.Name == "config" {
			cmName = v.ConfigMap.Name
		}
	}
	cm, ok := o.configMaps[cmName]
	if !ok || !strings.HasPrefix(cmName, "otelcol-gpu-agent-") {
		t.Fatalf("config volume refers to %q, want the generated otelcol-gpu-agent-<hash> (have %v)", cmName, o.names())
	}
	if got, want := cm.Data["agent.yaml"], string(readRepoFile(t, "configs/agent.yaml")); got != want {
		t.Error("the agent ConfigMap differs from configs/agent.yaml: run deploy/sync-configs.sh")
	}
	// The remote-write overlays ride along (the components only add a --config, so they work
	// in the agents' and the gateway's namespace alike); the default runs agent.yaml alone.
	for _, overlay := range []string{"remote-write-auth-basic.yaml", "remote-write-auth-bearer.yaml", "remote-write-tls.yaml", "remote-write-wal.yaml"} {
		if cm.Data[overlay] != string(readRepoFile(t, "deploy/config-overlays/"+overlay)) {
			t.Errorf("the agent ConfigMap's %s differs from deploy/config-overlays: run deploy/sync-configs.sh", overlay)
		}
	}
	if len(cm.Data) != 5 {
		t.Errorf("agent ConfigMap keys = %v, want agent.yaml and the four remote-write overlays", keys(cm.Data))
	}
	if want := []string{"--config=/etc/otelcol-gpu/config/agent.yaml"}; !slices.Equal(c.Args, want) {
		t.Errorf("args = %q, want %q", c.Args, want)
	}
	if img := c.Image; img != "ghcr.io/otelcol-gpu/otelcol-gpu:0.1.0" {
		t.Errorf("image = %q", img)
	}
	if svc, ok := o.services["otelcol-gpu-agent"]; !ok || svc.Spec.Ports[0].Port != 8888 {
		t.Error("no self-metrics Service on 8888")
	}
	// deploy/README.md's example patches env/0 to set the URL.
	if c.Env[0].Name != "PROMETHEUS_REMOTE_WRITE_URL" || c.Env[0].Value == "" {
		t.Errorf("env[0] = %+v, want PROMETHEUS_REMOTE_WRITE_URL (deploy/README.md patches it by index)", c.Env[0])
	}
	validatePod(t, o, spec)
}

// httpsBackendPatch points the agents at an https remote-write URL (a kustomization's tail).
const httpsBackendPatch = `patches:
  - target: {kind: DaemonSet, name: otelcol-gpu-agent}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/env/0/value
        value: https://mimir.example.com/api/v1/push
`

func TestKustomizeComponents(t *testing.T) {
	for _, tc := range []struct {
		name       string
		components []string
		want       agentExpect
		check      func(t *testing.T, o *objects)
	}{
		{
			name:       "runtime-class-nvidia",
			components: []string{"runtime-class-nvidia"},
			want:       defaultAgent,
			check: func(t *testing.T, o *objects) {
				if rc := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec.RuntimeClassName; rc == nil || *rc != "nvidia" {
					t.Errorf("runtimeClassName = %v, want nvidia", deref(rc))
				}
			},
		},
		{
			name:       "non-root",
			components: []string{"non-root"},
			want:       agentExpect{nonRoot: true, processes: true},
		},
		{
			name:       "remote-write-auth-bearer",
			components: []string{"remote-write-auth-bearer"},
			want:       defaultAgent,
			check: func(t *testing.T, o *objects) {
				c := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec.Containers[0]
				if !slices.Contains(c.Args, "--config=/etc/otelcol-gpu/config/remote-write-auth-bearer.yaml") {
					t.Errorf("args = %q: the bearer overlay is not merged", c.Args)
				}
			},
		},
		{
			name:       "remote-write-tls",
			components: []string{"remote-write-tls", "remote-write-auth-basic"},
			want:       defaultAgent,
			check: func(t *testing.T, o *objects) {
				spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
				if !slices.Contains(spec.Containers[0].Args, "--config=/etc/otelcol-gpu/config/remote-write-tls.yaml") {
					t.Errorf("args = %q: the TLS overlay is not merged", spec.Containers[0].Args)
				}
				mountedAt(t, spec, "/etc/otelcol-gpu/remote-write-ca", func(v corev1.Volume) bool {
					return v.ConfigMap != nil && v.ConfigMap.Name == "otelcol-gpu-remote-write-ca"
				}, "the remote-write CA ConfigMap")
			},
		},
		{
			name:       "remote-write-wal",
			components: []string{"remote-write-wal"},
			want:       defaultAgent,
			check: func(t *testing.T, o *objects) {
				checkWALComponent(t, o, o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec)
			},
		},
		{
			name:       "remote-write-wal with bearer auth",
			components: []string{"remote-write-auth-bearer", "remote-write-wal"},
			want:       defaultAgent,
			check: func(t *testing.T, o *objects) {
				spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
				checkWALComponent(t, o, spec)
				if !slices.Contains(spec.Containers[0].Args, "--config=/etc/otelcol-gpu/config/remote-write-auth-bearer.yaml") {
					t.Errorf("args = %q: the bearer overlay is not merged", spec.Containers[0].Args)
				}
			},
		},
		{
			name:       "remote-write-auth-basic and non-root",
			components: []string{"remote-write-auth-basic", "non-root", "runtime-class-nvidia"},
			want:       agentExpect{nonRoot: true, processes: true},
			check: func(t *testing.T, o *objects) {
				env := envMap(o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec.Containers[0])
				if ref := env["REMOTE_WRITE_BASIC_AUTH"].ValueFrom; ref == nil || ref.SecretKeyRef == nil {
					t.Error("REMOTE_WRITE_BASIC_AUTH must come from a Secret")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base\ncomponents:\n"
			for _, c := range tc.components {
				overlay += "  - ../../components/" + c + "\n"
			}
			// An https backend, as README's overlay sets it: credentials over http:// are refused.
			overlay += httpsBackendPatch
			o := kustomizeBuild(t, "overlays/test-"+strings.ReplaceAll(tc.name, " ", "-"), overlay)
			spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
			checkAgentPod(t, spec, tc.want)
			checkRBAC(t, o, "otelcol-gpu-agent", "otelcol-gpu-agent", "otelcol-gpu")
			if tc.check != nil {
				tc.check(t, o)
			}
			validatePod(t, o, spec)
		})
	}
}

// checkWALComponent: components/remote-write-wal merges config-overlays/remote-write-wal.yaml
// (byte for byte) after the workload's own config, and the WAL directory is on the state
// volume (checkAgentPod checks that the volume is a writable emptyDir).
func checkWALComponent(t *testing.T, o *objects, spec corev1.PodSpec) {
	t.Helper()
	c := spec.Containers[0]
	const arg = "--config=/etc/otelcol-gpu/config/remote-write-wal.yaml"
	if i := slices.Index(c.Args, arg); i < 1 {
		t.Errorf("args = %q: want %s after the base config", c.Args, arg)
	}
	var cm *corev1.ConfigMap
	for _, v := range spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			cm = o.configMaps[v.ConfigMap.Name]
		}
	}
	if cm == nil {
		t.Fatalf("no config volume from the generated ConfigMap (have %v)", o.names())
	}
	if cm.Data["remote-write-wal.yaml"] != string(readRepoFile(t, "deploy/config-overlays/remote-write-wal.yaml")) {
		t.Error("the workload's remote-write-wal.yaml differs from deploy/config-overlays: run deploy/sync-configs.sh")
	}
	checkWALOnStateVolume(t, spec, c)
}

func TestKustomizeGatewayMode(t *testing.T) {
	for _, tc := range []struct {
		name, dir, overlay string
		auth, wal          bool
	}{
		{name: "overlay", dir: "overlays/gateway-mode"},
		{
			name: "with bearer auth",
			dir:  "overlays/test-gateway-auth",
			overlay: `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../gateway-mode
components:
  - ../../components/remote-write-auth-bearer
patches:
  - target: {kind: Deployment, name: otelcol-gpu-gateway}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/env/0/value
        value: https://mimir.example.com/api/v1/push
`,
			auth: true,
		},
		{
			name: "with the WAL",
			dir:  "overlays/test-gateway-wal",
			overlay: `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../gateway-mode
components:
  - ../../components/remote-write-wal
`,
			wal: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := kustomizeBuild(t, tc.dir, tc.overlay)

			ds := o.daemonSet(t, "otelcol-gpu-agent")
			agent := ds.Spec.Template.Spec
			checkAgentPod(t, agent, defaultAgent)
			checkRBAC(t, o, "otelcol-gpu-agent", "otelcol-gpu-agent", "otelcol-gpu")
			ac := agent.Containers[0]
			if ac.Args[0] != "--config=/etc/otelcol-gpu/config/agent-to-gateway.yaml" || len(ac.Args) != 1 {
				t.Errorf("agent args = %q: want agent-to-gateway.yaml alone (no remote-write auth on OTLP senders)", ac.Args)
			}
			validatePod(t, o, agent)

			gw := o.deployment(t, "otelcol-gpu-gateway")
			checkGatewayPod(t, gw.Spec.Template.Spec)
			gc := gw.Spec.Template.Spec.Containers[0]
			checkGatewaySecured(t, o, gatewayNames{
				agentNamespace: "otelcol-gpu", gatewayNamespace: "otelcol-gpu-gateway",
				gateway: "otelcol-gpu-gateway", tlsSecret: "otelcol-gpu-gateway-tls",
				caConfigMap: "otelcol-gpu-gateway-ca", tokenSecret: "otelcol-gpu-gateway-token",
				agentNetpol: "otelcol-gpu-agent", monitoring: "monitoring",
			})
			if got := slices.Contains(gc.Args, "--config=/etc/otelcol-gpu/config/remote-write-auth-bearer.yaml"); got != tc.auth {
				t.Errorf("gateway auth overlay merged = %v, want %v (args %q)", got, tc.auth, gc.Args)
			}
			if tc.wal {
				checkWALComponent(t, o, gw.Spec.Template.Spec)
			} else if slices.ContainsFunc(gc.Args, func(a string) bool { return strings.Contains(a, "remote-write-wal") }) {
				t.Errorf("gateway args = %q: the WAL is opt-in", gc.Args)
			}
			validatePod(t, o, gw.Spec.Template.Spec)

			hpa, ok := o.hpas["otelcol-gpu-gateway"]
			if !ok || hpa.Spec.ScaleTargetRef.Name != "otelcol-gpu-gateway" || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
				t.Errorf("gateway HPA = %+v", hpa)
			}
			svc, ok := o.services["otelcol-gpu-gateway"]
			if !ok || svc.Spec.Ports[0].Port != 4317 {
				t.Error("no gateway Service on 4317")
			}
			if _, ok := o.pdbs["otelcol-gpu-gateway"]; !ok {
				t.Error("no gateway PodDisruptionBudget")
			}
			if gw.Spec.Replicas != nil {
				t.Error("the gateway Deployment sets replicas: the HPA owns them")
			}
			cm := o.configMaps[gw.Spec.Template.Spec.Volumes[0].ConfigMap.Name]
			if cm == nil || cm.Data["gateway.yaml"] != string(readRepoFile(t, "configs/gateway.yaml")) {
				t.Error("the gateway ConfigMap differs from configs/gateway.yaml: run deploy/sync-configs.sh")
			}
		})
	}
}

func TestKustomizeKubePrometheusStack(t *testing.T) {
	o := kustomizeBuild(t, "kube-prometheus-stack", "")
	for _, cm := range o.configMaps {
		if cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != "monitoring" {
			t.Errorf("dashboard ConfigMap %s: labels %v, namespace %q", cm.Name, cm.Labels, cm.Namespace)
		}
	}
	for _, r := range o.unstructured["PrometheusRule"] {
		md := r["metadata"].(map[string]any)
		if md["namespace"] != "monitoring" {
			t.Errorf("PrometheusRule %v is not in monitoring", md["name"])
		}
	}
	if len(o.unstructured["PodMonitor"]) != 1 {
		t.Error("no PodMonitor for the collectors' self-metrics")
	}
}
