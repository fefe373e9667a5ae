package agent

import (
	"net"

	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/agent/admission"
)

// The certificate rotator keeps the webhook certificates in a Secret of the
// agent's namespace and injects the CA into the webhook configurations.
// Its cache lists and watches the Secrets of that namespace; it updates only
// the certificate Secret (tugboat-agent-webhook-tls, --webhook-cert-secret).
// +kubebuilder:rbac:groups="",namespace=tugboat-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=tugboat-system,resources=secrets,resourceNames=tugboat-agent-webhook-tls,verbs=update

// addCertRotator adds the webhook certificate rotator to mgr (see
// WebhookOptions.CertRotation) and returns the channel it closes once the
// mounted certificates are valid.
func addCertRotator(mgr ctrl.Manager, opts Options) (<-chan struct{}, error) {
	w := opts.Webhook
	rot := admission.CertRotation{
		SecretNamespace:  w.AgentNamespace,
		SecretName:       w.CertSecretName,
		ServiceNamespace: w.ServiceNamespace,
		ServiceName:      w.ServiceName,
		CertDir:          w.CertDir,
		Registration:     admission.Registration{Name: w.Name},
	}
	if w.URLHost != "" && net.ParseIP(w.URLHost) == nil {
		rot.ExtraDNSNames = []string{w.URLHost}
	}
	return admission.AddCertRotator(mgr, rot)
}
