package deploytest

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Per-agent identity on the gateway tier (deploy/config-overlays/gateway-agent-identity.yaml):
// each agent presents its pod's projected ServiceAccount token, the gateway verifies it
// against the cluster's service-account issuer and accepts only the agents' ServiceAccount.
// testbed/gateway_identity_e2e_test.go runs the overlay against a real API server; these
// tests check that the Helm chart (gateway.agentIdentity) and the kustomize components
// package it consistently on both sides.

const (
	identityOverlay       = "gateway-agent-identity.yaml"
	identityBearerOverlay = "gateway-agent-identity-remote-write-bearer.yaml"
	issuerDiscoveryRole   = "system:service-account-issuer-discovery"
)

// checkAgentIdentity: the gateway merges the identity overlay (byte for byte) and is told
// the issuer, its CA, the audience and the agents' ServiceAccount; the agents present their
// pod's projected token for that audience where OTELCOL_GPU_GATEWAY_TOKEN_FILE points; no
// shared token is rendered or mounted on either side.
func checkAgentIdentity(t *testing.T, o *objects, n gatewayNames) {
	t.Helper()
	gw := o.deployment(t, n.gateway)
	gspec := gw.Spec.Template.Spec
	gc := gspec.Containers[0]
	genv := envMap(gc)

	// The overlay, after gateway.yaml.
	if i := slices.Index(gc.Args, "--config=/etc/otelcol-gpu/config/"+identityOverlay); i < 1 {
		t.Errorf("gateway args = %q: want %s after gateway.yaml", gc.Args, identityOverlay)
	}
	if cm := configVolumeMap(t, o, gspec); cm.Data[identityOverlay] != string(readRepoFile(t, "deploy/config-overlays/"+identityOverlay)) {
		t.Errorf("the gateway's %s differs from deploy/config-overlays: run deploy/sync-configs.sh", identityOverlay)
	}

	// The issuer and its CA.
	issuer := genv["OTELCOL_GPU_AGENT_TOKEN_ISSUER"].Value
	if u, err := url.Parse(issuer); err != nil || u.Scheme != "https" || u.Host == "" {
		t.Errorf("OTELCOL_GPU_AGENT_TOKEN_ISSUER = %q, want the issuer's https:// URL", issuer)
	}
	caEnv, ok := genv["OTELCOL_GPU_AGENT_TOKEN_ISSUER_CA_FILE"]
	if !ok {
		t.Error("OTELCOL_GPU_AGENT_TOKEN_ISSUER_CA_FILE is not set: the API server's CA, or \"\" for the system roots")
	} else if ca := caEnv.Value; ca != "" {
		// A file of the kube-root-ca.crt ConfigMap (the API server's CA), mounted read-only.
		mountedAt(t, gspec, path.Dir(ca), func(v corev1.Volume) bool {
			return v.ConfigMap != nil && v.ConfigMap.Name == "kube-root-ca.crt" &&
				slices.Equal(v.ConfigMap.Items, []corev1.KeyToPath{{Key: "ca.crt", Path: path.Base(ca)}})
		}, "the API server's CA (ConfigMap kube-root-ca.crt, key ca.crt as "+path.Base(ca)+")")
	}
	audience := genv["OTELCOL_GPU_AGENT_TOKEN_AUDIENCE"].Value
	if audience == "" {
		t.Error("OTELCOL_GPU_AGENT_TOKEN_AUDIENCE is not set")
	}

	// The agents: their pod's token for that audience, at OTELCOL_GPU_GATEWAY_TOKEN_FILE.
	var ds *struct {
		ns   string
		spec corev1.PodSpec
	}
	for _, d := range o.daemonSets {
		if d.Namespace == n.agentNamespace {
			ds = &struct {
				ns   string
				spec corev1.PodSpec
			}{d.Namespace, d.Spec.Template.Spec}
		}
	}
	if ds == nil {
		t.Fatalf("no agent DaemonSet in %s", n.agentNamespace)
	}
	ac := ds.spec.Containers[0]
	tokenFile := envMap(ac)["OTELCOL_GPU_GATEWAY_TOKEN_FILE"].Value
	if tokenFile == "" {
		t.Fatal("the agents set no OTELCOL_GPU_GATEWAY_TOKEN_FILE")
	}
	var projected *corev1.Volume
	for _, m := range ac.VolumeMounts {
		rel, under := strings.CutPrefix(tokenFile, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !under {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("the agents' token volume is mounted writable at %s", m.MountPath)
		}
		for i, v := range ds.spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Projected == nil || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil {
				t.Fatalf("the agents' token %s comes from volume %s = %+v, want a projected ServiceAccount token alone", tokenFile, v.Name, v.VolumeSource)
			}
			projected = &ds.spec.Volumes[i]
			sat := v.Projected.Sources[0].ServiceAccountToken
			if sat.Path != rel {
				t.Errorf("the projected token is at %s/%s, OTELCOL_GPU_GATEWAY_TOKEN_FILE is %s", m.MountPath, sat.Path, tokenFile)
			}
			if sat.Audience != audience {
				t.Errorf("the agents' token is projected for audience %q, the gateway accepts %q", sat.Audience, audience)
			}
			// An hour at most (a stolen token lives no longer; the kubelet renews it at 80 %
			// of its life), ten minutes at least (the API server's floor).
			if e := sat.ExpirationSeconds; e == nil || *e > 3600 || *e < 600 {
				t.Errorf("the agents' token expirationSeconds = %v, want 600..3600", deref(e))
			}
		}
	}
	if projected == nil {
		t.Fatalf("OTELCOL_GPU_GATEWAY_TOKEN_FILE=%s is in no mounted volume of the agents", tokenFile)
	}

	// The agents' ServiceAccount, and only it.
	subject := genv["OTELCOL_GPU_AGENT_SUBJECT"].Value
	re, err := regexp.Compile("^(?:" + subject + ")$") // as auth_audit anchors it
	if err != nil {
		t.Fatalf("OTELCOL_GPU_AGENT_SUBJECT = %q: %v", subject, err)
	}
	sa := ds.spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	own := fmt.Sprintf("system:serviceaccount:%s:%s", ds.ns, sa)
	if !re.MatchString(own) {
		t.Errorf("OTELCOL_GPU_AGENT_SUBJECT = %q does not accept the agents' ServiceAccount %s", subject, own)
	}
	others := []string{
		fmt.Sprintf("system:serviceaccount:%s:default", ds.ns),
		fmt.Sprintf("system:serviceaccount:%s:%s-other", ds.ns, sa),
		fmt.Sprintf("system:serviceaccount:%s:%s", n.gatewayNamespace, sa),
		fmt.Sprintf("system:serviceaccount:%s-x:%s", ds.ns, sa),
		// A dot of the name that is not escaped would accept any character there.
		strings.ReplaceAll(own[len("system:serviceaccount:"):], ".", "x"),
		"system:serviceaccount:" + strings.ReplaceAll(own[len("system:serviceaccount:"):], ".", "x"),
	}
	for _, other := range others {
		if other != own && re.MatchString(other) {
			t.Errorf("OTELCOL_GPU_AGENT_SUBJECT = %q also accepts %s", subject, other)
		}
	}
	if acct, ok := o.accounts[sa]; ok && acct.Namespace != ds.ns {
		t.Errorf("ServiceAccount %s is in %s, the agents in %s", sa, acct.Namespace, ds.ns)
	}

	// No shared token: neither rendered nor mounted on either side.
	for name, s := range o.secrets {
		if strings.HasSuffix(name, "gateway-token") {
			t.Errorf("Secret %s/%s rendered: the agents present their own tokens", s.Namespace, name)
		}
	}
	for who, spec := range map[string]corev1.PodSpec{"gateway": gspec, "agents": ds.spec} {
		for _, v := range spec.Volumes {
			if v.Secret != nil && strings.HasSuffix(v.Secret.SecretName, "gateway-token") {
				t.Errorf("the %s mount the shared token Secret %s", who, v.Secret.SecretName)
			}
		}
	}
	for _, m := range gc.VolumeMounts {
		if m.MountPath == "/etc/otelcol-gpu/gateway-token" {
			t.Errorf("the gateway mounts %s at %s: it accepts ServiceAccount tokens only", m.Name, m.MountPath)
		}
	}

	// The merged config: oidc/agents verifies, auth_audit/agents audits it, both started;
	// the shared-token authenticator is not; transform/identity runs before batch.
	files, _ := podConfigs(t, o, gspec)
	cfg, err := mergeConfigs(files...)
	if err != nil {
		t.Fatal(err)
	}
	exts, _ := dig(cfg, "service", "extensions").([]any)
	started := fmt.Sprint(exts)
	for _, want := range []string{"oidc/agents", "auth_audit/agents", "health_check"} {
		if !slices.Contains(exts, any(want)) {
			t.Errorf("merged service::extensions %s lacks %s", started, want)
		}
	}
	if slices.Contains(exts, any("bearertokenauth/agents")) {
		t.Errorf("merged service::extensions %s starts the shared token's bearertokenauth/agents", started)
	}
	if a := dig(cfg, "extensions", "auth_audit/agents", "authenticator"); a != "oidc/agents" {
		t.Errorf("auth_audit/agents audits %v, want oidc/agents", a)
	}
	procs := fmt.Sprint(dig(cfg, "service", "pipelines", "metrics", "processors"))
	if i, j := strings.Index(procs, "transform/identity"), strings.Index(procs, "batch"); i < 0 || j < i {
		t.Errorf("gateway processors %s: want transform/identity before batch", procs)
	}
}

