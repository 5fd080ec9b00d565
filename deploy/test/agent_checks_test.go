package deploytest

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// agentExpect says which variant of the agent pod a manifest renders.
type agentExpect struct {
	nonRoot bool // UID 10001 and runAsNonRoot, instead of UID 0 without capabilities
	kubelet bool // the pod-resources socket is mounted
	// Processes are attributed: the pod is in the host's PID namespace and reads its own
	// /proc (no host /proc mount, no /var/log/pods: kube_api names the pods).
	processes bool
	// The container runs the image's entrypoint, the full build: the OpenTelemetry
	// Operator's resource cannot set a command. Every other agent runs the lean build.
	entrypoint bool
}

var defaultAgent = agentExpect{kubelet: true, processes: true}

// checkAgentPod asserts what the agent needs and what it must never have.
func checkAgentPod(t *testing.T, spec corev1.PodSpec, want agentExpect) {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(spec.Containers))
	}
	c := spec.Containers[0]

	// The node agent's lean build (builder-config-agent.yaml): less binary mapped on every
	// GPU node (docs/benchmarks.md, "Memory").
	wantBuild := agentBuild
	if want.entrypoint {
		wantBuild = fullBuild
	}
	if b := podBuild(t, c); b != wantBuild {
		t.Errorf("the agent runs %s, want %s", b, wantBuild)
	}
	// One Go scheduler thread: a second one costs 15-20 % of the agent's CPU spinning.
	if v := envMap(c)["GOMAXPROCS"].Value; v != "1" {
		t.Errorf("GOMAXPROCS = %q, want \"1\"", v)
	}
	// Garbage collected at twice the live heap: ~7 % of the agent's CPU (docs/benchmarks.md).
	if v := envMap(c)["GOGC"].Value; v != "200" {
		t.Errorf("GOGC = %q, want \"200\"", v)
	}

	// Isolation from the host: the host's PID namespace only, for process attribution
	// (drivers since 535.113 list only the GPU processes of the caller's PID namespace).
	if spec.HostNetwork || spec.HostIPC {
		t.Errorf("hostNetwork/hostIPC = %v/%v, want both false", spec.HostNetwork, spec.HostIPC)
	}
	if spec.HostPID != want.processes {
		t.Errorf("hostPID = %v, want %v (process attribution needs the host's PID namespace)", spec.HostPID, want.processes)
	}
	checkRestrictedContainer(t, spec, c)
	psc := spec.SecurityContext
	if psc == nil {
		t.Fatal("no pod securityContext")
	}
	uid := effective(psc.RunAsUser, c.SecurityContext.RunAsUser)
	nonRoot := effective(psc.RunAsNonRoot, c.SecurityContext.RunAsNonRoot)
	switch {
	case want.nonRoot:
		if uid == nil || *uid != 10001 || nonRoot == nil || !*nonRoot {
			t.Errorf("non-root agent: runAsUser=%v runAsNonRoot=%v, want 10001/true", deref(uid), deref(nonRoot))
		}
	default:
		// UID 0 is explicit, and only with every capability dropped (checked above).
		if uid == nil || *uid != 0 {
			t.Errorf("agent: runAsUser=%v, want an explicit 0 (the kubelet socket is root-only)", deref(uid))
		}
		if nonRoot != nil && *nonRoot {
			t.Error("agent: runAsNonRoot=true contradicts runAsUser=0")
		}
	}

	// Host mounts: exactly the expected ones, each read-only; the state volume writable.
	wantHost := map[string]string{} // host path → mount path
	if want.kubelet {
		wantHost["/var/lib/kubelet/pod-resources"] = "/var/lib/kubelet/pod-resources"
	}
	gotHost := map[string]string{}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	stateMounted := false
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("mount %s: no volume of that name", m.Name)
			continue
		}
		switch {
		case v.HostPath != nil:
			gotHost[v.HostPath.Path] = m.MountPath
			if !m.ReadOnly {
				t.Errorf("hostPath %s is mounted writable at %s", v.HostPath.Path, m.MountPath)
			}
			// readOnly alone leaves the mounts below a hostPath writable.
			if m.RecursiveReadOnly == nil || *m.RecursiveReadOnly != corev1.RecursiveReadOnlyEnabled {
				t.Errorf("hostPath %s at %s: recursiveReadOnly %v, want Enabled", v.HostPath.Path, m.MountPath, deref(m.RecursiveReadOnly))
			}
		case v.EmptyDir != nil && m.MountPath == "/var/lib/otelcol-gpu":
			stateMounted = true
			if m.ReadOnly {
				t.Error("the WAL/queue volume is read-only")
			}
		case v.EmptyDir != nil:
			t.Errorf("unexpected emptyDir mount %s", m.MountPath)
		default:
			if !m.ReadOnly {
				t.Errorf("%s (%s) is mounted writable", m.MountPath, m.Name)
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			if _, mounted := gotHost[v.HostPath.Path]; !mounted {
				t.Errorf("hostPath volume %s (%s) is not mounted", v.Name, v.HostPath.Path)
			}
		}
	}
	if !reflect.DeepEqual(gotHost, wantHost) {
		t.Errorf("host mounts (host → container) = %v, want %v", gotHost, wantHost)
	}
	if !stateMounted {
		t.Error("no writable emptyDir at /var/lib/otelcol-gpu for the WAL / send queue")
	}

	// Scheduling: GPU nodes only, tolerating their taints, first in line.
	checkGPUNodeAffinity(t, spec.Affinity)
	tolerated := false
	for _, tol := range spec.Tolerations {
		if tol.Key == "nvidia.com/gpu" && tol.Operator == corev1.TolerationOpExists && tol.Effect == "" {
			tolerated = true
		}
	}
	if !tolerated {
		t.Errorf("no toleration {key: nvidia.com/gpu, operator: Exists} in %+v", spec.Tolerations)
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName = %q, want system-node-critical", spec.PriorityClassName)
	}
	if spec.ServiceAccountName == "" {
		t.Error("no serviceAccountName: k8s_attributes needs the agent's role")
	}

	// Environment.
	env := envMap(c)
	for name, value := range map[string]string{
		"NVIDIA_VISIBLE_DEVICES":      "all",
		"NVIDIA_DRIVER_CAPABILITIES":  "utility",
		"OTELCOL_GPU_HEALTH_ENDPOINT": "0.0.0.0:13133",
		"OTELCOL_GPU_TELEMETRY_HOST":  "0.0.0.0",
		"OTELCOL_GPU_TELEMETRY_PORT":  "8888",
		"OTELCOL_GPU_PROC_ROOT":       "/proc", // hostPID: the container's own /proc
		"OTELCOL_GPU_KUBELET_SOCKET":  "unix:///var/lib/kubelet/pod-resources/kubelet.sock",
	} {
		if got := env[name]; got.Value != value || got.ValueFrom != nil {
			t.Errorf("env %s = %q (from %v), want %q", name, got.Value, got.ValueFrom, value)
		}
	}
	if _, ok := env["OTELCOL_GPU_POD_LOGS_DIR"]; ok {
		t.Error("OTELCOL_GPU_POD_LOGS_DIR is set: /var/log/pods is not mounted, kube_api names the pods")
	}
	for _, name := range []string{"K8S_NODE_NAME", "OTELCOL_GPU_HOST_NAME"} {
		e := env[name]
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("env %s must come from the downward API spec.nodeName, got %+v", name, e)
		}
	}
	if wal, ok := env["OTELCOL_GPU_WAL_DIR"]; ok && !strings.HasPrefix(wal.Value, "/var/lib/otelcol-gpu/") {
		t.Errorf("OTELCOL_GPU_WAL_DIR = %q is not on the state volume", wal.Value)
	}
	if q, ok := env["OTELCOL_GPU_QUEUE_DIR"]; ok && !strings.HasPrefix(q.Value, "/var/lib/otelcol-gpu/") {
		t.Errorf("OTELCOL_GPU_QUEUE_DIR = %q is not on the state volume", q.Value)
	}

	// No GPU requested: the agent must not take one away from workloads.
	for name := range c.Resources.Requests {
		if strings.Contains(string(name), "nvidia.com/") {
			t.Errorf("the agent requests %s", name)
		}
	}
	for name := range c.Resources.Limits {
		if strings.Contains(string(name), "nvidia.com/") {
			t.Errorf("the agent has a limit on %s", name)
		}
	}
	checkResources(t, c)
	checkHealthProbes(t, c)
}

