package deploytest

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// gatewayNames are the names a form gives the gateway tier's pieces.
type gatewayNames struct {
	agentNamespace, gatewayNamespace string
	gateway                          string // Deployment, Service, NetworkPolicy
	tlsSecret, caConfigMap           string
	// tokenSecret is the agents' shared token; "" where each agent presents its pod's
	// ServiceAccount token instead (per-agent identity, checkAgentIdentity).
	tokenSecret string
	agentNetpol string
	monitoring  string // the namespace allowed to scrape self-metrics
}

// checkGatewaySecured: the gateway tier as every form ships it — the gateway in its own
// namespace at the restricted Pod Security Standard, serving TLS with the certificate
// configs/gateway.yaml expects and accepting the agents' token; the agents verifying it
// with the CA and presenting the token; NetworkPolicies that let only the agents reach
// OTLP and only the monitoring namespace reach self-metrics.
func checkGatewaySecured(t *testing.T, o *objects, n gatewayNames) {
	t.Helper()
	gw := o.deployment(t, n.gateway)
	if gw.Namespace != n.gatewayNamespace {
		t.Errorf("gateway Deployment in namespace %q, want %q", gw.Namespace, n.gatewayNamespace)
	}
	if ns, ok := o.namespaces[n.gatewayNamespace]; !ok {
		t.Errorf("no Namespace %s rendered", n.gatewayNamespace)
	} else if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s enforces %q, want restricted", n.gatewayNamespace, ns.Labels["pod-security.kubernetes.io/enforce"])
	}
	gspec := gw.Spec.Template.Spec
	mountedAt(t, gspec, "/etc/otelcol-gpu/tls", func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == n.tlsSecret
	}, "the gateway's TLS Secret "+n.tlsSecret)
	if n.tokenSecret != "" {
		mountedAt(t, gspec, "/etc/otelcol-gpu/gateway-token", func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == n.tokenSecret
		}, "the token Secret "+n.tokenSecret)
	}
	for _, e := range gspec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "OTELCOL_GPU_TLS_") || e.Name == "OTELCOL_GPU_GATEWAY_TOKEN_FILE" {
			t.Errorf("gateway sets %s: the mounts are where configs/gateway.yaml looks by default", e.Name)
		}
	}

	var agent *corev1.PodSpec
	var agentLabels map[string]string
	for _, ds := range o.daemonSets {
		if ds.Namespace == n.agentNamespace {
			agent, agentLabels = &ds.Spec.Template.Spec, ds.Spec.Template.Labels
		}
	}
	if agent == nil {
		t.Fatalf("no agent DaemonSet in %s", n.agentNamespace)
	}
	env := envMap(agent.Containers[0])
	if got, want := env["OTELCOL_GPU_GATEWAY_ENDPOINT"].Value, n.gateway+"."+n.gatewayNamespace+".svc:4317"; got != want {
		t.Errorf("agents send to %q, want the gateway Service %q", got, want)
	}
	if _, ok := env["OTELCOL_GPU_GATEWAY_INSECURE"]; ok {
		t.Error("OTELCOL_GPU_GATEWAY_INSECURE is set: agents → gateway is always TLS")
	}
	if env["OTELCOL_GPU_GATEWAY_CA_FILE"].Value != "/etc/otelcol-gpu/gateway-ca/ca.crt" ||
		env["OTELCOL_GPU_GATEWAY_TOKEN_FILE"].Value != "/etc/otelcol-gpu/gateway-token/token" {
		t.Errorf("agent CA/token files: %q, %q", env["OTELCOL_GPU_GATEWAY_CA_FILE"].Value, env["OTELCOL_GPU_GATEWAY_TOKEN_FILE"].Value)
	}
	mountedAt(t, *agent, "/etc/otelcol-gpu/gateway-ca", func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == n.caConfigMap
	}, "the gateway's CA ConfigMap "+n.caConfigMap)
	if n.tokenSecret != "" {
		mountedAt(t, *agent, "/etc/otelcol-gpu/gateway-token", func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == n.tokenSecret
		}, "the token Secret "+n.tokenSecret)
	} else {
		checkAgentIdentity(t, o, n)
	}

	// NetworkPolicies.
	gwPol, ok := o.netpols[n.gateway]
	if !ok {
		t.Fatalf("no NetworkPolicy %s in %v", n.gateway, o.names())
	}
	if gwPol.Namespace != n.gatewayNamespace || !selects(t, gwPol.Spec.PodSelector, gw.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy %s/%s does not select the gateway pods", gwPol.Namespace, gwPol.Name)
	}
	if !reflect.DeepEqual(gwPol.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(gwPol.Spec.Ingress) != 2 {
		t.Fatalf("gateway NetworkPolicy: %+v, want two ingress rules", gwPol.Spec)
	}
	otlp, metrics := gwPol.Spec.Ingress[0], gwPol.Spec.Ingress[1]
	if !onlyPort(otlp, "otlp-grpc") || len(otlp.From) != 1 || otlp.From[0].PodSelector == nil ||
		!selects(t, *otlp.From[0].PodSelector, agentLabels) ||
		!selectsNamespace(t, otlp.From[0].NamespaceSelector, n.agentNamespace) {
		t.Errorf("gateway OTLP rule %+v: want only the agent pods of %s on otlp-grpc", otlp, n.agentNamespace)
	}
	if !onlyPort(metrics, "metrics") || len(metrics.From) != 1 || metrics.From[0].PodSelector != nil ||
		!selectsNamespace(t, metrics.From[0].NamespaceSelector, n.monitoring) {
		t.Errorf("gateway metrics rule %+v: want namespace %s on metrics only", metrics, n.monitoring)
	}
	for _, port := range gw.Spec.Template.Spec.Containers[0].Ports {
		if port.Name != "otlp-grpc" && port.Name != "metrics" && port.Name != "health" {
			t.Errorf("gateway port %s is not covered by the NetworkPolicy review", port.Name)
		}
	}
	agPol, ok := o.netpols[n.agentNetpol]
	if !ok {
		t.Fatalf("no agent NetworkPolicy %s", n.agentNetpol)
	}
	if agPol.Namespace != n.agentNamespace || !selects(t, agPol.Spec.PodSelector, agentLabels) || len(agPol.Spec.Ingress) != 1 ||
		!onlyPort(agPol.Spec.Ingress[0], "metrics") || !selectsNamespace(t, agPol.Spec.Ingress[0].From[0].NamespaceSelector, n.monitoring) {
		t.Errorf("agent NetworkPolicy %+v: want only %s on metrics", agPol.Spec, n.monitoring)
	}
}