// configVolumeMap is the rendered ConfigMap a pod mounts as its volume "config".
func configVolumeMap(t *testing.T, o *objects, spec corev1.PodSpec) *corev1.ConfigMap {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			if cm, ok := o.configMaps[v.ConfigMap.Name]; ok {
				return cm
			}
		}
	}
	t.Fatalf("no rendered ConfigMap as volume config (have %v)", o.names())
	return nil
}

// issuerDiscoveryBindings are the ClusterRoleBindings of the issuer's discovery role.
func issuerDiscoveryBindings(o *objects) []*rbacv1.ClusterRoleBinding {
	var out []*rbacv1.ClusterRoleBinding
	for _, b := range o.bindings {
		if b.RoleRef.Name == issuerDiscoveryRole {
			out = append(out, b)
		}
	}
	return out
}

// checkIssuerDiscoveryBinding: exactly one binding of system:service-account-issuer-discovery
// to the unauthenticated group when want, none otherwise.
func checkIssuerDiscoveryBinding(t *testing.T, o *objects, want bool) {
	t.Helper()
	bs := issuerDiscoveryBindings(o)
	if !want {
		if len(bs) != 0 {
			t.Errorf("ClusterRoleBinding %s of %s rendered without allowAnonymousDiscovery", bs[0].Name, issuerDiscoveryRole)
		}
		return
	}
	if len(bs) != 1 {
		t.Fatalf("%d ClusterRoleBindings of %s, want one", len(bs), issuerDiscoveryRole)
	}
	b := bs[0]
	wantSubjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:unauthenticated"}}
	if b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: issuerDiscoveryRole}) || !slices.Equal(b.Subjects, wantSubjects) {
		t.Errorf("ClusterRoleBinding %s: %+v → %+v, want the built-in ClusterRole %s → group system:unauthenticated", b.Name, b.RoleRef, b.Subjects, issuerDiscoveryRole)
	}
	if _, ours := o.clusterRoles[issuerDiscoveryRole]; ours {
		t.Errorf("the chart renders its own %s: the built-in one grants the two discovery documents only", issuerDiscoveryRole)
	}
}