// checkRestrictedContainer: what every otelcol-gpu container must have.
func checkRestrictedContainer(t *testing.T, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("no container securityContext")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged container")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}
	var podSeccomp, seccomp *corev1.SeccompProfile
	if spec.SecurityContext != nil {
		podSeccomp = spec.SecurityContext.SeccompProfile
	}
	seccomp = effective(podSeccomp, sc.SeccompProfile)
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp profile = %+v, want RuntimeDefault", seccomp)
	}
	if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		t.Error("procMount must stay Default")
	}
}

// checkGPUNodeAffinity: the agent runs on GPU nodes only, and leaves a node while the GPU
// Operator upgrades its driver or changes its MIG layout (gpu_operator_test.go evaluates
// the terms against nodes).
func checkGPUNodeAffinity(t *testing.T, a *corev1.Affinity) {
	t.Helper()
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatal("no required node affinity: the agent would land on every node")
	}
	want := map[string]bool{"nvidia.com/gpu.present": false, "feature.node.kubernetes.io/pci-10de.present": false}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 {
			t.Errorf("node selector term %+v: no expression", term)
			continue
		}
		e := term.MatchExpressions[0]
		if _, ok := want[e.Key]; ok && e.Operator == corev1.NodeSelectorOpIn && reflect.DeepEqual(e.Values, []string{"true"}) {
			want[e.Key] = true
		}
	}
	for k, ok := range want {
		if !ok {
			t.Errorf("node affinity lacks a term starting with %s In [true]", k)
		}
	}
	checkLeavesForGPUOperator(t, a)
}

