package deploytest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// otelCollector mirrors the fields of opentelemetry.io/v1beta1 OpenTelemetryCollector that
// deploy/kubernetes/operator uses (names as in the operator's apis/v1beta1), so that a
// misspelt or misplaced field fails strict decoding. The operator module itself would pull
// controller-runtime and more into this test module for a handful of structs.
type otelCollector struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Mode                    string                      `json:"mode"`
		Image                   string                      `json:"image"`
		ImagePullPolicy         corev1.PullPolicy           `json:"imagePullPolicy"`
		UpgradeStrategy         string                      `json:"upgradeStrategy"`
		ServiceAccount          string                      `json:"serviceAccount"`
		PriorityClassName       string                      `json:"priorityClassName"`
		HostPID                 bool                        `json:"hostPID"`
		DaemonSetUpdateStrategy map[string]any              `json:"daemonSetUpdateStrategy"`
		Affinity                *corev1.Affinity            `json:"affinity"`
		Tolerations             []corev1.Toleration         `json:"tolerations"`
		PodSecurityContext      *corev1.PodSecurityContext  `json:"podSecurityContext"`
		SecurityContext         *corev1.SecurityContext     `json:"securityContext"`
		Resources               corev1.ResourceRequirements `json:"resources"`
		Env                     []corev1.EnvVar             `json:"env"`
		VolumeMounts            []corev1.VolumeMount        `json:"volumeMounts"`
		Volumes                 []corev1.Volume             `json:"volumes"`
		LivenessProbe           *operatorProbe              `json:"livenessProbe"`
		ReadinessProbe          *operatorProbe              `json:"readinessProbe"`
		Config                  map[string]any              `json:"config"`
		// Kubernetes' default (30 s) is what the agent's remote-write timeout is sized for; stated
		// so that a change to one is seen next to the other.
		TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
	} `json:"spec"`
}

type operatorProbe struct {
	InitialDelaySeconds *int32 `json:"initialDelaySeconds,omitempty"`
	TimeoutSeconds      *int32 `json:"timeoutSeconds,omitempty"`
	PeriodSeconds       *int32 `json:"periodSeconds,omitempty"`
	SuccessThreshold    *int32 `json:"successThreshold,omitempty"`
	FailureThreshold    *int32 `json:"failureThreshold,omitempty"`
}