func mountedAt(t *testing.T, spec corev1.PodSpec, path string, want func(corev1.Volume) bool, what string) {
	t.Helper()
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("%s is mounted writable", path)
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && want(v) {
				return
			}
		}
	}
	t.Errorf("%s is not mounted at %s", what, path)
}

func selects(t *testing.T, sel metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Errorf("selector %+v: %v", sel, err)
		return false
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

func selectsNamespace(t *testing.T, sel *metav1.LabelSelector, ns string) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	// Only that namespace: its automatic name label, nothing broader.
	return reflect.DeepEqual(sel.MatchLabels, map[string]string{"kubernetes.io/metadata.name": ns}) && len(sel.MatchExpressions) == 0
}

func onlyPort(r networkingv1.NetworkPolicyIngressRule, name string) bool {
	return len(r.Ports) == 1 && r.Ports[0].Port != nil && r.Ports[0].Port.StrVal == name &&
		r.Ports[0].Protocol != nil && *r.Ports[0].Protocol == corev1.ProtocolTCP
}

// TestHelmGatewayCredentials: without credentials in the values the chart generates a CA, a
// certificate the agents can verify for the gateway Service's name, and one token that the
// agents' and the gateway's Secrets share; with existingSecret and caConfigMap it renders
// none and mounts those.
func TestHelmGatewayCredentials(t *testing.T) {
	t.Run("generated", func(t *testing.T) {
		o := helmTemplate(t, filepath.Join(chartDir(t), "ci", "gateway-values.yaml"))
		tlsSec, ok := o.secrets["otelcol-gpu-gateway-tls"]
		if !ok || tlsSec.Type != corev1.SecretTypeTLS || tlsSec.Namespace != "otelcol-gpu-gateway" {
			t.Fatalf("gateway TLS Secret = %+v, want a kubernetes.io/tls Secret in otelcol-gpu-gateway", tlsSec)
		}
		ca := o.configMaps["otelcol-gpu-gateway-ca"]
		if ca == nil || ca.Namespace != releaseNamespace {
			t.Fatalf("no CA ConfigMap for the agents in %s", releaseNamespace)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ca.Data["ca.crt"])) {
			t.Fatal("the CA ConfigMap holds no PEM certificate")
		}
		block, _ := pem.Decode(tlsSec.Data["tls.crt"])
		if block == nil {
			t.Fatal("tls.crt is not PEM")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "otelcol-gpu-gateway.otelcol-gpu-gateway.svc"}); err != nil {
			t.Errorf("the agents cannot verify the gateway's certificate: %v", err)
		}
		tokens := map[string]string{}
		for _, obj := range o.all {
			if obj.kind != "Secret" || obj.name != "otelcol-gpu-gateway-token" {
				continue
			}
			s := decodeSecret(t, obj.raw)
			tokens[s.Namespace] = string(s.Data["token"])
		}
		if len(tokens) != 2 || tokens["otelcol-gpu"] == "" || tokens["otelcol-gpu"] != tokens["otelcol-gpu-gateway"] || len(tokens["otelcol-gpu"]) < 32 {
			t.Errorf("token Secrets by namespace: %d, want one token of 32+ characters in otelcol-gpu and otelcol-gpu-gateway", len(tokens))
		}
	})
	t.Run("existing", func(t *testing.T) {
		o := helmTemplateValues(t, map[string]any{"gateway": map[string]any{
			"enabled": true,
			"tls":     map[string]any{"existingSecret": "my-gateway-cert", "caConfigMap": "my-ca-bundle"},
			"auth":    map[string]any{"existingSecret": "my-gateway-token"},
		}})
		if len(o.secrets) != 0 {
			t.Errorf("Secrets rendered although all are existing: %v", keys(o.secrets))
		}
		checkGatewaySecured(t, o, gatewayNames{
			agentNamespace: releaseNamespace, gatewayNamespace: "otelcol-gpu-gateway",
			gateway: "otelcol-gpu-gateway", tlsSecret: "my-gateway-cert", caConfigMap: "my-ca-bundle",
			tokenSecret: "my-gateway-token", agentNetpol: "otelcol-gpu-agent", monitoring: "monitoring",
		})
	})
}

