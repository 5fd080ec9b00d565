package main

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parse(t *testing.T, env map[string]string, args ...string) (options, error) {
	t.Helper()
	return parseOptions(args, func(k string) string { return env[k] }, testNow, io.Discard)
}

func TestPeriod(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, c := range []struct {
		args       []string
		start, end string
		clamped    bool
	}{
		{nil, "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", false}, // the previous calendar month
		{[]string{"--month", "2026-02"}, "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", false},
		{[]string{"--start", "2026-11-15", "--end", "2026-11-16"}, "2026-11-15T00:00:00Z", "2026-11-16T00:00:00Z", false},
		{[]string{"--start", "2026-12-01T08:00+02:00", "--end", "2026-12-01T09:30:00Z"}, "2026-12-01T06:00:00Z", "2026-12-01T09:30:00Z", false},
		{[]string{"--start", "2026-12-07T10:00"}, "2026-12-07T10:00:00Z", "2026-12-07T12:00:00Z", false}, // until now
		{[]string{"--month", "2026-12"}, "2026-12-01T00:00:00Z", "2026-12-07T12:00:00Z", true},           // month to date
		{[]string{"--start", "2026-12-07T11:00:00+01:00", "--end", "2026-12-07 11:00"}, "2026-12-07T10:00:00Z", "2026-12-07T11:00:00Z", false},
	} {
		o, err := parse(t, nil, c.args...)
		require.NoError(t, err, "%v", c.args)
		assert.Equal(t, utc(c.start), o.Start, "%v", c.args)
		assert.Equal(t, utc(c.end), o.End, "%v", c.args)
		assert.Equal(t, c.clamped, o.EndClamped, "%v", c.args)
	}
	for _, args := range [][]string{
		{"--end", "2026-11-01"},
		{"--month", "2026-11", "--start", "2026-11-01"},
		{"--month", "November"},
		{"--start", "2026-11-01T00:00:30Z", "--end", "2026-11-02"}, // not a whole minute
		{"--start", "2026-11-02", "--end", "2026-11-01"},
		{"--start", "2027-01-01"}, // after now
		{"--start", "yesterday"},
	} {
		_, err := parse(t, nil, args...)
		assert.Error(t, err, "%v", args)
	}
}

func TestFlags(t *testing.T) {
	o, err := parse(t, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"namespace", "workload", "job"}, o.Levels)
	assert.Equal(t, "csv", o.Format)
	assert.Equal(t, "-", o.Out)

	o, err = parse(t, nil, "--by", "job,namespace")
	require.NoError(t, err)
	assert.Equal(t, []string{"namespace", "job"}, o.Levels)

	for _, args := range [][]string{
		{"--by", "pod"},
		{"--format", "xlsx"},
		{"--query-span", "90s"},
		{"--parallel", "0"},
		{"--prometheus", "prometheus:9090"},
		{"extra"},
		{"--cert-file", "c.pem"},
	} {
		_, err := parse(t, nil, args...)
		assert.Error(t, err, "%v", args)
	}
}

// Credentials: from files or the environment, never a flag's value; never in the URL;
// never over plain text or unverified TLS, unless OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS.
func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))

	for _, c := range []struct {
		env  map[string]string
		args []string
		want string // "" accepted, else part of the error
	}{
		{nil, []string{"--prometheus", "https://prom.example", "--bearer-token-file", token}, ""},
		{map[string]string{envBearerToken: "s3cret"}, []string{"--prometheus", "https://prom.example"}, ""},
		{map[string]string{envPassword: "s3cret"}, []string{"--prometheus", "https://prom.example", "--basic-auth-user", "finance"}, ""},
		{nil, []string{"--prometheus", "https://prom.example", "--basic-auth-user", "finance", "--basic-auth-password-file", token}, ""},
		{nil, []string{"--prometheus", "http://prom.example", "--header", "X-Scope-OrgID: team-a"}, ""},
		{map[string]string{"OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS": "true"}, []string{"--prometheus", "http://127.0.0.1:9090", "--bearer-token-file", token}, ""},

		{nil, []string{"--prometheus", "http://prom.example", "--bearer-token-file", token}, "plain text to prom.example"},
		{map[string]string{envPassword: "s3cret"}, []string{"--prometheus", "http://prom.example", "--basic-auth-user", "finance"}, "plain text"},
		{nil, []string{"--prometheus", "https://prom.example", "--insecure-skip-verify", "--bearer-token-file", token}, "does not verify prom.example"},
		{nil, []string{"--prometheus", "https://finance:s3cret@prom.example"}, "credentials in its URL"},
		{nil, []string{"--prometheus", "https://prom.example/?access_token=s3cret"}, "secret in its query"},
		{nil, []string{"--prometheus", "https://prom.example", "--header", "Authorization: Bearer s3cret"}, "--header Authorization carries a credential"},
		{nil, []string{"--prometheus", "https://prom.example", "--basic-auth-user", "finance"}, "a password is never given as a flag"},
		{map[string]string{envPassword: "s3cret"}, []string{"--prometheus", "https://prom.example"}, "without --basic-auth-user"},
		{map[string]string{envBearerToken: "s3cret"}, []string{"--prometheus", "https://prom.example", "--bearer-token-file", token}, "set one"},
		{map[string]string{envBearerToken: "s3cret"}, []string{"--prometheus", "https://prom.example", "--http-config", token}, "use one or the other"},
	} {
		_, err := parse(t, c.env, c.args...)
		if c.want == "" {
			assert.NoError(t, err, "%v", c.args)
			continue
		}
		if assert.Error(t, err, "%v", c.args) {
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "s3cret", "an error never repeats a secret")
		}
	}
}

// Over TLS with a CA file and basic auth from the environment, and with --http-config
// (client certificate, bearer token file): what reaches Prometheus.
func TestTLSAndAuth(t *testing.T) {
	f := fleet()
	srv := httptest.NewUnstartedServer(f)
	srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted handshake below
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))

	// Without the CA: the server is not trusted.
	code, _, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "certificate")

	code, _, errOut = run(t, map[string]string{envPassword: "s3cret"}, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z",
		"--ca-file", ca, "--basic-auth-user", "finance", "--header", "X-Scope-OrgID: team-a")
	require.Equal(t, 0, code, errOut)
	h := f.headers[len(f.headers)-1]
	assert.Equal(t, "Basic ZmluYW5jZTpzM2NyZXQ=", h.Get("Authorization")) // finance:s3cret
	assert.Equal(t, "team-a", h.Get("X-Scope-OrgID"))

	// --http-config: Prometheus's own client configuration, secrets in files.
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	cfg := filepath.Join(dir, "http.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("authorization:\n  credentials_file: token\ntls_config:\n  ca_file: ca.pem\n"), 0o600))
	code, _, errOut = run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--http-config", cfg)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "Bearer s3cret", f.headers[len(f.headers)-1].Get("Authorization"))

	// The same configuration towards http://: refused before anything is sent.
	n := len(f.queries)
	code, _, errOut = run(t, nil, "--prometheus", strings.Replace(srv.URL, "https", "http", 1), "--http-config", cfg)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "plain text")
	assert.Len(t, f.queries, n)
}
