package admission_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"tugboat.dev/tugboat/agent/admission"
	"tugboat.dev/tugboat/agent/ownership"
)

// testCA is a CA that signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client returns a TLS client certificate with common name cn.
func (ca *testCA) client(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startServer runs a webhook server with opts until the test ends and
// returns it once it serves.
func startServer(t *testing.T, opts admission.ServerOptions) *admission.Server {
	t.Helper()
	m, err := admission.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	opts.BindAddress = "127.0.0.1:0"
	opts.Webhooks = &admission.Webhooks{Index: ownership.NewIndex(0), Metrics: m}
	srv, err := admission.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	NewWithT(t).Eventually(srv.Serving()).WithTimeout(10 * time.Second).Should(BeClosed())
	return srv
}

// reviewFrom posts an (empty) review to the server as a client with cert
// (none when nil) and returns the status code, or the error.
func reviewFrom(srv *admission.Server, caBundle []byte, cert *tls.Certificate) (int, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caBundle)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	resp, err := c.Post(srv.URL()+admission.PathValidateReleaseSecrets, "application/json", nil)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// Issue 12, Low 4: with a client CA configured, the webhook server serves
// only clients that present a certificate it signed (the API server's),
// and with client names, only those names.
func TestServer_requiresTheAPIServersClientCertificateWhereConfigured(t *testing.T) {
	g := NewWithT(t)
	apiServerCA, otherCA := newTestCA(t, "apiserver-client-ca"), newTestCA(t, "someone-else")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	g.Expect(os.WriteFile(caFile, apiServerCA.pem, 0o600)).To(Succeed())
	srv := startServer(t, admission.ServerOptions{ClientCAFile: caFile, ClientNames: []string{"kube-apiserver-webhook-client"}})

	good := apiServerCA.client(t, "kube-apiserver-webhook-client")
	code, err := reviewFrom(srv, srv.CABundle(), &good)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusBadRequest), "served: an empty review is a bad request")

	_, err = reviewFrom(srv, srv.CABundle(), nil)
	g.Expect(err).To(MatchError(ContainSubstring("certificate required")), "no client certificate")
	forged := otherCA.client(t, "kube-apiserver-webhook-client")
	_, err = reviewFrom(srv, srv.CABundle(), &forged)
	g.Expect(err).To(HaveOccurred(), "a certificate from another CA")
	wrongName := apiServerCA.client(t, "some-pod")
	_, err = reviewFrom(srv, srv.CABundle(), &wrongName)
	g.Expect(err).To(HaveOccurred(), "a certificate from the CA with a name not allowed")
}

// Without a client CA (the default, where the API server's admission
// configuration cannot be changed), any TLS client is served: the
// documented trade-off.
func TestServer_servesAnyClientWithoutAClientCA(t *testing.T) {
	g := NewWithT(t)
	srv := startServer(t, admission.ServerOptions{})
	code, err := reviewFrom(srv, srv.CABundle(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusBadRequest))

	_, err = admission.NewServer(admission.ServerOptions{ClientCAFile: "/nonexistent/ca.crt", Webhooks: &admission.Webhooks{Index: ownership.NewIndex(0)}})
	g.Expect(err).To(MatchError(ContainSubstring("reading the client CA file")))
	_, err = admission.NewServer(admission.ServerOptions{ClientNames: []string{"x"}, Webhooks: &admission.Webhooks{Index: ownership.NewIndex(0)}})
	g.Expect(err).To(MatchError(ContainSubstring("client names need a client CA file")))
}