func decodeSecret(t *testing.T, raw []byte) *corev1.Secret {
	t.Helper()
	o := decodeManifests(t, raw)
	for _, s := range o.secrets {
		return s
	}
	t.Fatal("not a Secret")
	return nil
}

// TestImagesByDigest: every form can run the image by digest — Helm's image.digest (a
// malformed one refused), a kustomize overlay's images entry with a digest, for the
// agents and the gateway alike.
func TestImagesByDigest(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	want := "registry.example.com/otelcol-gpu@" + digest
	o := helmTemplateValues(t, map[string]any{
		"image":   map[string]any{"repository": "registry.example.com/otelcol-gpu", "tag": "ignored", "digest": digest},
		"gateway": map[string]any{"enabled": true},
	})
	if got := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("helm agent image = %q, want %q", got, want)
	}
	if got := o.deployment(t, "otelcol-gpu-gateway").Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("helm gateway image = %q, want %q", got, want)
	}
	if err := helmRenderError(t, map[string]any{"image": map[string]any{"digest": "latest"}}); err == nil || !strings.Contains(err.Error(), "image.digest") {
		t.Errorf("a malformed image.digest: %v, want refused", err)
	}
	k := kustomizeBuild(t, "overlays/test-digest", `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../gateway-mode
images:
  - name: ghcr.io/otelcol-gpu/otelcol-gpu
    newName: registry.example.com/otelcol-gpu
    digest: `+digest+`
`)
	if got := k.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("kustomize agent image = %q, want %q", got, want)
	}
	if got := k.deployment(t, "otelcol-gpu-gateway").Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("kustomize gateway image = %q, want %q", got, want)
	}
}
