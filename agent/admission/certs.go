package admission

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
)

// CertBundle is a CA and a serving certificate it signed, PEM-encoded.
type CertBundle struct {
	// CACert is the CA certificate: the webhook configurations' caBundle.
	CACert []byte
	// Cert and Key are the serving certificate and its private key.
	Cert, Key []byte
}

// GenerateSelfSigned creates a fresh CA and a serving certificate for the
// DNS names and IP addresses, both valid for validity (default one year).
// It is for local and test mode; in a cluster, use AddCertRotator or
// mounted certificates.
func GenerateSelfSigned(dnsNames []string, ips []net.IP, validity time.Duration) (*CertBundle, error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, errors.New("serving certificate needs at least one DNS name or IP address")
	}
	if validity <= 0 {
		validity = 365 * 24 * time.Hour
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "tugboat-agent-webhook-ca", Organization: []string{"tugboat"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cn := "tugboat-agent-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"tugboat"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &CertBundle{
		CACert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// CertRotation configures in-cluster certificate rotation with
// open-policy-agent/cert-controller: the rotator keeps a CA and a serving
// certificate for the webhook Service in a Secret (which must exist, empty
// is fine) and injects the CA into the Registration's webhook
// configurations. It does not write files: mount the Secret at CertDir (the
// kubelet refreshes the files, and a Server with that CertDir reloads
// them).
type CertRotation struct {
	// SecretNamespace and SecretName locate the Secret holding the
	// certificates (usually the agent's namespace).
	SecretNamespace, SecretName string
	// ServiceNamespace and ServiceName name the webhook Service; the
	// serving certificate is for <name>.<namespace>.svc.
	ServiceNamespace, ServiceName string
	// ExtraDNSNames are further names the serving certificate is valid for
	// (e.g. the host of a URL registration, for an agent outside the
	// cluster).
	ExtraDNSNames []string
	// CertDir is where the Secret is mounted: the server's
	// ServerOptions.CertDir.
	CertDir string
	// Registration names the webhook configurations to inject the CA into.
	Registration Registration
}

// AddCertRotator adds a certificate rotator to mgr and returns a channel
// closed once the certificates are in CertDir and the CA is injected
// (create the Server after that, e.g. from a runnable that waits on it).
func AddCertRotator(mgr manager.Manager, opts CertRotation) (<-chan struct{}, error) {
	if opts.SecretNamespace == "" || opts.SecretName == "" || opts.ServiceName == "" || opts.CertDir == "" {
		return nil, errors.New("cert rotation needs a secret, a service and a cert dir")
	}
	if opts.ServiceNamespace == "" {
		opts.ServiceNamespace = opts.SecretNamespace
	}
	svc := opts.ServiceName + "." + opts.ServiceNamespace + ".svc"
	ready := make(chan struct{})
	name := opts.Registration.name()
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: opts.SecretNamespace, Name: opts.SecretName},
		CertDir:        opts.CertDir,
		CAName:         "tugboat-agent-webhook-ca",
		CAOrganization: "tugboat",
		DNSName:        svc,
		ExtraDNSNames:  append([]string{svc + ".cluster.local"}, opts.ExtraDNSNames...),
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: name, Type: rotator.Mutating},
			{Name: name, Type: rotator.Validating},
		},
		FieldOwner: opts.Registration.fieldOwner(),
	})
	if err != nil {
		return nil, err
	}
	return ready, nil
}