func checkResources(t *testing.T, c corev1.Container) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("no memory limit")
	}
}

func checkHealthProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntValue() != 13133 {
			t.Errorf("%s probe = %+v, want an HTTP GET on the health_check port 13133", name, p)
		}
	}
}

// checkGatewayPod: the gateway touches nothing on the host and runs as non-root.
func checkGatewayPod(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	c := spec.Containers[0]
	checkRestrictedContainer(t, spec, c)
	uid := effective(spec.SecurityContext.RunAsUser, c.SecurityContext.RunAsUser)
	nonRoot := effective(spec.SecurityContext.RunAsNonRoot, c.SecurityContext.RunAsNonRoot)
	if uid == nil || *uid == 0 || nonRoot == nil || !*nonRoot {
		t.Errorf("gateway: runAsUser=%v runAsNonRoot=%v, want non-root", deref(uid), deref(nonRoot))
	}
	if spec.HostPID || spec.HostNetwork || spec.HostIPC {
		t.Error("gateway shares a host namespace")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("gateway mounts hostPath %s", v.HostPath.Path)
		}
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("gateway mounts a service account token it does not need")
	}
	checkResources(t, c)
	checkHealthProbes(t, c)
	if env := envMap(c); env["OTELCOL_GPU_HEALTH_ENDPOINT"].Value != "0.0.0.0:13133" {
		t.Errorf("gateway OTELCOL_GPU_HEALTH_ENDPOINT = %q", env["OTELCOL_GPU_HEALTH_ENDPOINT"].Value)
	}
}

// wantAgentRules is the whole ClusterRole of the agent: k8s_attributes with agent.yaml's
// extract list watches pods only (deploy/kubernetes/base/rbac.yaml explains), gpu_enrich's
// DRA attribution watches ResourceSlices.
var wantAgentRules = []rbacv1.PolicyRule{{
	APIGroups: []string{""},
	Resources: []string{"pods"},
	Verbs:     []string{"get", "list", "watch"},
}, {
	APIGroups: []string{"resource.k8s.io"},
	Resources: []string{"resourceslices"},
	Verbs:     []string{"get", "list", "watch"},
}}

// checkRBAC: the agent's ClusterRole has exactly wantAgentRules, then extra (the nodes
// rule of the node pool), bound to account in namespace.
func checkRBAC(t *testing.T, o *objects, role, account, namespace string, extra ...rbacv1.PolicyRule) {
	t.Helper()
	cr, ok := o.clusterRoles[role]
	if !ok {
		t.Fatalf("no ClusterRole %s in %v", role, o.names())
	}
	want := append(slices.Clone(wantAgentRules), extra...)
	if !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("ClusterRole %s rules = %+v, want exactly %+v", role, cr.Rules, want)
	}
	if len(o.clusterRoles) != 1 {
		t.Errorf("want one ClusterRole, got %v", keys(o.clusterRoles))
	}
	crb, ok := o.bindings[role]
	if !ok {
		t.Fatalf("no ClusterRoleBinding %s", role)
	}
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != role {
		t.Errorf("binding refers to %+v", crb.RoleRef)
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: namespace}}
	if !reflect.DeepEqual(crb.Subjects, subjects) {
		t.Errorf("binding subjects = %+v, want %+v", crb.Subjects, subjects)
	}
	if _, ok := o.accounts[account]; !ok {
		t.Errorf("no ServiceAccount %s", account)
	}
}

func effective[T any](pod, container *T) *T {
	if container != nil {
		return container
	}
	return pod
}

func deref[T any](p *T) any {
	if p == nil {
		return "<unset>"
	}
	return *p
}
