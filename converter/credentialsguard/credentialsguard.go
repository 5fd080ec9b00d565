// Package credentialsguard is a confmap converter that refuses, before any component
// starts, a collector configuration that would send credentials where they leak:
//
//   - a URL with credentials in it: user information (https://user:password@host/…,
//     https://token@host/…) or a query parameter that carries a secret (?api_key=…,
//     ?token=…, a signature): contrib's exporters keep the URL as it is, so the secret ends
//     up in their error and warning logs and in the labels of their self-metrics. A URL
//     that does not even parse (a password holding '/', '#' or '?') is refused too, and
//     never repeated;
//   - a client that authenticates (an `auth` authenticator, or a header that carries a
//     credential: Authorization, Proxy-Authorization, X-API-Key, X-Auth-Token, DD-API-KEY…)
//     over plain text (an http:// endpoint, or gRPC with tls.insecure) or over TLS that
//     does not check the server (tls.insecure_skip_verify): anyone on the path reads the
//     credential. OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS=true allows it, for a backend on
//     loopback or behind a TLS-terminating sidecar;
//   - an OAuth2 client whose token URL is http://: the client secret goes there.
//
// It looks at every exporter, every extension (oauth2client's token_url, any URL key) and
// the collector's own telemetry exporters (service::telemetry readers and processors).
//
// A component's own Validate cannot do this: it sees only its own configuration, and
// these are contrib's components. The converter sees the whole, resolved configuration,
// so `otelcol-gpu validate` refuses it too. Its errors name the offending key, never the
// value.
package credentialsguard // import "github.com/otelcol-gpu/otelcol-gpu/converter/credentialsguard"

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/confmap"
)

// AllowPlaintextEnv is the environment variable that, set to "true", allows credentials
// over plain text or over TLS without verification.
const AllowPlaintextEnv = "OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS"

// NewFactory is what the ocb-generated main registers.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter {
		return New(os.Getenv)
	})
}

// New returns the converter; getenv reads AllowPlaintextEnv.
func New(getenv func(string) string) confmap.Converter {
	return converter{allowPlaintext: getenv(AllowPlaintextEnv) == "true"}
}

type converter struct{ allowPlaintext bool }

// urlKeys are where components keep a URL or host:port: the generic endpoint,
// otlp_http's per-signal ones, an HTTP proxy, and an OAuth2 client's token URL.
var urlKeys = []string{"endpoint", "metrics_endpoint", "traces_endpoint", "logs_endpoint", "proxy_url", "token_url"}

func (c converter) Convert(_ context.Context, conf *confmap.Conf) error {
	all := conf.ToStringMap()
	var errs []error
	for _, section := range []string{"exporters", "extensions"} {
		components := asMap(all[section])
		for _, id := range sortedKeys(components) {
			cfg := asMap(components[id])
			// The remote-write exporter nests its client settings under `http`.
			for _, client := range []map[string]any{cfg, asMap(cfg["http"])} {
				if client != nil {
					errs = append(errs, c.checkClient(section+"::"+id, client)...)
				}
			}
		}
	}
	telemetry := asMap(asMap(all["service"])["telemetry"])
	for _, path := range telemetryExporters(telemetry) {
		errs = append(errs, c.checkClient(path.name, path.client)...)
	}
	return errors.Join(errs...)
}

// checkClient checks one client's settings; where is the key path that names it in errors.
func (c converter) checkClient(where string, client map[string]any) []error {
	var errs []error
	tls := asMap(client["tls"])
	authenticates := asMap(client["auth"])["authenticator"] != nil || hasCredentialHeader(client["headers"]) ||
		hasCredentialHeaderList(client["headers_list"])
	// The telemetry's declarative OTLP exporter says `insecure: true` for plain text.
	insecureGRPC := asBool(tls["insecure"]) || asBool(client["insecure"])
	for _, key := range urlKeys {
		raw, ok := client[key].(string)
		if !ok || raw == "" {
			continue
		}
		if why := credentialsInURL(raw); why != "" {
			// Never repeat the URL: it holds the secret.
			errs = append(errs, fmt.Errorf("%s::%s %s: it would appear in logs and self-metric labels; use an auth overlay or a header from a file or the environment instead (deploy/README.md)", where, key, why))
			continue
		}
		lower := strings.ToLower(strings.TrimSpace(raw))
		if key == "token_url" {
			// An OAuth2 client sends its client secret to the token URL.
			if strings.HasPrefix(lower, "http://") && !c.allowPlaintext {
				errs = append(errs, fmt.Errorf("%s::token_url is http://: the OAuth2 client secret would cross the network in plain text to %s; use https://, or set %s=true where the path cannot be read", where, hostOf(raw), AllowPlaintextEnv))
			}
			continue
		}
		if key == "proxy_url" || !authenticates || c.allowPlaintext {
			continue
		}
		// gRPC with tls.insecure is plain text whatever the target's form (host:port,
		// dns:///host:port, passthrough:///…), unless its scheme asks for TLS.
		if strings.HasPrefix(lower, "http://") || (insecureGRPC && !strings.HasPrefix(lower, "https://")) {
			errs = append(errs, fmt.Errorf("%s sends credentials in plain text to %s: use https:// (or TLS for gRPC), or set %s=true where the path cannot be read (loopback, a TLS sidecar)", where, hostOf(raw), AllowPlaintextEnv))
		} else if asBool(tls["insecure_skip_verify"]) {
			errs = append(errs, fmt.Errorf("%s sends credentials over TLS that does not verify the server (tls.insecure_skip_verify) to %s: anyone in the path can pose as it and read them; give it the server's CA (tls.ca_file), or set %s=true where the path cannot be read", where, hostOf(raw), AllowPlaintextEnv))
		}
	}
	return errs
}

