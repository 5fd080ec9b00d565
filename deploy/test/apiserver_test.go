package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"
)

// renderedSet is one way of deploying: what `kubectl apply -k`, `helm install` or the
// operator's example would send to the API server.
type renderedSet struct {
	name string
	o    *objects
}

// agentComponents are the kustomize components that modify the agent DaemonSet of base;
// gatewayComponents those that modify the gateway tier (applied over overlays/gateway-mode;
// the per-agent identity components patch its agents too).
var (
	agentComponents   = []string{"non-root", "node-pool", "remote-write-auth-basic", "remote-write-auth-bearer", "remote-write-tls", "remote-write-wal", "runtime-class-nvidia"}
	gatewayComponents = []string{"remote-write-auth-bearer", "remote-write-tls", "remote-write-wal", "gateway-agent-identity", "gateway-agent-identity-remote-write-bearer"}
)

// renderedSets renders every shipped form: the kustomize base with each component, every
// directory under deploy/kubernetes, the Helm chart with its defaults and every values file,
// the operator's resources and the autoscaling example.
func renderedSets(t *testing.T) []renderedSet {
	t.Helper()
	overlay := func(base string, components ...string) string {
		s := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + base + "\ncomponents:\n"
		for _, c := range components {
			s += "  - ../../components/" + c + "\n"
		}
		return s
	}
	var sets []renderedSet
	for _, dir := range []string{"base", "gateway", "agent-to-gateway", "overlays/gateway-mode", "kube-prometheus-stack"} {
		sets = append(sets, renderedSet{"kustomize " + dir, kustomizeBuild(t, dir, "")})
	}
	for _, c := range agentComponents {
		sets = append(sets, renderedSet{"kustomize base + " + c, kustomizeBuild(t, "overlays/apply-"+c, overlay("../../base", c))})
	}
	for _, c := range gatewayComponents {
		sets = append(sets, renderedSet{"kustomize gateway-mode + " + c, kustomizeBuild(t, "overlays/apply-gw-"+c, overlay("../gateway-mode", c))})
	}
	// The node pool patches the agents, which gateway-mode runs too.
	sets = append(sets, renderedSet{"kustomize gateway-mode + node-pool", kustomizeBuild(t, "overlays/apply-gw-node-pool", overlay("../gateway-mode", "node-pool"))})
	for _, file := range valuesFiles(t) {
		name := "helm defaults"
		if file != "" {
			name = "helm -f " + filepath.Base(file)
		}
		sets = append(sets, renderedSet{name, helmTemplate(t, file)})
	}
	// Per-agent identity with a public issuer (ci/gateway-identity-values.yaml has the API
	// server's, with anonymous discovery).
	sets = append(sets, renderedSet{"helm gateway.agentIdentity, public issuer", helmTemplateValues(t, identityValues(nil, map[string]any{
		"issuerURL": "https://oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE", "issuerCA": "system",
	}))})
	sets = append(sets,
		renderedSet{"operator", decodeManifests(t, readRepoFile(t, "deploy/kubernetes/operator/otelcol-gpu.yaml"))},
		renderedSet{"autoscaling example", decodeManifests(t, readRepoFile(t, "deploy/autoscaling/hpa-example.yaml"))},
	)
	return sets
}

// Every component directory is in one of the lists above, so a new one is applied too.
func TestEveryComponentIsApplied(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "deploy", "kubernetes", "components"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(agentComponents, e.Name()) && !slices.Contains(gatewayComponents, e.Name()) {
			t.Errorf("component %s is in neither agentComponents nor gatewayComponents (apiserver_test.go)", e.Name())
		}
	}
}

