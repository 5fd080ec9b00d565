package credentialsguard

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
)

// secret is in every credential of the cases below: no error may repeat it.
const secret = "s3cret"

func TestConvert(t *testing.T) {
	rw := func(endpoint string, extra map[string]any) map[string]any {
		http := map[string]any{"endpoint": endpoint}
		for k, v := range extra {
			http[k] = v
		}
		return map[string]any{"exporters": map[string]any{"prometheus_remote_write": map[string]any{"http": http}}}
	}
	otlpHTTP := func(client map[string]any) map[string]any {
		return map[string]any{"exporters": map[string]any{"otlp_http/backend": client}}
	}
	header := func(name string) map[string]any {
		return map[string]any{"headers": map[string]any{name: secret}}
	}
	basic := header("Authorization")
	bearer := map[string]any{"auth": map[string]any{"authenticator": "bearertokenauth/remote_write"}}
	telemetry := func(otlp map[string]any) map[string]any {
		return map[string]any{"service": map[string]any{"telemetry": map[string]any{"metrics": map[string]any{"readers": []any{
			map[string]any{"pull": map[string]any{"exporter": map[string]any{"prometheus": map[string]any{"host": "127.0.0.1", "port": 8888}}}},
			map[string]any{"periodic": map[string]any{"exporter": map[string]any{"otlp": otlp}}},
		}}}}}
	}
	for _, tc := range []struct {
		name    string
		conf    map[string]any
		allow   bool
		wantErr string // "" for accepted
	}{
		{name: "plain http without credentials", conf: rw("http://prometheus:9090/api/v1/write", nil)},
		{name: "basic over https", conf: rw("https://mimir.example.com/api/v1/push", basic)},
		{name: "bearer over https", conf: rw("https://mimir.example.com/api/v1/push", bearer)},
		{name: "basic over http", conf: rw("http://mimir.example.com/api/v1/push", basic), wantErr: "plain text to mimir.example.com"},
		{name: "bearer over HTTP", conf: rw("HTTP://mimir.example.com/api/v1/push", bearer), wantErr: "plain text"},
		{name: "lower-case header over http", conf: rw("http://m/api", header("authorization")), wantErr: "plain text"},
		{name: "basic over http, allowed", conf: rw("http://127.0.0.1:9090/api/v1/write", basic), allow: true},
		{name: "password in the URL", conf: rw("https://fleet:s3cret@mimir.example.com/api/v1/push", nil), wantErr: "credentials in its URL"},
		{name: "password in the URL, plaintext allowed", conf: rw("https://fleet:s3cret@mimir.example.com/api/v1/push", nil), allow: true, wantErr: "credentials in its URL"},
		// url.Parse fails on these, or puts the password in the path, a fragment or a port.
		{name: "password with a slash", conf: rw("https://fleet:s3cret/x@mimir.example.com/api/v1/push", nil), wantErr: "prometheus_remote_write::endpoint has credentials in its URL (user information before @mimir.example.com"},
		{name: "password with a hash", conf: rw("https://fleet:s3cret#x@mimir.example.com/api/v1/push", nil), wantErr: "credentials in its URL"},
		{name: "password with a question mark", conf: rw("https://fleet:s3cret?x@mimir.example.com/api/v1/push", nil), wantErr: "credentials in its URL"},
		{name: "token as the user, with a slash", conf: rw("https://s3cret/abc@mimir.example.com/api/v1/push", nil), wantErr: "credentials in its URL"},
		{name: "an @ in a path, escaped", conf: rw("https://mimir.example.com/tenants/team%40example.com/push", nil)},
		{name: "a URL that does not parse", conf: rw("https://mimir.example.com:s3cret/api/v1/push", nil), wantErr: "does not parse"},
		{name: "api_key in the query", conf: rw("https://mimir.example.com/api/v1/push?api_key=s3cret", nil), wantErr: `carries a secret in its query (parameter "api_key")`},
		{name: "a SAS signature in the query", conf: rw("https://store.example.com/push?sv=2024&sig=s3cret", nil), wantErr: `parameter "sig"`},
		{name: "a harmless query", conf: rw("https://mimir.example.com/api/v1/push?tenant=gpu", nil)},
		{name: "X-API-Key over http", conf: otlpHTTP(map[string]any{"endpoint": "http://otlp.example.com", "headers": map[string]any{"X-API-Key": secret}}), wantErr: "exporters::otlp_http/backend sends credentials in plain text"},
		{name: "X-Auth-Token over http", conf: rw("http://mimir.example.com/push", header("X-Auth-Token")), wantErr: "plain text"},
		{name: "Proxy-Authorization over http", conf: rw("http://mimir.example.com/push", header("Proxy-Authorization")), wantErr: "plain text"},
		{name: "DD-API-KEY over http", conf: rw("http://intake.example.com/push", header("DD-API-KEY")), wantErr: "plain text"},
		{name: "X-Honeycomb-Team over http", conf: otlpHTTP(map[string]any{"endpoint": "http://api.honeycomb.example", "headers": map[string]any{"x-honeycomb-team": secret}}), wantErr: "plain text"},
		{name: "a tenant header over http", conf: rw("http://mimir.example.com/push", map[string]any{"headers": map[string]any{"X-Scope-OrgID": "gpu"}})},
		{name: "credentials with insecure_skip_verify", conf: rw("https://mimir.example.com/push", map[string]any{"auth": bearer["auth"], "tls": map[string]any{"insecure_skip_verify": true}}), wantErr: "does not verify the server"},
		{name: "credentials with insecure_skip_verify, allowed", conf: rw("https://mimir.example.com/push", map[string]any{"auth": bearer["auth"], "tls": map[string]any{"insecure_skip_verify": true}}), allow: true},
		{name: "insecure_skip_verify without credentials", conf: rw("https://mimir.example.com/push", map[string]any{"tls": map[string]any{"insecure_skip_verify": true}})},
		{name: "a user in proxy_url", conf: rw("https://mimir.example.com/push", map[string]any{"proxy_url": "http://proxyuser:s3cret@proxy.example.com:3128"}), wantErr: "prometheus_remote_write::proxy_url has credentials"},
		{name: "a plain proxy_url", conf: rw("https://mimir.example.com/push", map[string]any{"proxy_url": "http://proxy.example.com:3128"})},
		{name: "otlp_grpc insecure with a token", conf: map[string]any{"exporters": map[string]any{"otlp_grpc/extra": map[string]any{
			"endpoint": "otlp.example.com:4317", "tls": map[string]any{"insecure": true}, "auth": map[string]any{"authenticator": "bearertokenauth/x"},
		}}}, wantErr: "otlp_grpc/extra sends credentials in plain text"},
		{name: "otlp_grpc insecure, dns resolver target, with a token", conf: map[string]any{"exporters": map[string]any{"otlp_grpc/extra": map[string]any{
			"endpoint": "dns:///otlp.example.com:4317", "tls": map[string]any{"insecure": true}, "auth": map[string]any{"authenticator": "bearertokenauth/x"},
		}}}, wantErr: "otlp_grpc/extra sends credentials in plain text"},
		{name: "otlp_grpc target with a user", conf: map[string]any{"exporters": map[string]any{"otlp_grpc": map[string]any{"endpoint": "s3cret@gw:4317"}}}, wantErr: "otlp_grpc::endpoint has credentials"},
		{name: "otlp_grpc over TLS with a token", conf: map[string]any{"exporters": map[string]any{"otlp_grpc": map[string]any{
			"endpoint": "gw:4317", "auth": map[string]any{"authenticator": "bearertokenauth/gateway"},
		}}}},
		{name: "otlp_http metrics_endpoint with a user", conf: otlpHTTP(map[string]any{"metrics_endpoint": "https://u:s3cret@otlp.example.com/v1/metrics"}), wantErr: "exporters::otlp_http/backend::metrics_endpoint has credentials"},
		{name: "oauth2client token_url over http", conf: map[string]any{"extensions": map[string]any{"oauth2client": map[string]any{
			"client_id": "agent", "client_secret": secret, "token_url": "http://idp.example.com/oauth2/token",
		}}}, wantErr: "extensions::oauth2client::token_url is http://: the OAuth2 client secret would cross the network in plain text to idp.example.com"},
		{name: "oauth2client token_url over https", conf: map[string]any{"extensions": map[string]any{"oauth2client": map[string]any{
			"client_id": "agent", "client_secret": secret, "token_url": "https://idp.example.com/oauth2/token",
		}}}},
		{name: "telemetry OTLP with an api-key header over http", conf: telemetry(map[string]any{
			"protocol": "http/protobuf", "endpoint": "http://otlp.example.com:4318/v1/metrics", "headers": []any{map[string]any{"name": "api-key", "value": secret}},
		}), wantErr: "service::telemetry::metrics::readers[1]::periodic::exporter::otlp sends credentials in plain text"},
		{name: "telemetry OTLP gRPC insecure with headers_list", conf: telemetry(map[string]any{
			"protocol": "grpc", "endpoint": "otlp.example.com:4317", "insecure": true, "headers_list": "x-tenant=gpu,authorization=Bearer s3cret",
		}), wantErr: "sends credentials in plain text"},
		{name: "telemetry OTLP with a password in the URL", conf: telemetry(map[string]any{
			"protocol": "http/protobuf", "endpoint": "https://u:s3cret@otlp.example.com/v1/metrics",
		}), wantErr: "readers[1]::periodic::exporter::otlp::endpoint has credentials"},
		{name: "telemetry logs through OTLP, token over http", conf: map[string]any{"service": map[string]any{"telemetry": map[string]any{"logs": map[string]any{"processors": []any{
			map[string]any{"batch": map[string]any{"exporter": map[string]any{"otlp": map[string]any{"endpoint": "http://logs.example.com", "headers": []any{map[string]any{"name": "Authorization", "value": secret}}}}}},
		}}}}}, wantErr: "service::telemetry::logs::processors[0]::batch::exporter::otlp sends credentials in plain text"},
		{name: "telemetry OTLP over https with a token", conf: telemetry(map[string]any{
			"protocol": "http/protobuf", "endpoint": "https://otlp.example.com/v1/metrics", "headers": []any{map[string]any{"name": "Authorization", "value": secret}},
		})},
		{name: "no exporters", conf: map[string]any{"receivers": map[string]any{"gpu": nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			if tc.allow {
				env[AllowPlaintextEnv] = "true"
			}
			err := New(func(k string) string { return env[k] }).Convert(context.Background(), confmap.NewFromStringMap(tc.conf))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q, want %q in it", err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}
}

// Every problem in a configuration is reported at once, so one run of `validate` lists
// them all.
func TestConvertReportsEveryProblem(t *testing.T) {
	conf := confmap.NewFromStringMap(map[string]any{
		"exporters": map[string]any{
			"prometheus_remote_write": map[string]any{"http": map[string]any{"endpoint": "https://u:s3cret@a.example.com/push"}},
			"otlp_http":               map[string]any{"endpoint": "http://b.example.com", "headers": map[string]any{"X-API-Key": secret}},
		},
		"extensions": map[string]any{"oauth2client/idp": map[string]any{"token_url": "http://idp.example.com/token"}},
	})
	err := New(func(string) string { return "" }).Convert(context.Background(), conf)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"prometheus_remote_write::endpoint", "otlp_http sends credentials", "oauth2client/idp::token_url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