// URLCredentials says why a URL holds a credential (user information, a secret in its
// query, or a URL that does not parse), or "" when it holds none: the same check for the
// repository's other clients (cmd/gpu-cost-report).
func URLCredentials(raw string) string { return credentialsInURL(raw) }

// IsSecretName says whether a header or query parameter name carries a credential.
func IsSecretName(name string) bool { return isSecretName(name) }

// credentialsInURL says why raw holds a credential, or "" when it does not. It does not
// rely on url.Parse alone: a password with '/', '#' or '?' in it makes the URL unparsable
// (or parse with the password as the host's port), and that must not let it through.
func credentialsInURL(raw string) string {
	// Any '@' is taken for user information, wherever url.Parse would put it: a password
	// may hold '/', '#' and '?', which move it into the path, the fragment or a port that
	// does not parse. An '@' that really belongs in a path is written %40.
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		return "has credentials in its URL (user information before @" + hostOf(raw[at+1:]) + "; an '@' in a path is written %40)"
	}
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "://") {
			return "is a URL that does not parse (a password with '/', '#' or '?' in it?)"
		}
		return "" // host:port, a gRPC target: no query to hold a secret.
	}
	for name := range u.Query() {
		if isSecretName(name) {
			return "carries a secret in its query (parameter " + strconv.Quote(name) + ")"
		}
	}
	return ""
}

// isSecretName says whether a header or query parameter name carries a credential.
// Providers name them many ways (Authorization, Proxy-Authorization, X-API-Key,
// X-Auth-Token, DD-API-KEY, X-SF-Token, api-key, X-Honeycomb-Team, access_token, sig).
func isSecretName(name string) bool {
	n := strings.ToLower(name)
	for _, part := range []string{"auth", "token", "key", "secret", "password", "passwd", "credential", "cookie", "session", "signature"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	switch n {
	case "sig", "x-honeycomb-team", "pwd":
		return true
	}
	return false
}

// hasCredentialHeader reads headers in either form: a map (contrib's exporters) or a list
// of {name, value} (the telemetry's declarative configuration).
func hasCredentialHeader(headers any) bool {
	switch h := headers.(type) {
	case map[string]any:
		for k := range h {
			if isSecretName(k) {
				return true
			}
		}
	case []any:
		for _, item := range h {
			if name, ok := asMap(item)["name"].(string); ok && isSecretName(name) {
				return true
			}
		}
	}
	return false
}

// hasCredentialHeaderList reads the telemetry's "name1=value1,name2=value2" form.
func hasCredentialHeaderList(list any) bool {
	s, _ := list.(string)
	for _, pair := range strings.Split(s, ",") {
		if name, _, _ := strings.Cut(pair, "="); isSecretName(strings.TrimSpace(name)) {
			return true
		}
	}
	return false
}

type namedClient struct {
	name   string
	client map[string]any
}

// telemetryExporters finds the OTLP exporters of the collector's own telemetry:
// metrics.readers[].periodic.exporter.<otlp…>, logs/traces.processors[].<batch|simple>.exporter.<otlp…>.
func telemetryExporters(telemetry map[string]any) []namedClient {
	var found []namedClient
	add := func(prefix string, exporter map[string]any) {
		for _, kind := range sortedKeys(exporter) {
			if client := asMap(exporter[kind]); client != nil {
				found = append(found, namedClient{name: prefix + "::" + kind, client: client})
			}
		}
	}
	metrics := asMap(telemetry["metrics"])
	readers, _ := metrics["readers"].([]any)
	for i, r := range readers {
		for _, mode := range []string{"periodic", "pull"} {
			add(fmt.Sprintf("service::telemetry::metrics::readers[%d]::%s::exporter", i, mode), asMap(asMap(asMap(r)[mode])["exporter"]))
		}
	}
	for _, signal := range []string{"logs", "traces"} {
		processors, _ := asMap(telemetry[signal])["processors"].([]any)
		for i, p := range processors {
			for _, mode := range []string{"batch", "simple"} {
				add(fmt.Sprintf("service::telemetry::%s::processors[%d]::%s::exporter", signal, i, mode), asMap(asMap(asMap(p)[mode])["exporter"]))
			}
		}
	}
	return found
}

// hostOf names where a URL goes without repeating anything secret in it.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		raw = raw[i+3:]
	}
	if j := strings.IndexAny(raw, "/?#@"); j >= 0 {
		raw = raw[:j]
	}
	return raw
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asBool(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return strings.EqualFold(b, "true")
	}
	return false
}