// The manifests as a real kube-apiserver sees them: each set is applied server-side with
// strict field validation (an unknown, misplaced or mistyped field is refused, as
// `kubectl apply --server-side` would refuse it), after the CRDs it needs.
func TestManifestsAcceptedByAPIServer(t *testing.T) {
	s := kubeapi.Start(t)
	a := newApplier(t, s)
	a.installCRDs(t, requiredCRDs(t)...)
	for _, set := range renderedSets(t) {
		t.Run(set.name, func(t *testing.T) {
			// Each form is installed on its own, as a user installs one of them: the next
			// set's objects of the same names (with other immutable selectors) must not
			// meet these.
			applied := a.apply(t, set.o)
			if len(applied) == 0 {
				t.Fatal("the set rendered no objects")
			}
			a.remove(t, applied)
		})
	}
}

// applier applies manifests with server-side apply through the dynamic client.
type applier struct {
	s      *kubeapi.Server
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t testing.TB, s *kubeapi.Server) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(s.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{
		s:      s,
		dyn:    dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(s.Client.Discovery())),
	}
}

// applied is an object the API server accepted.
type applied struct {
	resource  dynamic.ResourceInterface
	kind      string
	name      string
	namespace string
}

// apply applies every object of o (namespaces first) and returns those it applied.
// Namespaced objects without a namespace go to the Helm release's namespace, as `helm
// install -n` puts them; a namespace the set does not create is created first.
func (a *applier) apply(t *testing.T, o *objects) []applied {
	t.Helper()
	var done []applied
	ctx := context.Background()
	docs := slices.Clone(o.all)
	slices.SortStableFunc(docs, func(x, y object) int {
		return boolOrder(x.kind != "Namespace") - boolOrder(y.kind != "Namespace")
	})
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		js, err := yaml.YAMLToJSON(d.raw)
		if err != nil {
			t.Fatalf("%s %s: %v", d.kind, d.name, err)
		}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s %s: %v", d.kind, d.name, err)
		}
		gvk := u.GroupVersionKind()
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: the API server serves no %s: %v", d.kind, d.name, gvk, err)
			continue
		}
		var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(releaseNamespace)
			}
			a.ensureNamespace(t, u.GetNamespace())
			ri = a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		body, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		force := true
		_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
			FieldManager:    "deploy-test",
			Force:           &force,
			FieldValidation: metav1.FieldValidationStrict,
		})
		if err != nil {
			t.Errorf("the API server refuses %s %s/%s: %v", d.kind, u.GetNamespace(), u.GetName(), err)
			continue
		}
		done = append(done, applied{ri, d.kind, u.GetName(), u.GetNamespace()})
	}
	return done
}

// remove deletes what apply applied, but namespaces: without a controller manager a
// deleted namespace stays Terminating and no set could use it again.
func (a *applier) remove(t *testing.T, objs []applied) {
	t.Helper()
	for _, o := range objs {
		if o.kind == "Namespace" {
			continue
		}
		if err := o.resource.Delete(context.Background(), o.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s/%s: %v", o.kind, o.namespace, o.name, err)
		}
	}
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (a *applier) ensureNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := a.s.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("namespace %s: %v", name, err)
	}
}

