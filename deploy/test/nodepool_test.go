package deploytest

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The node pool (deploy/config-overlays/node-pool.yaml): k8s_attributes takes the label
// OTELCOL_GPU_NODE_POOL_LABEL names from the agent's Node, which needs read access to nodes.
const (
	nodePoolOverlay = "deploy/config-overlays/node-pool.yaml"
	nodePoolArg     = "--config=/etc/otelcol-gpu/config/node-pool.yaml"
	nodePoolEnv     = "OTELCOL_GPU_NODE_POOL_LABEL"
	// What components/node-pool leaves in OTELCOL_GPU_NODE_POOL_LABEL for you to patch.
	nodePoolPlaceholder = "set-your-node-pool-label.invalid/pool"
)

// nodesRule is the one rule the node pool adds to the agent's ClusterRole.
var nodesRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}

// TestNodePoolOverlayKeepsTheAgentsLabels: lists are replaced when configs merge, so the
// overlay repeats the whole extract.labels list: exactly configs/agent.yaml's entries (the
// same as agent-to-gateway.yaml's), in order, then the pool taken from the node label
// OTELCOL_GPU_NODE_POOL_LABEL names, and nothing else.
func TestNodePoolOverlayKeepsTheAgentsLabels(t *testing.T) {
	labels := func(rel string) []any {
		l, ok := dig(loadYAML(t, rel), "processors", "k8s_attributes", "extract", "labels").([]any)
		if !ok {
			t.Fatalf("%s: no processors.k8s_attributes.extract.labels list", rel)
		}
		return l
	}
	agent := labels("configs/agent.yaml")
	if toGateway := labels("configs/agent-to-gateway.yaml"); !reflect.DeepEqual(toGateway, agent) {
		t.Errorf("configs/agent-to-gateway.yaml's k8s_attributes extract.labels %v differ from configs/agent.yaml's %v: node-pool.yaml serves both", toGateway, agent)
	}
	overlay := labels(nodePoolOverlay)
	if len(overlay) != len(agent)+1 || !reflect.DeepEqual(overlay[:len(agent)], agent) {
		t.Fatalf("%s's extract.labels %v must be configs/agent.yaml's %v, then the pool: the merge replaces the list", nodePoolOverlay, overlay, agent)
	}
	want := map[string]any{"tag_name": "k8s.node.pool", "key": "${env:" + nodePoolEnv + "}", "from": "node"}
	if pool := overlay[len(agent)]; !reflect.DeepEqual(pool, want) {
		t.Errorf("the pool entry = %v, want %v", pool, want)
	}
	// It sets nothing else.
	cfg := loadYAML(t, nodePoolOverlay)
	if len(cfg) != 1 || len(dig(cfg, "processors").(map[string]any)) != 1 ||
		len(dig(cfg, "processors", "k8s_attributes").(map[string]any)) != 1 ||
		len(dig(cfg, "processors", "k8s_attributes", "extract").(map[string]any)) != 1 {
		t.Errorf("%s must set processors.k8s_attributes.extract.labels only: %v", nodePoolOverlay, cfg)
	}
}

// TestNodePoolOverlayValidates: the overlay over both agent configs, on both builds; with
// the label unset the agent still starts (no pool), as the overlay's header says.
func TestNodePoolOverlayValidates(t *testing.T) {
	root := repoRoot(t)
	env := map[string]string{"PROMETHEUS_REMOTE_WRITE_URL": "https://prometheus.example.com/api/v1/write"}
	for _, base := range []string{"configs/agent.yaml", "configs/agent-to-gateway.yaml"} {
		files := []string{filepath.Join(root, base), filepath.Join(root, nodePoolOverlay)}
		t.Run(filepath.Base(base), func(t *testing.T) {
			withLabel := map[string]string{nodePoolEnv: "cloud.google.com/gke-nodepool"}
			for k, v := range env {
				withLabel[k] = v
			}
			validateConfigs(t, agentBuild, withLabel, files...)
			validateConfigs(t, fullBuild, withLabel, files...)
			validateConfigs(t, agentBuild, env, files...)
		})
	}
}