// identityValues is gateway mode with gateway.agentIdentity, over base values.
func identityValues(base map[string]any, identity map[string]any) map[string]any {
	v := map[string]any{}
	for k, x := range base {
		v[k] = x
	}
	gw := map[string]any{}
	if g, ok := v["gateway"].(map[string]any); ok {
		for k, x := range g {
			gw[k] = x
		}
	}
	gw["enabled"] = true
	id := map[string]any{"enabled": true}
	for k, x := range identity {
		id[k] = x
	}
	gw["agentIdentity"] = id
	v["gateway"] = gw
	return v
}

var identityGatewayNames = gatewayNames{
	agentNamespace: releaseNamespace, gatewayNamespace: "otelcol-gpu-gateway",
	gateway: "otelcol-gpu-gateway", tlsSecret: "otelcol-gpu-gateway-tls",
	caConfigMap: "otelcol-gpu-gateway-ca", tokenSecret: "",
	agentNetpol: "otelcol-gpu-agent", monitoring: "monitoring",
}

// TestHelmAgentIdentity: gateway.agentIdentity renders per-agent identity on both sides
// (checkAgentIdentity), with the overlays in the order that leaves every extension the
// gateway uses started, the issuer's CA as chosen, the anonymous discovery binding only
// when asked for, and configs the built collector validates.
func TestHelmAgentIdentity(t *testing.T) {
	const (
		kubeIssuer = "https://kubernetes.default.svc.cluster.local"
		eksIssuer  = "https://oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
		cfgDir     = "--config=/etc/otelcol-gpu/config/"
	)
	for _, tc := range []struct {
		name      string
		values    map[string]any
		args      []string // the gateway's --config files
		systemCA  bool
		anonymous bool
		audience  string
		subject   string
		agent     agentExpect
	}{
		{
			name:      "ci gateway-identity-values (API server issuer, remote-write bearer)",
			values:    readValues(t, filepath.Join(chartDir(t), "ci", "gateway-identity-values.yaml")),
			args:      []string{"gateway.yaml", "remote-write-auth-bearer-gateway.yaml", identityOverlay, identityBearerOverlay},
			anonymous: true,
			audience:  "otelcol-gpu-gateway",
			subject:   "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent",
			agent:     defaultAgent,
		},
		{
			name:     "public issuer, system roots, no remote-write auth",
			values:   identityValues(nil, map[string]any{"issuerURL": eksIssuer, "issuerCA": "system"}),
			args:     []string{"gateway.yaml", identityOverlay},
			systemCA: true,
			audience: "otelcol-gpu-gateway",
			subject:  "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent",
			agent:    defaultAgent,
		},
		{
			name:     "ci gateway-values (basic auth, TLS CA, extra exporter) with identity",
			values:   identityValues(readValues(t, filepath.Join(chartDir(t), "ci", "gateway-values.yaml")), map[string]any{"issuerURL": kubeIssuer}),
			args:     []string{"gateway.yaml", "overrides.yaml", "remote-write-auth-basic.yaml", identityOverlay},
			audience: "otelcol-gpu-gateway",
			subject:  "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent",
			agent:    defaultAgent,
		},
		{
			name: "WAL, bearer, own audience, a ServiceAccount name with dots",
			values: identityValues(map[string]any{
				"remoteWrite": map[string]any{
					"url":  "https://mimir.example.com/api/v1/push",
					"auth": map[string]any{"type": "bearer", "existingSecret": "mimir-token"},
					"wal":  map[string]any{"enabled": true},
				},
				"serviceAccount": map[string]any{"name": "gpu.agents"},
			}, map[string]any{"issuerURL": kubeIssuer, "audience": "gpu-gateway.example.com"}),
			args:     []string{"gateway.yaml", "remote-write-wal.yaml", "remote-write-auth-bearer-gateway.yaml", identityOverlay, identityBearerOverlay},
			audience: "gpu-gateway.example.com",
			subject:  `system:serviceaccount:otelcol-gpu:gpu\.agents`,
			agent:    defaultAgent,
		},
		{
			name:     "non-root agents",
			values:   identityValues(readValues(t, filepath.Join(chartDir(t), "ci", "non-root-values.yaml")), map[string]any{"issuerURL": kubeIssuer}),
			args:     []string{"gateway.yaml", identityOverlay},
			audience: "otelcol-gpu-gateway",
			subject:  "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent",
			agent:    agentExpect{nonRoot: true, processes: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := helmTemplateValues(t, tc.values)
			checkGatewaySecured(t, o, identityGatewayNames) // → checkAgentIdentity
			checkIssuerDiscoveryBinding(t, o, tc.anonymous)

			gspec := o.deployment(t, "otelcol-gpu-gateway").Spec.Template.Spec
			checkGatewayPod(t, gspec)
			var want []string
			for _, f := range tc.args {
				want = append(want, cfgDir+f)
			}
			if got := gspec.Containers[0].Args; !slices.Equal(got, want) {
				t.Errorf("gateway args = %q, want %q", got, want)
			}
			cm := o.configMaps["otelcol-gpu-gateway"]
			if slices.Contains(tc.args, identityBearerOverlay) && cm.Data[identityBearerOverlay] != string(readRepoFile(t, "deploy/config-overlays/"+identityBearerOverlay)) {
				t.Errorf("the chart's ConfigMap lacks %s or holds a stale copy: run deploy/sync-configs.sh", identityBearerOverlay)
			}
			genv := envMap(gspec.Containers[0])
			if got := genv["OTELCOL_GPU_AGENT_TOKEN_AUDIENCE"].Value; got != tc.audience {
				t.Errorf("OTELCOL_GPU_AGENT_TOKEN_AUDIENCE = %q, want %q", got, tc.audience)
			}
			if got := genv["OTELCOL_GPU_AGENT_SUBJECT"].Value; got != tc.subject {
				t.Errorf("OTELCOL_GPU_AGENT_SUBJECT = %q, want %q", got, tc.subject)
			}
			ca := genv["OTELCOL_GPU_AGENT_TOKEN_ISSUER_CA_FILE"].Value
			hasCAVolume := slices.ContainsFunc(gspec.Volumes, func(v corev1.Volume) bool {
				return v.ConfigMap != nil && v.ConfigMap.Name == "kube-root-ca.crt"
			})
			if tc.systemCA != (ca == "") || tc.systemCA == hasCAVolume {
				t.Errorf("issuer CA file %q, kube-root-ca.crt mounted %v: want %s", ca, hasCAVolume,
					map[bool]string{true: "the system roots (\"\", nothing mounted)", false: "the API server's CA from kube-root-ca.crt"}[tc.systemCA])
			}

			agent := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
			checkAgentPod(t, agent, tc.agent)
			checkRBAC(t, o, "otelcol-gpu-agent", agent.ServiceAccountName, releaseNamespace)
			if want := []string{"--config=/etc/otelcol-gpu/config/agent-to-gateway.yaml"}; tc.agent == defaultAgent && !slices.Equal(agent.Containers[0].Args, want) {
				t.Errorf("agent args = %q, want %q", agent.Containers[0].Args, want)
			}
			validatePod(t, o, agent)
			validatePod(t, o, gspec)
		})
	}
}

