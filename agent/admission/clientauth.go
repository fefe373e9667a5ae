package admission

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Client authentication of the webhook server (issue 12, Low 4).
//
// The API server can present a client certificate to webhooks: its
// --admission-control-config-file names a WebhookAdmissionConfiguration
// whose kubeConfigFile holds, for the webhook's host
// (<service>.<namespace>.svc[:port]), a client-certificate and client-key.
// Where that is configured, ServerOptions.ClientCAFile makes the server
// require a certificate signed by that CA (and, with ClientNames, one whose
// subject common name or DNS name is listed) before it reads a request.
//
// Where it is not (most managed clusters do not let the API server's
// admission configuration be changed), the server answers any client that
// reaches it over TLS. The trade-off: the mutating webhook only adds the
// tugboat.dev/release labels that an object's Helm annotations or owner
// already imply, and the observing webhooks never deny, so a forged review
// can at most make the agent record an ownership it would have learned
// from the informers; a NetworkPolicy admitting only the control plane to
// the webhook port narrows who can try.

// clientTLS returns the server's client-certificate settings for cfg:
// unchanged when no client CA is configured.
func (o ServerOptions) clientTLS(cfg *tls.Config) error {
	if o.ClientCAFile == "" {
		if len(o.ClientNames) > 0 {
			return errors.New("webhook server: client names need a client CA file")
		}
		return nil
	}
	pem, err := os.ReadFile(o.ClientCAFile)
	if err != nil {
		return fmt.Errorf("webhook server: reading the client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("webhook server: client CA file %s holds no PEM certificate", o.ClientCAFile)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	if names := o.ClientNames; len(names) > 0 {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no client certificate")
			}
			leaf := cs.PeerCertificates[0]
			if slices.Contains(names, leaf.Subject.CommonName) || slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(names, n) }) {
				return nil
			}
			return fmt.Errorf("client certificate %q is not one of the allowed webhook clients", leaf.Subject.CommonName)
		}
	}
	return nil
}
