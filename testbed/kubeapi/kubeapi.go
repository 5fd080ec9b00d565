// Package kubeapi runs a real Kubernetes API server for tests: etcd and kube-apiserver, both
// built at pinned versions into the repository's bin/ by `make deps`, on loopback ports,
// started the way controller-runtime's envtest starts them. Only the API server runs: no
// scheduler, no controllers, no kubelet, so objects are stored and validated, admission and
// RBAC are enforced, and nothing else happens to them (a Deployment gets no ReplicaSet, a
// Pod is never scheduled).
//
// It is not internal: the deploy/test module applies the shipped manifests to it too.
//
//	s := kubeapi.Start(t)
//	s.Client.CoreV1().Pods("default").Create(...)      // as cluster admin
//	kubeconfig := s.ServiceAccountKubeconfig(t, "ns", "sa") // for a program under test
package kubeapi // import "github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// Server is a running kube-apiserver backed by its own etcd.
type Server struct {
	// URL is the API server's address, https://127.0.0.1:<port>.
	URL string
	// CAData is the PEM certificate of the CA that signed the serving certificate.
	CAData []byte
	// CAFile holds CAData.
	CAFile string
	// Issuer is the service-account issuer: the API server's own URL, so that its OIDC
	// discovery document (/.well-known/openid-configuration) and keys are reachable at
	// it, as https://kubernetes.default.svc.cluster.local is from a pod.
	Issuer string
	// Admin is a client configuration for a cluster administrator (group system:masters).
	Admin *rest.Config
	// Client is a clientset on Admin.
	Client kubernetes.Interface

	owner   testing.TB // the test that started it: processes live as long as it
	apiBin  string
	apiArgs []string
	api     *proc.Process
	etcd    *proc.Process
}

// readyTimeout bounds the start of etcd and of the API server; both take seconds.
const readyTimeout = 90 * time.Second

// Start runs etcd and kube-apiserver in a temporary directory and waits until the API
// server is ready. Both stop when the test ends. Missing binaries fail the test with a
// pointer to `make deps`.
func Start(t testing.TB) *Server {
	t.Helper()
	etcdBin := proc.BuiltTool(t, "etcd")
	apiBin := proc.BuiltTool(t, "kube-apiserver")
	dir := t.TempDir()

	pki, err := newPKI(dir)
	if err != nil {
		t.Fatalf("kubeapi: certificates: %v", err)
	}

	clientPort, peerPort := proc.FreePort(t), proc.FreePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcd := proc.Start(t, "etcd", nil, etcdBin,
		"--name=kubeapi",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubeapi="+peerURL,
		// A test's data need not survive a power cut; fsync on a busy disk costs seconds.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	etcd.WaitHTTP200(t, etcdURL+"/health", readyTimeout)

	port := proc.FreePort(t)
	s := &Server{
		URL:    "https://127.0.0.1:" + strconv.Itoa(port),
		CAData: pki.caPEM,
		CAFile: pki.caCert,
		owner:  t,
		apiBin: apiBin,
		etcd:   etcd,
	}
	s.Issuer = s.URL
	s.apiArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		// No controller manager keeps the kubernetes Service's endpoints, and a loopback
		// advertise address is refused by the default reconciler.
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--service-account-issuer=" + s.Issuer,
		"--service-account-key-file=" + pki.saPublic,
		"--service-account-signing-key-file=" + pki.saPrivate,
		"--authorization-mode=RBAC",
		// Pods are created without their namespace's "default" ServiceAccount, which only
		// the controller manager would create.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--profiling=false",
	}
	s.Admin = &rest.Config{
		Host:            s.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM, CertData: pki.adminCertPEM, KeyData: pki.adminKeyPEM},
		QPS:             1000,
		Burst:           2000,
		Timeout:         30 * time.Second,
	}
	s.Client, err = kubernetes.NewForConfig(s.Admin)
	if err != nil {
		t.Fatalf("kubeapi: client: %v", err)
	}
	s.startAPI(t, "kube-apiserver")
	return s
}