// TestHelmAgentIdentityRefused: values that cannot work fail `helm template` with a message
// that says what to set.
func TestHelmAgentIdentityRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"no issuer", identityValues(nil, nil), "gateway.agentIdentity.issuerURL is required"},
		{"empty issuer", identityValues(nil, map[string]any{"issuerURL": ""}), "kubectl get --raw /.well-known/openid-configuration"},
		{"http issuer", identityValues(nil, map[string]any{"issuerURL": "http://kubernetes.default.svc"}), "must be an https:// URL"},
		{"unknown CA choice", identityValues(nil, map[string]any{"issuerURL": "https://k8s.example.com", "issuerCA": "mine"}), "issuerCA must be kube-root-ca"},
		{"empty audience", identityValues(nil, map[string]any{"issuerURL": "https://k8s.example.com", "audience": ""}), "audience must not be empty"},
		{"the shared token as well", identityValues(map[string]any{"gateway": map[string]any{"auth": map[string]any{"existingSecret": "tok"}}},
			map[string]any{"issuerURL": "https://k8s.example.com"}), "gateway.auth.existingSecret"},
		{"without the gateway", map[string]any{"gateway": map[string]any{"agentIdentity": map[string]any{"enabled": true, "issuerURL": "https://k8s.example.com"}}}, "needs gateway.enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := helmRenderError(t, tc.values); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rendered (err %v), want refused with %q", err, tc.want)
			}
		})
	}
}

