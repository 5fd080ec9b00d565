// Package deploytest checks everything under deploy/: it renders the kustomize trees and
// the Helm chart, decodes every object strictly into its Kubernetes type, asserts the
// security and scheduling properties the agent depends on, runs the collector's own
// `validate` on every config those manifests would start it with, applies every rendered
// form to a real kube-apiserver (server-side, strict validation) and asks that API server
// what the agent's and the gateway's service accounts may do (apiserver_test.go).
//
// Run: cd deploy/test && CGO_ENABLED=0 go test ./...
// The collector must be built first (make build at the repository root), and etcd and
// kube-apiserver (make deps).
package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository root, two levels above deploy/test.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func readRepoFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// objects holds a rendered set of manifests, decoded into their types.
type objects struct {
	all          []object
	daemonSets   map[string]*appsv1.DaemonSet
	deployments  map[string]*appsv1.Deployment
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	services     map[string]*corev1.Service
	accounts     map[string]*corev1.ServiceAccount
	namespaces   map[string]*corev1.Namespace
	clusterRoles map[string]*rbacv1.ClusterRole
	bindings     map[string]*rbacv1.ClusterRoleBinding
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	netpols      map[string]*networkingv1.NetworkPolicy
	// unstructured holds kinds without a Go type here (CRs), by kind.
	unstructured map[string][]map[string]any
}

type object struct {
	kind, name string
	raw        []byte
}

// decodeManifests splits a multi-document YAML stream and decodes each document strictly
// (an unknown or misspelt field is an error) into its Kubernetes type.
func decodeManifests(t testing.TB, streams ...[]byte) *objects {
	t.Helper()
	o := &objects{
		daemonSets:   map[string]*appsv1.DaemonSet{},
		deployments:  map[string]*appsv1.Deployment{},
		configMaps:   map[string]*corev1.ConfigMap{},
		secrets:      map[string]*corev1.Secret{},
		services:     map[string]*corev1.Service{},
		accounts:     map[string]*corev1.ServiceAccount{},
		namespaces:   map[string]*corev1.Namespace{},
		clusterRoles: map[string]*rbacv1.ClusterRole{},
		bindings:     map[string]*rbacv1.ClusterRoleBinding{},
		hpas:         map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		pdbs:         map[string]*policyv1.PodDisruptionBudget{},
		netpols:      map[string]*networkingv1.NetworkPolicy{},
		unstructured: map[string][]map[string]any{},
	}
	for _, stream := range streams {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("splitting manifests: %v", err)
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("decoding %q: %v", doc, err)
			}
			if head.Kind == "" {
				continue // an empty document (comments only)
			}
			o.all = append(o.all, object{kind: head.Kind, name: head.Metadata.Name, raw: doc})
			strict := func(into any) {
				t.Helper()
				if err := yaml.UnmarshalStrict(doc, into); err != nil {
					t.Fatalf("%s %s does not decode strictly into %T: %v", head.Kind, head.Metadata.Name, into, err)
				}
			}
			switch head.Kind {
			case "DaemonSet":
				v := &appsv1.DaemonSet{}
				strict(v)
				o.daemonSets[v.Name] = v
			case "Deployment":
				v := &appsv1.Deployment{}
				strict(v)
				o.deployments[v.Name] = v
			case "ConfigMap":
				v := &corev1.ConfigMap{}
				strict(v)
				o.configMaps[v.Name] = v
			case "Secret":
				v := &corev1.Secret{}
				strict(v)
				o.secrets[v.Name] = v
			case "Service":
				v := &corev1.Service{}
				strict(v)
				o.services[v.Name] = v
			case "ServiceAccount":
				v := &corev1.ServiceAccount{}
				strict(v)
				o.accounts[v.Name] = v
			case "Namespace":
				v := &corev1.Namespace{}
				strict(v)
				o.namespaces[v.Name] = v
			case "ClusterRole":
				v := &rbacv1.ClusterRole{}
				strict(v)
				o.clusterRoles[v.Name] = v
			case "ClusterRoleBinding":
				v := &rbacv1.ClusterRoleBinding{}
				strict(v)
				o.bindings[v.Name] = v
			case "HorizontalPodAutoscaler":
				v := &autoscalingv2.HorizontalPodAutoscaler{}
				strict(v)
				o.hpas[v.Name] = v
			case "PodDisruptionBudget":
				v := &policyv1.PodDisruptionBudget{}
				strict(v)
				o.pdbs[v.Name] = v
			case "NetworkPolicy":
				v := &networkingv1.NetworkPolicy{}
				strict(v)
				o.netpols[v.Name] = v
			default:
				var m map[string]any
				if err := yaml.Unmarshal(doc, &m); err != nil {
					t.Fatal(err)
				}
				o.unstructured[head.Kind] = append(o.unstructured[head.Kind], m)
			}
		}
	}
	return o
}

