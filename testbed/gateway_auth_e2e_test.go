//go:build e2e

package testbed

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/agentsim"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// gatewayAuth is the key material of a gateway deployment, as deploy/README.md has it
// issued: a CA, the gateway's certificate (for 127.0.0.1 here) and the agents' token.
type gatewayAuth struct {
	caFile, certFile, keyFile string
	// tokenFile is what the gateway accepts (OTELCOL_GPU_GATEWAY_TOKEN_FILE); the agents
	// read their own copy, agentTokenFile.
	tokenFile, agentTokenFile string
	token                     string
	caPEM                     []byte
	// extraEnv is added to the gateway's environment (an overlay's settings).
	extraEnv []string
}

func newGatewayAuth(t testing.TB) *gatewayAuth {
	t.Helper()
	dir := t.TempDir()
	a := &gatewayAuth{
		caFile:         filepath.Join(dir, "ca.crt"),
		certFile:       filepath.Join(dir, "tls.crt"),
		keyFile:        filepath.Join(dir, "tls.key"),
		tokenFile:      filepath.Join(dir, "accepted-tokens"),
		agentTokenFile: filepath.Join(dir, "agent-token"),
		token:          randomToken(t),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "otelcol-gpu gateway test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "otelcol-gpu-gateway"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	a.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for path, data := range map[string][]byte{
		a.caFile:         a.caPEM,
		a.certFile:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		a.keyFile:        pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		a.tokenFile:      []byte(a.token + "\n"),
		a.agentTokenFile: []byte(a.token + "\n"),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func randomToken(t testing.TB) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// gatewayEnv is what the gateway's pod sets: its certificate and the accepted tokens.
func (a *gatewayAuth) gatewayEnv() []string {
	return append([]string{
		"OTELCOL_GPU_TLS_CERT_FILE=" + a.certFile,
		"OTELCOL_GPU_TLS_KEY_FILE=" + a.keyFile,
		"OTELCOL_GPU_GATEWAY_TOKEN_FILE=" + a.tokenFile,
	}, a.extraEnv...)
}

// agentEnv is what an agent's pod sets: the CA to verify the gateway, and its token.
func (a *gatewayAuth) agentEnv() []string {
	return []string{
		"OTELCOL_GPU_GATEWAY_CA_FILE=" + a.caFile,
		"OTELCOL_GPU_GATEWAY_TOKEN_FILE=" + a.agentTokenFile,
	}
}

func (a *gatewayAuth) tlsConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.caPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// dialOptions reach the gateway over TLS presenting token ("" presents none).
func (a *gatewayAuth) dialOptions(token string) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(a.tlsConfig()))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return opts
}

// bearer is a gRPC per-RPC credential: "authorization: Bearer <token>".
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// startGateway runs configs/gateway.yaml as shipped, with a's certificate and token, remote-
// writing to rwURL, and returns its OTLP address.
func startGateway(t testing.TB, rwURL string, a *gatewayAuth, configs []string, sets ...string) (string, *proc.Process) {
	t.Helper()
	otlp, _, gw := startGatewayWithTelemetry(t, rwURL, a, configs, sets...)
	return otlp, gw
}

// startGatewayWithTelemetry is startGateway that also returns the address of the
// gateway's own metrics (host:port, /metrics).
func startGatewayWithTelemetry(t testing.TB, rwURL string, a *gatewayAuth, configs []string, sets ...string) (string, string, *proc.Process) {
	t.Helper()
	otlp := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	health := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	telemetryPort := proc.FreePort(t)
	env := append([]string{
		"PROMETHEUS_REMOTE_WRITE_URL=" + rwURL,
		"OTELCOL_GPU_OTLP_ENDPOINT=" + otlp,
		"OTELCOL_GPU_WAL_DIR=" + t.TempDir(),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
		fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", telemetryPort),
	}, a.gatewayEnv()...)
	if configs == nil {
		configs = []string{filepath.Join(proc.RepoRoot(), "configs", "gateway.yaml")}
	}
	gw := proc.Collector(t, "gateway", env, configs, health, sets...)
	return otlp, fmt.Sprintf("127.0.0.1:%d", telemetryPort), gw
}

// probe is one series named name from host, value 1 (the gateway passes only names of
// the contract, e.g. nvidia.gpu.throttled).
func probe(host, name string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", host)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetDoubleValue(1)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	return md
}

// export sends md over a new connection with opts and returns the gRPC status code.
func export(t *testing.T, addr string, md pmetric.Metrics, opts ...grpc.DialOption) codes.Code {
	t.Helper()
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pmetricotlp.NewGRPCClient(cc).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
	return status.Code(err)
}

