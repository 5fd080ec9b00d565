package deploytest

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"
)

// warnings collects the API server's warnings (Pod Security's warn mode speaks through them).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// TestPodSecurityAdmission: the real API server's Pod Security admission, with the
// namespaces as each form ships them, admits the gateway's pod at "restricted" and
// rejects a privileged pod (and a hostPath, and root) in the gateway's namespace; it admits
// the agent's pod in its namespace, which must stay "privileged" because the baseline
// standard forbids every hostPath: the agent's pod is rejected in a baseline namespace,
// and the agent namespace's warn label says so at each admission. There the shipped
// ValidatingAdmissionPolicy refuses what baseline would (privileged, capabilities, host
// network and IPC), the host's PID namespace to any pod but the agent's with every
// capability dropped, and any host mount but the agent's, or a writable one.
func TestPodSecurityAdmission(t *testing.T) {
	s := kubeapi.Start(t)
	a := newApplier(t, s)
	w := &warnings{}
	cfg := rest.CopyConfig(s.Admin)
	cfg.WarningHandler = w
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	create := func(pod *corev1.Pod) error {
		_, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, dryRun)
		return err
	}

	for _, form := range []struct {
		name string
		o    func(t *testing.T) *objects
	}{
		{"kustomize gateway-mode", func(t *testing.T) *objects { return kustomizeBuild(t, "overlays/gateway-mode", "") }},
		{"helm gateway-values", func(t *testing.T) *objects {
			return helmTemplate(t, filepath.Join(chartDir(t), "ci", "gateway-values.yaml"))
		}},
		// Per-agent identity: the gateway mounts kube-root-ca.crt, the agents a projected
		// ServiceAccount token.
		{"helm gateway-identity-values", func(t *testing.T) *objects {
			return helmTemplate(t, filepath.Join(chartDir(t), "ci", "gateway-identity-values.yaml"))
		}},
	} {
		t.Run(form.name, func(t *testing.T) {
			o := form.o(t)
			applied := a.apply(t, o)
			defer a.remove(t, applied)

			gw := o.deployment(t, "otelcol-gpu-gateway")
			gwNS, err := s.Client.CoreV1().Namespaces().Get(ctx, gw.Namespace, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if level := gwNS.Labels["pod-security.kubernetes.io/enforce"]; level != "restricted" {
				t.Fatalf("the gateway's namespace %s enforces %q, want restricted", gw.Namespace, level)
			}
			gwPod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "gateway", Namespace: gw.Namespace, Labels: gw.Spec.Template.Labels},
				Spec:       gw.Spec.Template.Spec,
			}
			w.take()
			if err := create(gwPod); err != nil {
				t.Errorf("the gateway's pod is refused in %s: %v", gw.Namespace, err)
			}
			if ws := w.take(); len(ws) != 0 {
				t.Errorf("warnings admitting the gateway: %q", ws)
			}
			for _, probe := range []struct {
				name, want string
				mutate     func(*corev1.Pod)
			}{
				{"privileged", "privileged", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.Privileged = ptr(true)
					p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true)
				}},
				{"hostPath", "hostPath", func(p *corev1.Pod) {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/proc"},
					}})
				}},
				{"root", "runAsNonRoot", func(p *corev1.Pod) {
					p.Spec.SecurityContext.RunAsUser, p.Spec.SecurityContext.RunAsNonRoot = ptr(int64(0)), ptr(false)
				}},
				// The agent's host PID namespace stays the agent's: the gateway has none.
				{"hostPID", "hostPID", func(p *corev1.Pod) { p.Spec.HostPID = true }},
			} {
				pod := gwPod.DeepCopy()
				pod.Name = "probe-" + strings.ToLower(probe.name)
				probe.mutate(pod)
				err := create(pod)
				if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) || !strings.Contains(err.Error(), probe.want) {
					t.Errorf("a %s pod in %s: %v, want refused by Pod Security (restricted, %s)", probe.name, gw.Namespace, err, probe.want)
				}
			}

			var agent *corev1.PodTemplateSpec
			var agentNS string
			for _, ds := range o.daemonSets {
				agent, agentNS = &ds.Spec.Template, ds.Namespace
			}
			if agentNS == "" {
				agentNS = releaseNamespace
			}
			agentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: agentNS, Labels: agent.Labels}, Spec: agent.Spec}
			if o.namespaces[agentNS] == nil {
				// Helm: the user labels the release namespace (deploy/README.md).
				ns, err := s.Client.CoreV1().Namespaces().Get(ctx, agentNS, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
				ns.Labels["pod-security.kubernetes.io/warn"] = "baseline"
				if _, err := s.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			w.take()
			if err := create(agentPod); err != nil {
				t.Errorf("the agent's pod is refused in %s: %v", agentNS, err)
			}
			if ws := strings.Join(w.take(), " "); !strings.Contains(ws, "hostPath") || !strings.Contains(ws, "hostPID") {
				t.Errorf("admitting the agent: warnings %q, want baseline's hostPath and hostPID warnings (warn: baseline)", ws)
			}
			// The namespace is "privileged" for the agent's mounts; the shipped admission
			// policy keeps everything else there at baseline, and the host mounts to the
			// agent's, read-only. (The policy reaches the admission plugin within a second.)
			for _, probe := range []struct {
				name, want string
				mutate     func(*corev1.Pod)
			}{
				{"privileged", "no privileged container", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.Privileged = ptr(true)
					p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true)
				}},
				{"capability", "no added capabilities", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
				}},
				// The agent's pod has the host's PID namespace; no other pod may, nor the
				// agent's pod with a capability left to a container (a signal or ptrace away
				// from every host process), nor any pod the host's network or IPC.
				{"hostPID for another account", "the host PID namespace only for the agent", func(p *corev1.Pod) {
					p.Spec.ServiceAccountName = "default"
				}},
				{"hostPID with capabilities", "the host PID namespace only for the agent", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.Capabilities.Drop = nil
				}},
				{"hostPID with privilege escalation", "the host PID namespace only for the agent", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true)
				}},
				{"hostNetwork", "no host network or IPC", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
				{"hostIPC", "no host network or IPC", func(p *corev1.Pod) { p.Spec.HostIPC = true }},
				{"host root", "only the agent's host paths", func(p *corev1.Pod) {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "host-root", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/"},
					}})
				}},
				// hostPID shows the host's processes: the host's /proc is no longer the agent's.
				{"host proc", "only the agent's host paths", func(p *corev1.Pod) {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "host-proc", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/proc"},
					}})
				}},
				// Baseline's other rules, which the namespace's "privileged" drops.
				{"pod seccomp Unconfined", "no Unconfined seccomp profile", func(p *corev1.Pod) {
					podSecurity(p).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
				}},
				{"container seccomp Unconfined", "no Unconfined seccomp profile", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
				}},
				{"container AppArmor Unconfined", "no unconfined AppArmor profile", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
				}},
				{"SELinux type spc-t", "SELinux options limited", func(p *corev1.Pod) {
					podSecurity(p).SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
				}},
				{"SELinux user", "SELinux options limited", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{User: "system_u"}
				}},
				{"unsafe sysctl", "only baseline's safe sysctls", func(p *corev1.Pod) {
					podSecurity(p).Sysctls = []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}
				}},
				{"host path not recursively read-only", "recursively read-only", func(p *corev1.Pod) {
					disabled := corev1.RecursiveReadOnlyDisabled
					for i, m := range p.Spec.Containers[0].VolumeMounts {
						if m.MountPath == "/var/lib/kubelet/pod-resources" {
							p.Spec.Containers[0].VolumeMounts[i].RecursiveReadOnly = &disabled
						}
					}
				}},
				{"writable pod-resources", "read-only", func(p *corev1.Pod) {
					for i, m := range p.Spec.Containers[0].VolumeMounts {
						if m.MountPath == "/var/lib/kubelet/pod-resources" {
							p.Spec.Containers[0].VolumeMounts[i].ReadOnly = false
							p.Spec.Containers[0].VolumeMounts[i].RecursiveReadOnly = nil
						}
					}
				}},
			} {
				pod := agentPod.DeepCopy()
				pod.Name = "probe-" + strings.ReplaceAll(strings.ToLower(probe.name), " ", "-")
				probe.mutate(pod)
				deadline := time.Now().Add(10 * time.Second)
				for {
					err := create(pod)
					if err != nil && strings.Contains(err.Error(), probe.want) {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("a %s pod in the agents' namespace %s: %v, want refused (%s)", probe.name, agentNS, err, probe.want)
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
			if err := create(agentPod); err != nil {
				t.Errorf("the agent's pod under the admission policy: %v", err)
			}
			// `kubectl debug` adds a container to a running pod through the
			// pods/ephemeralcontainers subresource: the policy covers that path too.
			live := agentPod.DeepCopy()
			live.Name = "agent-debug-probe"
			live, err = c.CoreV1().Pods(agentNS).Create(ctx, live, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.CoreV1().Pods(agentNS).Delete(ctx, live.Name, metav1.DeleteOptions{}) }()
			live.Spec.EphemeralContainers = append(live.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name: "debugger", Image: "busybox",
					SecurityContext: &corev1.SecurityContext{Privileged: ptr(true)},
				},
			})
			_, err = c.CoreV1().Pods(agentNS).UpdateEphemeralContainers(ctx, live.Name, live, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil || !strings.Contains(err.Error(), "no privileged container") {
				t.Errorf("a privileged ephemeral container in the agents' namespace %s: %v, want refused (no privileged container)", agentNS, err)
			}
			// `kubectl debug`'s default container keeps the runtime's capabilities (CAP_KILL
			// among them): in the host's PID namespace it could signal any host process.
			live.Spec.EphemeralContainers[len(live.Spec.EphemeralContainers)-1].SecurityContext = nil
			_, err = c.CoreV1().Pods(agentNS).UpdateEphemeralContainers(ctx, live.Name, live, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil || !strings.Contains(err.Error(), "the host PID namespace only for the agent") {
				t.Errorf("a debug container with capabilities in the agent's pod (hostPID) in %s: %v, want refused (the host PID namespace only for the agent)", agentNS, err)
			}

			// Why "privileged": at baseline the same pod is refused for its host mounts.
			baseline := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:   "baseline-probe",
				Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"},
			}}
			if _, err := s.Client.CoreV1().Namespaces().Create(ctx, baseline, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
				t.Fatal(err)
			}
			atBaseline := agentPod.DeepCopy()
			atBaseline.Namespace = baseline.Name
			if err := create(atBaseline); err == nil || !strings.Contains(err.Error(), "hostPath") {
				t.Errorf("the agent's pod at baseline: %v, want refused for its hostPath volumes", err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// podSecurity is the pod's security context, created if it has none.
func podSecurity(p *corev1.Pod) *corev1.PodSecurityContext {
	if p.Spec.SecurityContext == nil {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	return p.Spec.SecurityContext
}