func (o *objects) daemonSet(t testing.TB, name string) *appsv1.DaemonSet {
	t.Helper()
	ds, ok := o.daemonSets[name]
	if !ok {
		t.Fatalf("no DaemonSet %q in %v", name, o.names())
	}
	return ds
}

func (o *objects) deployment(t testing.TB, name string) *appsv1.Deployment {
	t.Helper()
	d, ok := o.deployments[name]
	if !ok {
		t.Fatalf("no Deployment %q in %v", name, o.names())
	}
	return d
}

func (o *objects) names() []string {
	var n []string
	for _, obj := range o.all {
		n = append(n, obj.kind+"/"+obj.name)
	}
	sort.Strings(n)
	return n
}

// --- the collector binary ---

var (
	componentsOnce sync.Once
	componentsOut  []byte
	componentsErr  error
)

// The image's two builds, by their path in it: the full collector (the entrypoint: the
// gateway, the dcgm-exporter compatibility overlays, the OpenTelemetry Operator) and the
// node agent's lean build, which the shipped DaemonSets and the systemd unit run.
const (
	fullBuild  = "/otelcol-gpu"
	agentBuild = "/otelcol-gpu-agent"
)

// collectorBinary is a build's ocb-built binary (fullBuild or agentBuild); the tests
// cannot run without it.
func collectorBinary(t testing.TB, build string) string {
	t.Helper()
	rel, ok := map[string]string{
		fullBuild:  filepath.Join("distribution", "otelcol-gpu"),
		agentBuild: filepath.Join("distribution", "agent", "otelcol-gpu-agent"),
	}[build]
	if !ok {
		t.Fatalf("no build %q in the image (%s or %s)", build, fullBuild, agentBuild)
	}
	bin := filepath.Join(repoRoot(t), rel)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the collector is not built (%v): run `make build` at the repository root, "+
			"then rerun these tests; they run `otelcol-gpu validate` on every rendered config", err)
	}
	return bin
}

// validateConfigs runs `validate` of a build (fullBuild or agentBuild) on the given config
// files, in order, with exactly env as the environment.
func validateConfigs(t testing.TB, build string, env map[string]string, files ...string) {
	t.Helper()
	args := []string{"validate"}
	for _, f := range files {
		args = append(args, "--config="+f)
	}
	cmd := exec.Command(collectorBinary(t, build), args...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s\nenvironment: %v", build, strings.Join(args, " "), err, out, cmd.Env)
	}
	checkExtensionsStarted(t, files...)
}

// validatePod writes the config files a pod's first container would read (its --config
// arguments, resolved through the ConfigMap volumes it mounts) into a temporary directory
// and validates them with the container's environment. Values from the downward API and
// from Secrets are replaced by placeholders.
func validatePod(t testing.TB, o *objects, spec corev1.PodSpec, configMapNames ...map[string]string) {
	t.Helper()
	// Credentials are readable by the pod's user and group only (mode 0440, group fsGroup),
	// not by every UID in the container (the kubelet's default, 0644).
	// A projected ServiceAccount token (the agents' identity towards the gateway) likewise.
	for _, v := range spec.Volumes {
		if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440) {
			t.Errorf("Secret volume %s (%s): defaultMode %v, want 0440", v.Name, v.Secret.SecretName, v.Secret.DefaultMode)
		}
		if projectsCredential(v) && (v.Projected.DefaultMode == nil || *v.Projected.DefaultMode != 0o440) {
			t.Errorf("projected volume %s: defaultMode %v, want 0440", v.Name, deref(v.Projected.DefaultMode))
		}
	}
	// (The kubelet gives a projected ServiceAccount token to the pod's runAsUser when every
	// container runs as that UID, fsGroup or not.)
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser != 0 {
		for _, v := range spec.Volumes {
			if (v.Secret != nil || projectsSecret(v)) && sc.FSGroup == nil {
				t.Errorf("volume %s: a pod of UID %d reads a 0440 Secret only through fsGroup, which is %v", v.Name, *sc.RunAsUser, sc.FSGroup)
			}
		}
	}
	files, env := podConfigs(t, o, spec)
	validateConfigs(t, podBuild(t, spec.Containers[0]), env, files...)
}