// checkNodePoolAgent: the agent merges the overlay last (byte for byte the one in
// deploy/config-overlays), with OTELCOL_GPU_NODE_POOL_LABEL set once to label, and its
// ClusterRole adds get, list and watch on nodes to the shipped rules, nothing more.
func checkNodePoolAgent(t *testing.T, o *objects, spec corev1.PodSpec, base, label string) {
	t.Helper()
	c := spec.Containers[0]
	if len(c.Args) < 2 || c.Args[0] != "--config=/etc/otelcol-gpu/config/"+base || !slices.Contains(c.Args, nodePoolArg) {
		t.Errorf("args = %q: want %s after %s", c.Args, nodePoolArg, base)
	}
	cm := configVolumeMap(t, o, spec)
	if cm.Data["node-pool.yaml"] != string(readRepoFile(t, nodePoolOverlay)) {
		t.Errorf("ConfigMap %s: node-pool.yaml differs from %s: run deploy/sync-configs.sh", cm.Name, nodePoolOverlay)
	}
	var values []string
	for _, e := range c.Env {
		if e.Name == nodePoolEnv {
			values = append(values, e.Value)
		}
	}
	if !slices.Equal(values, []string{label}) {
		t.Errorf("%s = %q, want exactly %q", nodePoolEnv, values, label)
	}
	checkRBAC(t, o, "otelcol-gpu-agent", "otelcol-gpu-agent", "otelcol-gpu", nodesRule)
	validatePod(t, o, spec)
}

// TestKustomizeNodePool: components/node-pool on the direct agents (../../base) and on the
// agents in gateway mode, left at its placeholder and patched as its header shows.
func TestKustomizeNodePool(t *testing.T) {
	const userPatch = `patches:
  - target: {kind: DaemonSet, name: otelcol-gpu-agent}
    patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: otelcol-gpu-agent, namespace: otelcol-gpu}
      spec:
        template:
          spec:
            containers:
              - name: otelcol-gpu
                env:
                  - name: OTELCOL_GPU_NODE_POOL_LABEL
                    value: cloud.google.com/gke-nodepool
`
	for _, tc := range []struct {
		name, resource, base, patch, label string
	}{
		{"base, placeholder", "../../base", "agent.yaml", "", nodePoolPlaceholder},
		{"base, patched", "../../base", "agent.yaml", userPatch, "cloud.google.com/gke-nodepool"},
		{"gateway-mode, patched", "../gateway-mode", "agent-to-gateway.yaml", userPatch, "cloud.google.com/gke-nodepool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + tc.resource +
				"\ncomponents:\n  - ../../components/node-pool\n" + tc.patch
			o := kustomizeBuild(t, "overlays/test-node-pool-"+strings.NewReplacer(",", "", " ", "-").Replace(tc.name), overlay)
			spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
			checkAgentPod(t, spec, defaultAgent)
			checkNodePoolAgent(t, o, spec, tc.base, tc.label)
		})
	}
}

// TestHelmNodePool: agent.nodePoolLabel merges node-pool.yaml after the agents' base config
// (direct or in gateway mode), sets the label, and only then may the agents read nodes
// (TestHelmDefaults: not by default).
func TestHelmNodePool(t *testing.T) {
	for _, gateway := range []bool{false, true} {
		name, base := "agent", "agent.yaml"
		if gateway {
			name, base = "gateway mode", "agent-to-gateway.yaml"
		}
		t.Run(name, func(t *testing.T) {
			o := helmTemplateValues(t, map[string]any{
				"agent":   map[string]any{"nodePoolLabel": "karpenter.sh/nodepool"},
				"gateway": map[string]any{"enabled": gateway},
			})
			spec := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
			checkAgentPod(t, spec, defaultAgent)
			if want := []string{"--config=/etc/otelcol-gpu/config/" + base, nodePoolArg}; !slices.Equal(spec.Containers[0].Args, want) {
				t.Errorf("args = %q, want %q", spec.Containers[0].Args, want)
			}
			checkNodePoolAgent(t, o, spec, base, "karpenter.sh/nodepool")
		})
	}
}