func TestOperatorCollector(t *testing.T) {
	raw := readRepoFile(t, "deploy/kubernetes/operator/otelcol-gpu.yaml")
	o := decodeManifests(t, raw)
	checkRBAC(t, o, "otelcol-gpu-agent", "otelcol-gpu-agent", "otelcol-gpu")
	crs := o.unstructured["OpenTelemetryCollector"]
	if len(crs) != 1 {
		t.Fatalf("want one OpenTelemetryCollector, got %d", len(crs))
	}
	doc, err := yaml.Marshal(crs[0])
	if err != nil {
		t.Fatal(err)
	}
	var cr otelCollector
	if err := yaml.UnmarshalStrict(doc, &cr); err != nil {
		t.Fatalf("OpenTelemetryCollector does not decode strictly: %v", err)
	}
	if cr.APIVersion != "opentelemetry.io/v1beta1" || cr.Spec.Mode != "daemonset" {
		t.Errorf("apiVersion/mode = %s/%s", cr.APIVersion, cr.Spec.Mode)
	}
	if cr.Spec.ServiceAccount != "otelcol-gpu-agent" {
		t.Errorf("serviceAccount = %q: without it the operator creates its own account and role", cr.Spec.ServiceAccount)
	}
	if cr.Spec.UpgradeStrategy != "none" {
		t.Error("upgradeStrategy must be none: the operator must not migrate a non-contrib image's config")
	}

	// The pods the operator creates carry its labels, not the resource's selector
	// (manifestutils.Labels: managed-by opentelemetry-operator, instance
	// <namespace>.<name>): the NetworkPolicy selects them by those, and lets only
	// namespace monitoring reach the self-metrics.
	np := o.netpols["otelcol-gpu-agent"]
	if np == nil {
		t.Fatal("no NetworkPolicy for the operator's agent pods")
	}
	wantSel := map[string]string{
		"app.kubernetes.io/managed-by": "opentelemetry-operator",
		"app.kubernetes.io/instance":   cr.Metadata.Namespace + "." + cr.Metadata.Name,
	}
	if !reflect.DeepEqual(np.Spec.PodSelector.MatchLabels, wantSel) || np.Namespace != cr.Metadata.Namespace {
		t.Errorf("NetworkPolicy selects %v in %s, want %v in %s", np.Spec.PodSelector.MatchLabels, np.Namespace, wantSel, cr.Metadata.Namespace)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 8888 ||
		len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
		t.Errorf("NetworkPolicy ingress = %+v, want 8888 from namespace monitoring only", np.Spec.Ingress)
	}

	// The config is configs/agent.yaml.
	var agent map[string]any
	if err := yaml.Unmarshal(readRepoFile(t, "configs/agent.yaml"), &agent); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cr.Spec.Config, agent) {
		t.Error("spec.config differs from configs/agent.yaml: run deploy/sync-configs.sh")
	}

	// The pod the operator builds carries the same settings as the kustomize base.
	base := kustomizeBuild(t, "base", "").daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
	bc := base.Containers[0]
	same := func(what string, a, b any) {
		t.Helper()
		if !reflect.DeepEqual(a, b) {
			t.Errorf("operator CR and kustomize base differ in %s:\n operator: %+v\n base:     %+v", what, a, b)
		}
	}
	same("env", cr.Spec.Env, bc.Env)
	same("pod securityContext", cr.Spec.PodSecurityContext, base.SecurityContext)
	same("container securityContext", cr.Spec.SecurityContext, bc.SecurityContext)
	same("affinity", cr.Spec.Affinity, base.Affinity)
	same("tolerations", cr.Spec.Tolerations, base.Tolerations)
	same("resources", cr.Spec.Resources, bc.Resources)
	same("priorityClassName", cr.Spec.PriorityClassName, base.PriorityClassName)
	same("hostPID", cr.Spec.HostPID, base.HostPID)
	same("terminationGracePeriodSeconds", cr.Spec.TerminationGracePeriodSeconds, base.TerminationGracePeriodSeconds)
	var baseMounts []corev1.VolumeMount
	for _, m := range bc.VolumeMounts {
		if m.Name != "config" { // the operator mounts the config itself
			baseMounts = append(baseMounts, m)
		}
	}
	same("volume mounts", cr.Spec.VolumeMounts, baseMounts)
	var baseVolumes []corev1.Volume
	for _, v := range base.Volumes {
		if v.Name != "config" {
			baseVolumes = append(baseVolumes, v)
		}
	}
	same("volumes", cr.Spec.Volumes, baseVolumes)

	// As the operator will run it: the pod as built from the CR, the config validated.
	spec := corev1.PodSpec{
		ServiceAccountName: cr.Spec.ServiceAccount,
		PriorityClassName:  cr.Spec.PriorityClassName,
		HostPID:            cr.Spec.HostPID,
		Affinity:           cr.Spec.Affinity,
		Tolerations:        cr.Spec.Tolerations,
		SecurityContext:    cr.Spec.PodSecurityContext,
		Volumes:            cr.Spec.Volumes,
		Containers: []corev1.Container{{
			Name:            "otc-container",
			Env:             cr.Spec.Env,
			VolumeMounts:    cr.Spec.VolumeMounts,
			SecurityContext: cr.Spec.SecurityContext,
			Resources:       cr.Spec.Resources,
			// Generated by the operator from the health_check extension (default port).
			LivenessProbe:  bc.LivenessProbe,
			ReadinessProbe: bc.ReadinessProbe,
		}},
	}
	operatorAgent := defaultAgent
	operatorAgent.entrypoint = true
	checkAgentPod(t, spec, operatorAgent)

	cfg, err := yaml.Marshal(cr.Spec.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "collector.yaml")
	if err := os.WriteFile(f, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range cr.Spec.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		} else {
			env[e.Name] = "gpu-node-1"
		}
	}
	// The OpenTelemetryCollector resource cannot set a command: the operator runs the
	// image's entrypoint, the full build.
	validateConfigs(t, fullBuild, env, f)
}