// projectsCredential: a projected volume with a ServiceAccount token or a Secret in it.
func projectsCredential(v corev1.Volume) bool {
	return projectsSecret(v) || (v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool {
		return s.ServiceAccountToken != nil
	}))
}

// projectsSecret: a projected volume with a Secret in it.
func projectsSecret(v corev1.Volume) bool {
	return v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool {
		return s.Secret != nil
	})
}

// podBuild is the build a container runs: the image's entrypoint (the full build) unless
// its command names the agent's.
func podBuild(t testing.TB, c corev1.Container) string {
	t.Helper()
	switch {
	case len(c.Command) == 0:
		return fullBuild
	case len(c.Command) == 1 && (c.Command[0] == agentBuild || c.Command[0] == fullBuild):
		return c.Command[0]
	}
	t.Fatalf("container %s runs %q: neither of the image's builds (%s, %s)", c.Name, c.Command, fullBuild, agentBuild)
	return ""
}

// podConfigs writes the config files a pod's first container would read into a temporary
// directory and returns them in order, with the container's environment (placeholders for
// the downward API and Secrets).
func podConfigs(t testing.TB, o *objects, spec corev1.PodSpec) (files []string, env map[string]string) {
	t.Helper()
	c := spec.Containers[0]
	// Volume name → ConfigMap.
	cmByVolume := map[string]*corev1.ConfigMap{}
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		// ConfigMaps the user provides (a CA bundle) are not rendered; only the ones
		// holding a --config file must be.
		if cm, ok := o.configMaps[v.ConfigMap.Name]; ok {
			cmByVolume[v.Name] = cm
		}
	}
	dir := t.TempDir()
	for _, a := range c.Args {
		path, ok := strings.CutPrefix(a, "--config=")
		if !ok {
			t.Fatalf("unexpected argument %q", a)
		}
		found := false
		for _, m := range c.VolumeMounts {
			cm, isCM := cmByVolume[m.Name]
			rel, under := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
			if !isCM || !under {
				continue
			}
			data, ok := cm.Data[rel]
			if !ok {
				t.Fatalf("--config=%s: ConfigMap %s has no key %s (keys %v)", path, cm.Name, rel, keys(cm.Data))
			}
			f := filepath.Join(dir, fmt.Sprintf("%02d-%s", len(files), rel))
			if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			found = true
		}
		if !found {
			t.Fatalf("--config=%s is not in a mounted ConfigMap", path)
		}
	}
	env = map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = "gpu-node-1"
		default:
			env[e.Name] = "placeholder-secret"
		}
	}
	return files, env
}

func keys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func envMap(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// checkWALOnStateVolume: the WAL directory the overlay writes to is on a writable emptyDir
// mounted at /var/lib/otelcol-gpu, the pod's state volume.
func checkWALOnStateVolume(t testing.TB, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	if dir := envMap(c)["OTELCOL_GPU_WAL_DIR"].Value; !strings.HasPrefix(dir, "/var/lib/otelcol-gpu/") {
		t.Errorf("OTELCOL_GPU_WAL_DIR = %q is not on the state volume /var/lib/otelcol-gpu", dir)
	}
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil && m.MountPath == "/var/lib/otelcol-gpu" && !m.ReadOnly {
				return
			}
		}
	}
	t.Error("no writable emptyDir at /var/lib/otelcol-gpu for the WAL")
}