// TestHelmNotesWarnOfTheSharedToken: in gateway mode without per-agent identity, NOTES says
// that every agent can write every node's series.
func TestHelmNotesWarnOfTheSharedToken(t *testing.T) {
	const warning = "all agents share one token"
	for _, tc := range []struct {
		name   string
		values map[string]any
		warn   bool
	}{
		{"agents alone", map[string]any{}, false},
		{"gateway, shared token", map[string]any{"gateway": map[string]any{"enabled": true}}, true},
		{"gateway, per-agent identity", identityValues(nil, map[string]any{"issuerURL": "https://k8s.example.com", "allowAnonymousDiscovery": true}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderChart(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			notes := out["otelcol-gpu/templates/NOTES.txt"]
			if notes == "" {
				t.Fatalf("no NOTES.txt in %v", keys(out))
			}
			if got := strings.Contains(notes, warning); got != tc.warn {
				t.Errorf("NOTES warns of the shared token: %v, want %v:\n%s", got, tc.warn, notes)
			}
		})
	}
}

// TestHelmAgentIdentityEgress: with egress policies the gateway may also reach the issuer
// (the API server's endpoints, and networkPolicy.egress.issuer for a public one), and only
// with per-agent identity.
func TestHelmAgentIdentityEgress(t *testing.T) {
	egress := map[string]any{
		"enabled":   true,
		"apiServer": []any{map[string]any{"cidr": "172.18.0.2/32", "port": 6443}},
		"backend":   []any{map[string]any{"cidr": "10.20.0.0/16", "port": 9090}},
		"issuer":    []any{map[string]any{"cidr": "52.0.0.0/8", "port": 443}},
	}
	cidrs := func(np *networkingv1.NetworkPolicy) []string {
		var out []string
		for _, r := range np.Spec.Egress {
			for _, to := range r.To {
				if to.IPBlock != nil {
					out = append(out, to.IPBlock.CIDR)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	o := helmTemplateValues(t, identityValues(map[string]any{"networkPolicy": map[string]any{"egress": egress}}, map[string]any{"issuerURL": "https://k8s.example.com"}))
	if got, want := cidrs(o.netpols["otelcol-gpu-gateway"]), []string{"10.20.0.0/16", "172.18.0.2/32", "52.0.0.0/8"}; !slices.Equal(got, want) {
		t.Errorf("gateway egress with identity: %v, want %v (backend, API server, issuer)", got, want)
	}
	o = helmTemplateValues(t, map[string]any{"networkPolicy": map[string]any{"egress": egress}, "gateway": map[string]any{"enabled": true}})
	if got, want := cidrs(o.netpols["otelcol-gpu-gateway"]), []string{"10.20.0.0/16"}; !slices.Equal(got, want) {
		t.Errorf("gateway egress with the shared token: %v, want %v (the backend only)", got, want)
	}
}

// identityIssuerPatch sets the issuer the way the component's header shows.
const identityIssuerPatch = `patches:
  - target: {kind: Deployment, name: otelcol-gpu-gateway}
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: otelcol-gpu-gateway, namespace: otelcol-gpu-gateway}
      spec:
        template:
          spec:
            containers:
              - name: otelcol-gpu
                env:
                  - name: OTELCOL_GPU_AGENT_TOKEN_ISSUER
                    value: https://kubernetes.default.svc.cluster.local
                  - name: PROMETHEUS_REMOTE_WRITE_URL
                    value: https://mimir.example.com/api/v1/push
`

// TestKustomizeGatewayAgentIdentity: components/gateway-agent-identity patches the agents and
// the gateway of one build consistently (checkAgentIdentity); its placeholder issuer cannot
// resolve until it is patched as its header shows; -remote-write-bearer adds the bearer
// component and the extension list that names both; agents and gateway built apart get
// each their half.
func TestKustomizeGatewayAgentIdentity(t *testing.T) {
	names := gatewayNames{
		agentNamespace: "otelcol-gpu", gatewayNamespace: "otelcol-gpu-gateway",
		gateway: "otelcol-gpu-gateway", tlsSecret: "otelcol-gpu-gateway-tls",
		caConfigMap: "otelcol-gpu-gateway-ca", tokenSecret: "",
		agentNetpol: "otelcol-gpu-agent", monitoring: "monitoring",
	}
	overlay := func(component, tail string) string {
		return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../gateway-mode\ncomponents:\n  - ../../components/" + component + "\n" + tail
	}
	for _, tc := range []struct {
		name, overlay string
		args          []string
		issuer        string
	}{
		{
			name:    "gateway-agent-identity, issuer patched",
			overlay: overlay("gateway-agent-identity", identityIssuerPatch),
			args:    []string{"gateway.yaml", identityOverlay},
			issuer:  "https://kubernetes.default.svc.cluster.local",
		},
		{
			name:    "gateway-agent-identity, placeholder issuer",
			overlay: overlay("gateway-agent-identity", ""),
			args:    []string{"gateway.yaml", identityOverlay},
		},
		{
			name:    "gateway-agent-identity-remote-write-bearer",
			overlay: overlay("gateway-agent-identity-remote-write-bearer", identityIssuerPatch),
			// The gateway's ConfigMap names its bearer variant remote-write-auth-bearer.yaml.
			args:   []string{"gateway.yaml", "remote-write-auth-bearer.yaml", identityOverlay, identityBearerOverlay},
			issuer: "https://kubernetes.default.svc.cluster.local",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := kustomizeBuild(t, "overlays/test-"+regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(tc.name, "-"), tc.overlay)
			checkGatewaySecured(t, o, names) // → checkAgentIdentity
			checkIssuerDiscoveryBinding(t, o, false)
			gspec := o.deployment(t, "otelcol-gpu-gateway").Spec.Template.Spec
			checkGatewayPod(t, gspec)
			var want []string
			for _, f := range tc.args {
				want = append(want, "--config=/etc/otelcol-gpu/config/"+f)
			}
			if got := gspec.Containers[0].Args; !slices.Equal(got, want) {
				t.Errorf("gateway args = %q, want %q", got, want)
			}
			cm := configVolumeMap(t, o, gspec)
			if cm.Data[identityBearerOverlay] != string(readRepoFile(t, "deploy/config-overlays/"+identityBearerOverlay)) {
				t.Errorf("the gateway ConfigMap's %s differs from deploy/config-overlays: run deploy/sync-configs.sh", identityBearerOverlay)
			}
			genv := envMap(gspec.Containers[0])
			issuer := genv["OTELCOL_GPU_AGENT_TOKEN_ISSUER"].Value
			if tc.issuer == "" {
				// Unpatched, the gateway cannot start: the name does not resolve, anywhere.
				if u, err := url.Parse(issuer); err != nil || !strings.HasSuffix(u.Hostname(), ".invalid") {
					t.Errorf("placeholder issuer %q: want a host under .invalid (RFC 2606), which never resolves", issuer)
				}
			} else if issuer != tc.issuer {
				t.Errorf("OTELCOL_GPU_AGENT_TOKEN_ISSUER = %q, want the patched %q", issuer, tc.issuer)
			}
			if got := genv["OTELCOL_GPU_AGENT_SUBJECT"].Value; got != "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent" {
				t.Errorf("OTELCOL_GPU_AGENT_SUBJECT = %q", got)
			}
			agent := o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec
			checkAgentPod(t, agent, defaultAgent)
			checkRBAC(t, o, "otelcol-gpu-agent", "otelcol-gpu-agent", "otelcol-gpu")
			validatePod(t, o, agent)
			validatePod(t, o, gspec)
		})
	}

	t.Run("agents and gateway built apart", func(t *testing.T) {
		apart := func(dir, base string) *objects {
			return kustomizeBuild(t, dir, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - "+base+
				"\ncomponents:\n  - ../../components/gateway-agent-identity\n")
		}
		agents := apart("overlays/test-identity-agents", "../../agent-to-gateway")
		gateway := apart("overlays/test-identity-gateway", "../../gateway")
		if len(agents.deployments) != 0 || len(gateway.daemonSets) != 0 {
			t.Fatalf("each half renders the other: %v / %v", agents.names(), gateway.names())
		}
		var raw [][]byte
		for _, set := range []*objects{agents, gateway} {
			for _, obj := range set.all {
				raw = append(raw, obj.raw)
			}
		}
		o := decodeManifests(t, raw...)
		checkAgentIdentity(t, o, names)
		validatePod(t, o, o.daemonSet(t, "otelcol-gpu-agent").Spec.Template.Spec)
		validatePod(t, o, o.deployment(t, "otelcol-gpu-gateway").Spec.Template.Spec)
	})
}

// TestGatewayIdentityExtensionLists: the gateway's bearer and identity overlays each set the
// whole extension list; merged in either order without the last overlay, one of the
// extensions the gateway uses is not started (the collector would refuse to start, and
// `validate` does not see it), which checkExtensionsStarted catches; with
// gateway-agent-identity-remote-write-bearer.yaml last, all are.
func TestGatewayIdentityExtensionLists(t *testing.T) {
	cfg := func(rel string) string { return filepath.Join(repoRoot(t), rel) }
	gateway := cfg("configs/gateway.yaml")
	bearer := cfg("deploy/config-overlays/remote-write-auth-bearer-gateway.yaml")
	identity := cfg("deploy/config-overlays/" + identityOverlay)
	last := cfg("deploy/config-overlays/" + identityBearerOverlay)
	for _, tc := range []struct {
		name    string
		files   []string
		missing string
	}{
		{"bearer, identity", []string{gateway, bearer, identity}, "bearertokenauth/remote_write"},
		{"identity, bearer", []string{gateway, identity, bearer}, "oidc/agents"},
		{"bearer, identity, the list", []string{gateway, bearer, identity, last}, ""},
		{"identity, bearer, the list", []string{gateway, identity, bearer, last}, ""},
		{"identity alone", []string{gateway, identity}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			checkExtensionsStarted(rec, tc.files...)
			switch {
			case tc.missing == "" && len(rec.errors) != 0:
				t.Errorf("want every extension started, got %v", rec.errors)
			case tc.missing != "" && (len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "extension "+tc.missing+" ")):
				t.Errorf("want %s reported as not started, got %v", tc.missing, rec.errors)
			}
		})
	}
}
