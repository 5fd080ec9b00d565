//go:build e2e

package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// selfSignedCert writes a certificate for 127.0.0.1 and its key; the certificate is its
// own CA.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "otelcol-gpu e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	mustWrite(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	mustWrite(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}

// TestDCGMCompatibleScrapeEndpointWithTLSAndBasicAuth: with the scrape overlays the agent
// serves dcgm-exporter's series on a /metrics endpoint behind TLS and basic auth (bcrypt
// users, as dcgm-exporter's --web-config-file); a real Prometheus scrape job with
// scheme https, tls_config and basic_auth stores them under its own job and instance, with
// its own up; without or with wrong credentials, or without TLS, the endpoint refuses.
func TestDCGMCompatibleScrapeEndpointWithTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := selfSignedCert(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("scrape-secret"), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	mustWrite(t, htpasswd, "# scrapers\nprometheus:"+string(hash)+"\n")
	listen := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))

	p := prom.Start(t, fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: nvidia-dcgm-exporter
    scheme: https
    tls_config: {ca_file: %s}
    basic_auth: {username: prometheus, password: scrape-secret}
    static_configs: [{targets: ["%s"]}]
`, certFile, listen))
	node := agentNode{
		overlays: []string{"dcgm-compat.yaml", "dcgm-compat-scrape.yaml", "dcgm-compat-scrape-secure.yaml"},
		env: []string{"OTELCOL_GPU_DCGM_LISTEN=" + listen, "OTELCOL_GPU_DCGM_TLS_CERT=" + certFile,
			"OTELCOL_GPU_DCGM_TLS_KEY=" + keyFile, "OTELCOL_GPU_DCGM_HTPASSWD=" + htpasswd},
	}
	startAgentOn(t, p, "e2e-dcgm-scrape", "dgxh100", "steady-training", node)

	s := answers(t, p, `DCGM_FI_DEV_GPU_UTIL{job="nvidia-dcgm-exporter",instance="`+listen+`"}`, 8, 60*time.Second)
	for _, x := range s {
		if x.Labels["Hostname"] != "e2e-dcgm-scrape" || x.Labels["exported_job"] != "" || x.Labels["exported_instance"] != "" {
			t.Errorf("scraped series %v: want the scrape's job and instance only", x.Labels)
		}
	}
	answers(t, p, `up{job="nvidia-dcgm-exporter"} == 1`, 1, 60*time.Second)
	answers(t, p, `DCGM_FI_DEV_FB_USED{job="nvidia-dcgm-exporter"} / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.5`, 8, 60*time.Second)

	pool := x509.NewCertPool()
	ca, err := os.ReadFile(certFile)
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("CA: %v", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(url, user, password string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	for _, c := range []struct {
		what, user, password string
		want                 int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"a wrong password", "prometheus", "guess", http.StatusUnauthorized},
		{"an unknown user", "admin", "scrape-secret", http.StatusUnauthorized},
		{"the right credentials", "prometheus", "scrape-secret", http.StatusOK},
	} {
		code, body, err := get("https://"+listen+"/metrics", c.user, c.password)
		if err != nil || code != c.want {
			t.Errorf("%s: HTTP %d (%v), want %d", c.what, code, err, c.want)
		}
		if code == http.StatusOK && !strings.Contains(body, "DCGM_FI_DEV_GPU_UTIL{") {
			t.Errorf("%s: /metrics lacks DCGM_FI_DEV_GPU_UTIL", c.what)
		}
	}
	if code, _, err := get("http://"+listen+"/metrics", "prometheus", "scrape-secret"); err == nil && code == http.StatusOK {
		t.Error("the endpoint answers plain HTTP")
	}
}
