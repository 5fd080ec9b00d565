// Package credentialsguard is a confmap converter that refuses, before any component
// starts, a collector configuration that would send credentials where they leak:
//
//   - an exporter endpoint with credentials in its URL (https://user:password@host/…):
//     contrib's exporters keep the URL as it is, so the password ends up in their error
//     logs and in the labels of their self-metrics;
//   - an exporter that authenticates (an `auth` authenticator or an Authorization header)
//     over plain text (an http:// endpoint, or gRPC with tls.insecure): anyone on the path
//     reads the credential. OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS=true allows it, for a
//     backend on loopback or behind a TLS-terminating sidecar.
//
// A component's own Validate cannot do this: it sees only its own configuration, and
// these are contrib's exporters. The converter sees the whole, resolved configuration, so
// `otelcol-gpu validate` refuses it too.
package credentialsguard // import "github.com/otelcol-gpu/otelcol-gpu/converter/credentialsguard"

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/confmap"
)

// AllowPlaintextEnv is the environment variable that, set to "true", allows credentials
// over plain text.
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

// endpointKeys are where exporters keep a URL or host:port: the generic endpoint and
// otlp_http's per-signal ones.
var endpointKeys = []string{"endpoint", "metrics_endpoint", "traces_endpoint", "logs_endpoint"}

func (c converter) Convert(_ context.Context, conf *confmap.Conf) error {
	exporters, _ := conf.ToStringMap()["exporters"].(map[string]any)
	ids := make([]string, 0, len(exporters))
	for id := range exporters {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var errs []error
	for _, id := range ids {
		cfg, _ := exporters[id].(map[string]any)
		// The remote-write exporters (remote_write, prometheus_remote_write) nest their
		// client settings under `http`.
		for _, client := range []map[string]any{cfg, asMap(cfg["http"])} {
			if client == nil {
				continue
			}
			if err := c.check(id, client); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (c converter) check(id string, client map[string]any) error {
	authenticates := asMap(client["auth"])["authenticator"] != nil || hasAuthorizationHeader(asMap(client["headers"]))
	insecureGRPC := asBool(asMap(client["tls"])["insecure"])
	for _, key := range endpointKeys {
		raw, ok := client[key].(string)
		if !ok || raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err == nil && u.User != nil {
			// Never repeat the URL: it holds the password.
			return fmt.Errorf("exporters::%s::%s has credentials in its URL (user:password@%s): they would appear in logs and self-metric labels; use an auth overlay instead (deploy/README.md)", id, key, u.Host)
		}
		// gRPC with tls.insecure is plain text whatever the target's form (host:port,
		// dns:///host:port, passthrough:///…), unless its scheme asks for TLS.
		lower := strings.ToLower(raw)
		plaintext := strings.HasPrefix(lower, "http://") || (insecureGRPC && !strings.HasPrefix(lower, "https://"))
		if authenticates && plaintext && !c.allowPlaintext {
			host := raw
			if err == nil && u.Host != "" {
				host = u.Host
			}
			return fmt.Errorf("exporters::%s sends credentials in plain text to %s: use https:// (or TLS for gRPC), or set %s=true where the path cannot be read (loopback, a TLS sidecar)", id, host, AllowPlaintextEnv)
		}
	}
	return nil
}

func hasAuthorizationHeader(headers map[string]any) bool {
	for k := range headers {
		if strings.EqualFold(k, "authorization") {
			return true
		}
	}
	return false
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