// installCRDs creates CustomResourceDefinitions and waits until the API server serves them.
func (a *applier) installCRDs(t testing.TB, files ...string) {
	t.Helper()
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// The operator's CRDs name a conversion webhook that does not run here; each
		// version is served as stored, which is all an apply of one version needs.
		crd.Spec.Conversion = nil
		body, err := json.Marshal(struct {
			metav1.TypeMeta `json:",inline"`
			*apiextensionsv1.CustomResourceDefinition
		}{metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}, &crd})
		if err != nil {
			t.Fatal(err)
		}
		force := true
		if _, err := a.dyn.Resource(gvr).Patch(ctx, crd.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "deploy-test", Force: &force}); err != nil {
			t.Fatalf("CRD %s (%s): %v", crd.Name, f, err)
		}
		crds = append(crds, crd)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, crd := range crds {
		for {
			u, err := a.dyn.Resource(gvr).Get(ctx, crd.Name, metav1.GetOptions{})
			if err == nil && crdEstablished(u) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established within 60s (last error %v)", crd.Name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Established is set before discovery lists the new resource: applying at once
		// can meet "no matches for kind" (seen in CI). Wait until discovery serves
		// every served version.
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := crd.Spec.Group + "/" + v.Name
			for {
				err := discoveryLists(a.s, gv, crd.Spec.Names.Plural)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("CRD %s: discovery does not list it within 60s: %v", crd.Name, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	a.mapper.Reset()
}

// discoveryLists says why the API server's discovery does not list resource in
// groupVersion, or nil when it does.
func discoveryLists(s *kubeapi.Server, groupVersion, resource string) error {
	list, err := s.Client.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return err
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return nil
		}
	}
	return fmt.Errorf("%s lists no %s", groupVersion, resource)
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// requiredCRDs are the CRDs of the custom resources the manifests use, taken from the
// operators' Go modules at the versions pinned in versions.mk: PrometheusRule,
// ServiceMonitor and PodMonitor (kube-prometheus-stack), OpenTelemetryCollector (operator).
func requiredCRDs(t testing.TB) []string {
	t.Helper()
	promOp := moduleDir(t, "github.com/prometheus-operator/prometheus-operator", "v"+pinnedVersion(t, "PROMETHEUS_OPERATOR_VERSION"))
	otelOp := moduleDir(t, "github.com/open-telemetry/opentelemetry-operator", "v"+pinnedVersion(t, "OTEL_OPERATOR_VERSION"))
	return []string{
		filepath.Join(promOp, "example", "prometheus-operator-crd", "monitoring.coreos.com_prometheusrules.yaml"),
		filepath.Join(promOp, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(promOp, "example", "prometheus-operator-crd", "monitoring.coreos.com_podmonitors.yaml"),
		filepath.Join(otelOp, "config", "crd", "bases", "opentelemetry.io_opentelemetrycollectors.yaml"),
	}
}

// pinnedVersion reads NAME := version from versions.mk.
func pinnedVersion(t testing.TB, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(\S+)`).FindSubmatch(readRepoFile(t, "versions.mk"))
	if m == nil {
		t.Fatalf("versions.mk pins no %s", name)
	}
	return string(m[1])
}

// moduleDir downloads a module version into the module cache (outside this module, so
// go.mod is untouched; the checksum database verifies it) and returns its directory.
func moduleDir(t testing.TB, path, version string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	_ = json.Unmarshal(out, &info)
	if err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s", path, version, err, info.Error)
	}
	return info.Dir
}

// accessTable is every verb on every resource the API server serves (subresources
// included), as `kubectl api-resources -o wide` lists them.
type access struct{ group, resource, subresource, verb string }

func (x access) String() string {
	r := x.resource
	if x.subresource != "" {
		r += "/" + x.subresource
	}
	if x.group != "" {
		r += "." + x.group
	}
	return x.verb + " " + r
}

func accessTable(t testing.TB, s *kubeapi.Server) []access {
	t.Helper()
	lists, err := s.Client.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var table []access
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			res, sub, _ := strings.Cut(r.Name, "/")
			for _, v := range r.Verbs {
				table = append(table, access{gv.Group, res, sub, v})
			}
		}
	}
	if len(table) < 100 {
		t.Fatalf("discovery lists only %d verb/resource pairs", len(table))
	}
	return table
}

// allowed asks the API server, as the holder of token, which entries of table it may do
// (SelfSubjectAccessReview, cluster-wide and in namespace).
func allowed(t testing.TB, s *kubeapi.Server, token, namespace string, table []access) map[string]bool {
	t.Helper()
	c, err := kubernetesClient(s.ConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, x := range table {
		for _, ns := range []string{"", namespace} {
			ok, err := selfAccess(c, x, ns)
			if err != nil {
				t.Fatalf("SelfSubjectAccessReview %s: %v", x, err)
			}
			if ok {
				out[x.String()+inNamespace(ns)] = true
			}
		}
	}
	return out
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in " + ns
}

// TestLeastPrivilege: the agent's and the gateway's ServiceAccounts, as each shipped form
// binds them, may do exactly what they need and nothing else, as the API server's RBAC
// authorizer answers it for every verb on every resource it serves. What a ServiceAccount
// may do with no binding at all (review its own access, discovery) is the baseline. Nodes
// may be read only where the form turns the node pool on.
func TestLeastPrivilege(t *testing.T) {
	agentNeeds := []string{
		"get pods", "list pods", "watch pods",
		"get resourceslices.resource.k8s.io", "list resourceslices.resource.k8s.io", "watch resourceslices.resource.k8s.io",
	}
	// With the node pool on (components/node-pool, agent.nodePoolLabel): the agent's Node
	// too, which RBAC can grant only as every Node.
	nodePoolNeeds := append(slices.Clone(agentNeeds), "get nodes", "list nodes", "watch nodes")
	for _, tc := range []struct {
		name    string
		o       func(t *testing.T) *objects
		agentSA string // "" when the form deploys no agent
		gwSA    string // "" when the form deploys no gateway
		// anonymousDiscovery: the form lets unauthenticated clients read the
		// service-account issuer's discovery document and keys (and nothing else).
		anonymousDiscovery bool
		// nodePool: the form turns the node pool on.
		nodePool bool
	}{
		{"kustomize base", func(t *testing.T) *objects { return kustomizeBuild(t, "base", "") }, "otelcol-gpu-agent", "", false, false},
		{"kustomize gateway-mode", func(t *testing.T) *objects { return kustomizeBuild(t, "overlays/gateway-mode", "") }, "otelcol-gpu-agent", "otelcol-gpu-gateway", false, false},
		{"helm gateway-values", func(t *testing.T) *objects {
			return helmTemplate(t, filepath.Join(chartDir(t), "ci", "gateway-values.yaml"))
		}, "otelcol-gpu-agent", "otelcol-gpu-gateway", false, false},
		{"operator", func(t *testing.T) *objects {
			return decodeManifests(t, readRepoFile(t, "deploy/kubernetes/operator/otelcol-gpu.yaml"))
		}, "otelcol-gpu-agent", "", false, false},
		{"helm gateway-identity-values", func(t *testing.T) *objects {
			return helmTemplate(t, filepath.Join(chartDir(t), "ci", "gateway-identity-values.yaml"))
		}, "otelcol-gpu-agent", "otelcol-gpu-gateway", true, false},
		{"kustomize base + node-pool", func(t *testing.T) *objects {
			return kustomizeBuild(t, "overlays/lp-node-pool", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"+
				"resources:\n  - ../../base\ncomponents:\n  - ../../components/node-pool\n")
		}, "otelcol-gpu-agent", "", false, true},
		{"helm agent.nodePoolLabel", func(t *testing.T) *objects {
			return helmTemplateValues(t, map[string]any{"agent": map[string]any{"nodePoolLabel": "karpenter.sh/nodepool"}})
		}, "otelcol-gpu-agent", "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A fresh API server: no binding of another form may grant anything here.
			s := kubeapi.Start(t)
			a := newApplier(t, s)
			if strings.HasPrefix(tc.name, "operator") {
				a.installCRDs(t, requiredCRDs(t)[3])
			}
			a.apply(t, tc.o(t))
			table := accessTable(t, s)
			// What an account with no bindings may do in namespace ns.
			baselineIn := func(ns string) map[string]bool {
				s.EnsureServiceAccount(t, ns, "no-bindings")
				return allowed(t, s, s.Token(t, ns, "no-bindings"), ns, table)
			}
			baseline := baselineIn("otelcol-gpu")

			check := func(sa, ns string, needs []string) {
				baseline := baselineIn(ns)
				got := allowed(t, s, s.Token(t, ns, sa), ns, table)
				var extra []string
				for k := range got {
					if !baseline[k] {
						extra = append(extra, k)
					}
				}
				var want []string
				for _, n := range needs {
					want = append(want, n, n+" in "+ns)
				}
				slices.Sort(extra)
				slices.Sort(want)
				if !slices.Equal(extra, want) {
					t.Errorf("ServiceAccount %s may do, beyond what any account may:\n  %s\nwant exactly:\n  %s",
						sa, strings.Join(extra, "\n  "), strings.Join(want, "\n  "))
				}
				for _, deny := range []string{"get secrets", "list secrets", "watch secrets", "get secrets in " + ns, "list secrets in " + ns} {
					if got[deny] {
						t.Errorf("ServiceAccount %s may %s", sa, deny)
					}
				}
				for k := range got {
					verb, _, _ := strings.Cut(k, " ")
					if !baseline[k] && !slices.Contains([]string{"get", "list", "watch"}, verb) {
						t.Errorf("ServiceAccount %s may write: %s", sa, k)
					}
				}
			}
			if tc.agentSA != "" {
				needs := agentNeeds
				if tc.nodePool {
					needs = nodePoolNeeds
				}
				check(tc.agentSA, "otelcol-gpu", needs)
			}
			if tc.gwSA != "" {
				// The gateway has a namespace of its own (Pod Security "restricted").
				check(tc.gwSA, "otelcol-gpu-gateway", nil)
			}
			checkAnonymousAccess(t, s, table, tc.anonymousDiscovery)
			// The baseline itself writes nothing but its own access reviews.
			for k := range baseline {
				if verb, _, _ := strings.Cut(k, " "); verb != "get" && verb != "list" && verb != "watch" &&
					!strings.Contains(k, "selfsubject") {
					t.Errorf("an account without bindings may %s: the test's API server is not locked down", k)
				}
			}
			t.Logf("%d verb/resource pairs reviewed for each account", len(table))
		})
	}
}

// checkAnonymousAccess: an unauthenticated client may do nothing with any resource, and of
// the non-resource paths read the service-account issuer's discovery document and keys
// only where the form binds system:service-account-issuer-discovery to it
// (gateway.agentIdentity.allowAnonymousDiscovery), which the gateway then fetches for real.
func checkAnonymousAccess(t *testing.T, s *kubeapi.Server, table []access, discovery bool) {
	t.Helper()
	ctx := context.Background()
	review := func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		spec.User, spec.Groups = "system:anonymous", []string{"system:unauthenticated"}
		r, err := s.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		return r.Status.Allowed
	}
	for _, x := range table {
		for _, ns := range []string{"", "otelcol-gpu", "otelcol-gpu-gateway"} {
			if review(authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: x.verb, Group: x.group, Resource: x.resource, Subresource: x.subresource,
			}}) {
				t.Errorf("an unauthenticated client may %s%s", x, inNamespace(ns))
			}
		}
	}
	for _, p := range []string{"/.well-known/openid-configuration", "/openid/v1/jwks"} {
		if got := review(authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: p, Verb: "get"}}); got != discovery {
			t.Errorf("an unauthenticated client may GET %s: %v, want %v", p, got, discovery)
		}
	}
	for _, p := range []string{"/api", "/apis", "/metrics", "/logs", "/openapi/v2", "/debug/pprof"} {
		if review(authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: p, Verb: "get"}}) {
			t.Errorf("an unauthenticated client may GET %s", p)
		}
	}
	// What the gateway does: fetch the discovery document with no credentials.
	anon := &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData}, Timeout: 30 * time.Second}
	c, err := kubernetesClient(anon)
	if err != nil {
		t.Fatal(err)
	}
	body, err := c.Discovery().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	switch {
	case discovery && err != nil:
		t.Errorf("the issuer's discovery document without credentials: %v", err)
	case discovery && !strings.Contains(string(body), `"issuer":"`+s.Issuer+`"`):
		t.Errorf("the issuer's discovery document: %s, want issuer %s", body, s.Issuer)
	case !discovery && err == nil:
		t.Error("the issuer's discovery document is served without credentials, though the form binds nothing for it")
	}
}

func kubernetesClient(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}

// selfAccess asks whether the client's own identity may do x (in namespace ns, or
// cluster-wide for "").
func selfAccess(c kubernetes.Interface, x access, ns string) (bool, error) {
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: x.verb, Group: x.group, Resource: x.resource, Subresource: x.subresource,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}