// startAPI starts kube-apiserver for the owner test (a restart from a subtest must not end
// with that subtest) and waits until it is ready, failing t otherwise.
func (s *Server) startAPI(t testing.TB, name string) {
	t.Helper()
	s.api = proc.Start(s.owner, name, nil, s.apiBin, s.apiArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var last error
	for {
		if exited, err := s.api.Exited(); exited {
			t.Fatalf("kubeapi: %s exited before it was ready: %v\n%s", name, err, tailOf(s.api.Output()))
		}
		// /readyz covers the bootstrap RBAC roles; the default namespace comes from the
		// API server's own system-namespaces controller a moment later.
		_, last = s.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if last == nil {
			_, last = s.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		}
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kubeapi: %s not ready within %s: %v\n%s", name, readyTimeout, last, tailOf(s.api.Output()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops the API server (SIGTERM); etcd and the stored objects stay, so Restart brings
// the same cluster back. For tests of clients that lose the API server.
func (s *Server) Stop() { s.api.Stop(30 * time.Second) }

// Restart starts the API server again on the same address and data, and waits until ready.
// It runs until the test that called Start ends, even when t is a subtest.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.startAPI(t, "kube-apiserver (restarted)")
}

// Pause freezes the API server (SIGSTOP): connections stay open and nothing answers, as
// with a hung or overloaded control plane. Resume undoes it.
func (s *Server) Pause() { s.api.Pause() }

// Resume lets a paused API server run again.
func (s *Server) Resume() { s.api.Resume() }

// Token returns a token for the ServiceAccount namespace/name (which must exist), issued by
// the API server's TokenRequest API the way the kubelet gets one for a pod. It is valid for
// an hour.
func (s *Server) Token(t testing.TB, namespace, name string) string {
	t.Helper()
	hour := int64(3600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := s.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubeapi: token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// PodToken returns a token for the ServiceAccount namespace/name bound to the pod
// namespace/pod, with audience, as the kubelet projects one into the pod's volume
// (serviceAccountToken with an audience): the API server writes the pod and its node
// (kubernetes.io.pod, kubernetes.io.node) into the claims. Valid for an hour.
func (s *Server) PodToken(t testing.TB, namespace, name, pod, audience string) string {
	t.Helper()
	hour := int64(3600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := s.Client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubeapi: pod %s/%s: %v", namespace, pod, err)
	}
	tr, err := s.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &hour,
			Audiences:         []string{audience},
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod, UID: p.UID},
		}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubeapi: token for ServiceAccount %s/%s bound to pod %s: %v", namespace, name, pod, err)
	}
	return tr.Status.Token
}

// ConfigForToken is a client configuration that authenticates with a bearer token (e.g.
// from Token), so the API server authorizes requests as that identity.
func (s *Server) ConfigForToken(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData},
		Timeout:         30 * time.Second,
		// Tests ask many questions in a row (e.g. an access review per verb and
		// resource); client-go's default of 5 per second would make that minutes.
		QPS:   1000,
		Burst: 2000,
	}
}

// WriteKubeconfig writes a kubeconfig file that reaches this API server with a bearer
// token, with namespace as its default, and returns its path (in a temporary directory).
func (s *Server) WriteKubeconfig(t testing.TB, token, namespace string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeapi"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.CAData}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubeapi"] = &clientcmdapi.Context{Cluster: "kubeapi", AuthInfo: "test", Namespace: namespace}
	cfg.CurrentContext = "kubeapi"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("kubeapi: writing kubeconfig: %v", err)
	}
	return path
}

// ServiceAccountKubeconfig creates the ServiceAccount namespace/name if it does not exist
// (and its namespace), then writes a kubeconfig with a token for it: what a program under
// test reads in place of the in-cluster credentials a pod would have.
func (s *Server) ServiceAccountKubeconfig(t testing.TB, namespace, name string) string {
	t.Helper()
	s.EnsureServiceAccount(t, namespace, name)
	return s.WriteKubeconfig(t, s.Token(t, namespace, name), namespace)
}

// EnsureServiceAccount creates the namespace and the ServiceAccount unless they exist.
func (s *Server) EnsureServiceAccount(t testing.TB, namespace, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("kubeapi: namespace %s: %v", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := s.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("kubeapi: ServiceAccount %s/%s: %v", namespace, name, err)
	}
}

func tailOf(s string) string {
	const n = 6000
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// pki is the key material of one API server, as files under its directory.
type pki struct {
	caCert, servingCert, servingKey, saPublic, saPrivate string
	caPEM, adminCertPEM, adminKeyPEM                     []byte
}

// newPKI makes a CA, a serving certificate for 127.0.0.1 and localhost, a client
// certificate for an administrator (group system:masters) and the service-account signing
// key pair.
func newPKI(dir string) (*pki, error) {
	p := &pki{
		caCert:      filepath.Join(dir, "ca.crt"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saPublic:    filepath.Join(dir, "sa.pub"),
		saPrivate:   filepath.Join(dir, "sa.key"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubeapi-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	issue := func(serial int64, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
	}
	servingPEM, servingKeyPEM, err := issue(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	})
	if err != nil {
		return nil, err
	}
	p.adminCertPEM, p.adminKeyPEM, err = issue(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "test-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPrivDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}

	for path, data := range map[string][]byte{
		p.caCert:      p.caPEM,
		p.servingCert: servingPEM,
		p.servingKey:  servingKeyPEM,
		p.saPrivate:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saPrivDER}),
		p.saPublic:    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}