// TestGatewayRefusesUnauthenticatedAgents runs configs/gateway.yaml as shipped and sends it
// what a pod elsewhere in the cluster could: plain text, TLS without a token, TLS with a
// wrong token. Each is refused and none of it reaches Prometheus; an agent with the token
// gets through. Among what an authenticated client sends, only our metric names and
// attribute keys pass, with values cut to 256 characters. Rotating the token file takes
// effect without a restart: the new token is accepted, the old one refused once removed.
func TestGatewayRefusesUnauthenticatedAgents(t *testing.T) {
	p := prom.Start(t, "")
	a := newGatewayAuth(t)
	otlp, _ := startGateway(t, p.RemoteWriteURL(), a, nil, "processors::batch::timeout=1s")

	refused := []struct {
		host string
		opts []grpc.DialOption
		want codes.Code
	}{
		{"plaintext", []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, codes.Unavailable},
		{"tls-no-token", a.dialOptions(""), codes.Unauthenticated},
		{"tls-wrong-token", a.dialOptions(randomToken(t)), codes.Unauthenticated},
		{"tls-token-prefix", a.dialOptions(a.token[:10]), codes.Unauthenticated},
	}
	for _, c := range refused {
		if got := export(t, otlp, probe(c.host, "nvidia.gpu.throttled"), c.opts...); got != c.want {
			t.Errorf("%s: gRPC code %s, want %s", c.host, got, c.want)
		}
	}

	// Authenticated, but not what an agent produces.
	if got := export(t, otlp, probe("foreign-name", "forged.gpu.utilization"), a.dialOptions(a.token)...); got != codes.OK {
		t.Errorf("foreign metric name: %s, want OK (accepted, then dropped)", got)
	}
	long := probe("bounded", "nvidia.gpu.throttled")
	res := long.ResourceMetrics().At(0).Resource().Attributes()
	res.PutStr("k8s.pod.name", strings.Repeat("p", 5000))
	dpAttrs := long.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Attributes()
	dpAttrs.PutStr("nvidia.gpu.engine", strings.Repeat("e", 5000))
	dpAttrs.PutStr("tenant_controlled", "x")
	if got := export(t, otlp, long, a.dialOptions(a.token)...); got != codes.OK {
		t.Errorf("long attribute values: %s, want OK", got)
	}
	if got := export(t, otlp, probe("valid", "nvidia.gpu.throttled"), a.dialOptions(a.token)...); got != codes.OK {
		t.Fatalf("the agents' token: gRPC code %s, want OK", got)
	}

	prom.Eventually(t, 60*time.Second, "the authenticated probes in Prometheus", func() error {
		got, err := p.Query(`{__name__=~"nvidia_gpu_throttled.*"}`)
		if err != nil {
			return err
		}
		hosts := map[string]map[string]string{}
		for _, s := range got {
			hosts[s.Labels["host_name"]] = s.Labels
		}
		if hosts["valid"] == nil || hosts["bounded"] == nil {
			return fmt.Errorf("hosts %v, want valid and bounded", keysOf(hosts))
		}
		for _, c := range refused {
			if hosts[c.host] != nil {
				t.Errorf("%s: a refused client's series reached Prometheus", c.host)
			}
		}
		b := hosts["bounded"]
		if n := len(b["k8s_pod_name"]); n != 256 {
			t.Errorf("k8s_pod_name is %d characters, want 256 (cut)", n)
		}
		if n := len(b["nvidia_gpu_engine"]); n != 256 {
			t.Errorf("nvidia_gpu_engine is %d characters, want 256 (cut)", n)
		}
		if _, ok := b["tenant_controlled"]; ok {
			t.Error("a point attribute outside our namespaces became a label")
		}
		return nil
	})
	if got, err := p.Query(`{__name__=~"forged.*"}`); err != nil || len(got) != 0 {
		t.Errorf("foreign metric names in Prometheus: %v (%v)", got, err)
	}

	// Rotation: the new token first joins the old one, then replaces it.
	newToken := randomToken(t)
	if err := os.WriteFile(a.tokenFile, []byte(newToken+"\n"+a.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prom.Eventually(t, 30*time.Second, "the new token accepted next to the old", func() error {
		if got := export(t, otlp, probe("rotated", "nvidia.gpu.throttled"), a.dialOptions(newToken)...); got != codes.OK {
			return fmt.Errorf("new token: %s", got)
		}
		if got := export(t, otlp, probe("valid", "nvidia.gpu.throttled"), a.dialOptions(a.token)...); got != codes.OK {
			return fmt.Errorf("old token during the rotation: %s", got)
		}
		return nil
	})
	if err := os.WriteFile(a.tokenFile, []byte(newToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prom.Eventually(t, 30*time.Second, "the old token refused once removed", func() error {
		if got := export(t, otlp, probe("valid", "nvidia.gpu.throttled"), a.dialOptions(a.token)...); got != codes.Unauthenticated {
			return fmt.Errorf("old token after the rotation: %s, want Unauthenticated", got)
		}
		return nil
	})
	if got := export(t, otlp, probe("rotated", "nvidia.gpu.throttled"), a.dialOptions(newToken)...); got != codes.OK {
		t.Errorf("new token after the rotation: %s", got)
	}
}

// TestGatewayMemoryBoundedUnderGzipBomb: an authenticated but broken (or hostile) client
// sends requests of a few hundred kilobytes of gzip that inflate to 256 MiB each, 16 at a
// time, three times over. The gateway refuses each at its 4 MiB message limit
// (RESOURCE_EXHAUSTED) without inflating the rest, its peak memory grows by far less than
// one inflated request would take, and it keeps serving agents.
func TestGatewayMemoryBoundedUnderGzipBomb(t *testing.T) {
	a := newGatewayAuth(t)
	// Nothing needs to arrive anywhere: a remote-write URL that refuses connections.
	otlp, gw := startGateway(t, fmt.Sprintf("http://127.0.0.1:%d/api/v1/write", proc.FreePort(t)), a, nil)

	const inflated = 256 << 20
	var zbuf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zbuf, gzip.BestCompression)
	if _, err := io.CopyN(zw, zeroReader{}, inflated); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	// A gRPC message: compressed flag, big-endian length, payload.
	frame := make([]byte, 5, 5+zbuf.Len())
	frame[0] = 1
	binary.BigEndian.PutUint32(frame[1:], uint32(zbuf.Len()))
	frame = append(frame, zbuf.Bytes()...)
	t.Logf("each request: %d bytes of gzip inflating to %d MiB", len(frame), inflated>>20)

	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: a.tlsConfig(), ForceAttemptHTTP2: true,
	}}
	send := func() (string, error) {
		req, err := http.NewRequest(http.MethodPost,
			"https://"+otlp+"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export", bytes.NewReader(frame))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Grpc-Encoding", "gzip")
		req.Header.Set("Te", "trailers")
		req.Header.Set("Authorization", "Bearer "+a.token)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if s := resp.Header.Get("Grpc-Status"); s != "" { // trailers-only response
			return s, nil
		}
		return resp.Trailer.Get("Grpc-Status"), nil
	}

	before, _ := gw.RSS()
	for round := range 3 {
		var wg sync.WaitGroup
		results := make([]string, 16)
		for i := range results {
			wg.Go(func() {
				s, err := send()
				if err != nil {
					s = "error: " + err.Error()
				}
				results[i] = s
			})
		}
		wg.Wait()
		for i, s := range results {
			if s != fmt.Sprint(int(codes.ResourceExhausted)) {
				t.Errorf("round %d request %d: grpc-status %q, want %d (RESOURCE_EXHAUSTED)", round, i, s, codes.ResourceExhausted)
			}
		}
	}
	peak, err := gw.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gateway RSS %d MiB before, peak %d MiB after 48 requests of 256 MiB inflated", before>>20, peak>>20)
	// One inflated request alone would be 256 MiB; 16 refused at 4 MiB are at most 64.
	if grown := peak - before; grown > 100<<20 {
		t.Errorf("gateway peak RSS grew by %d MiB: the gzip bombs were inflated (limit 100 MiB)", grown>>20)
	}
	if got := export(t, otlp, probe("after-bomb", "nvidia.gpu.throttled"), a.dialOptions(a.token)...); got != codes.OK {
		t.Errorf("an agent after the bombs: %s, want OK", got)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestGatewayForwardsEverythingAnAgentSends: the gateway's filters (metric names, attribute
// keys, value lengths) take nothing from what an agent really produces — one scrape of a
// simulated 8-GPU node through gpu_enrich, sent as the agent sends it, becomes exactly the
// series it would be without the gateway.
func TestGatewayForwardsEverythingAnAgentSends(t *testing.T) {
	p := prom.Start(t, "")
	a := newGatewayAuth(t)
	otlp, _ := startGateway(t, p.RemoteWriteURL(), a, nil, "processors::batch::timeout=1s")
	md, err := agentsim.Payload(context.Background(), "dgxh100", "shared-gpu", 3)
	if err != nil {
		t.Fatal(err)
	}
	md = agentsim.ForAgent(md, 7)
	promoted := []string{"host.name", "hw.*", "nvidia.*", "process.*", "k8s.*", "container.id", "slurm.*"}
	want := agentsim.Series(md, promoted)
	t.Logf("one scrape of 8 GPUs: %d series", want)
	if got := export(t, otlp, md, a.dialOptions(a.token)...); got != codes.OK {
		t.Fatalf("export: %s", got)
	}
	sel := fmt.Sprintf(`{host_name=%q}`, agentsim.HostName(7))
	prom.Eventually(t, 60*time.Second, "every series of the payload", func() error {
		got, err := p.Query("count(" + sel + ")")
		if err != nil {
			return err
		}
		if len(got) != 1 || int(got[0].Value) != want {
			return fmt.Errorf("%v series for %s, want %d", got, sel, want)
		}
		return nil
	})
}
