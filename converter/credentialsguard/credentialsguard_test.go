package credentialsguard

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
)

func TestConvert(t *testing.T) {
	rw := func(endpoint string, extra map[string]any) map[string]any {
		http := map[string]any{"endpoint": endpoint}
		for k, v := range extra {
			http[k] = v
		}
		return map[string]any{"exporters": map[string]any{"prometheus_remote_write": map[string]any{"http": http}}}
	}
	basic := map[string]any{"headers": map[string]any{"Authorization": "Basic dXNlcjpwYXNz"}}
	bearer := map[string]any{"auth": map[string]any{"authenticator": "bearertokenauth/remote_write"}}
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
		{name: "lower-case header over http", conf: rw("http://m/api", map[string]any{"headers": map[string]any{"authorization": "x"}}), wantErr: "plain text"},
		{name: "basic over http, allowed", conf: rw("http://127.0.0.1:9090/api/v1/write", basic), allow: true},
		{name: "password in the URL", conf: rw("https://fleet:s3cret@mimir.example.com/api/v1/push", nil), wantErr: "credentials in its URL"},
		{name: "password in the URL, plaintext allowed", conf: rw("https://fleet:s3cret@mimir.example.com/api/v1/push", nil), allow: true, wantErr: "credentials in its URL"},
		{name: "otlp_grpc insecure with a token", conf: map[string]any{"exporters": map[string]any{"otlp_grpc/extra": map[string]any{
			"endpoint": "otlp.example.com:4317", "tls": map[string]any{"insecure": true}, "auth": map[string]any{"authenticator": "bearertokenauth/x"},
		}}}, wantErr: "otlp_grpc/extra sends credentials in plain text"},
		{name: "otlp_grpc insecure, dns resolver target, with a token", conf: map[string]any{"exporters": map[string]any{"otlp_grpc/extra": map[string]any{
			"endpoint": "dns:///otlp.example.com:4317", "tls": map[string]any{"insecure": true}, "auth": map[string]any{"authenticator": "bearertokenauth/x"},
		}}}, wantErr: "otlp_grpc/extra sends credentials in plain text"},
		{name: "otlp_grpc over TLS with a token", conf: map[string]any{"exporters": map[string]any{"otlp_grpc": map[string]any{
			"endpoint": "gw:4317", "auth": map[string]any{"authenticator": "bearertokenauth/gateway"},
		}}}},
		{name: "otlp_http metrics_endpoint with a user", conf: map[string]any{"exporters": map[string]any{"otlp_http": map[string]any{
			"metrics_endpoint": "https://u:p@otlp.example.com/v1/metrics",
		}}}, wantErr: "exporters::otlp_http::metrics_endpoint has credentials"},
		{name: "the agent's remote_write, bearer over http", conf: map[string]any{"exporters": map[string]any{"remote_write": map[string]any{"http": map[string]any{
			"endpoint": "http://mimir.example.com/api/v1/push", "auth": map[string]any{"authenticator": "bearertokenauth/remote_write"},
		}}}}, wantErr: "exporters::remote_write sends credentials in plain text"},
		{name: "the agent's remote_write, password in the URL", conf: map[string]any{"exporters": map[string]any{"remote_write": map[string]any{"http": map[string]any{
			"endpoint": "https://fleet:s3cret@mimir.example.com/api/v1/push",
		}}}}, wantErr: "exporters::remote_write::endpoint has credentials"},
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
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}
