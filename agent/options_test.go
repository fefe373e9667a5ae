package agent

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func validOptions() Options {
	o := NewOptions()
	o.Reporter.Spoke, o.Reporter.HubURL, o.Reporter.KeyFile = "staging-1", "https://hub.example.com", "/k"
	return o
}

func TestValidate_certRotationNeedsAMountAndADNSName(t *testing.T) {
	g := NewWithT(t)
	o := validOptions()
	g.Expect(o.Validate()).To(Succeed())

	o.Webhook.CertRotation = true
	g.Expect(o.Validate()).To(MatchError(ContainSubstring("--webhook-cert-rotation needs --webhook-cert-dir")))
	o.Webhook.CertDir = "/etc/tugboat/webhook-tls"
	g.Expect(o.Validate()).To(Succeed())

	o.Webhook.URLHost = "127.0.0.1"
	g.Expect(o.Validate()).To(MatchError(ContainSubstring("--webhook-url-host 127.0.0.1 is an IP address")))
	o.Webhook.URLHost = "localhost"
	g.Expect(o.Validate()).To(Succeed())

	o.Webhook.CertSecretName = ""
	g.Expect(o.Validate()).To(MatchError(ContainSubstring("needs --webhook-cert-secret")))

	// Without webhooks, rotation has nothing to do and is not checked.
	o.Webhook.Disabled = true
	g.Expect(o.Validate()).To(Succeed())
}

func TestValidate_backfillInterval(t *testing.T) {
	g := NewWithT(t)
	o := validOptions()
	o.BackfillInterval = 0
	g.Expect(o.Validate()).To(Succeed(), "zero: at start only")
	o.BackfillInterval = -1
	g.Expect(o.Validate()).To(MatchError(ContainSubstring("--backfill-interval must not be negative")))
}

func TestValidate_helmReleaseDiscoveryInterval(t *testing.T) {
	g := NewWithT(t)
	o := validOptions()
	g.Expect(o.HelmReleaseDiscoveryInterval).To(Equal(time.Minute))
	o.HelmReleaseDiscoveryInterval = 0
	g.Expect(o.Validate()).To(Succeed(), "0 checks at start only")
	o.HelmReleaseDiscoveryInterval = -time.Second
	g.Expect(o.Validate()).To(MatchError(ContainSubstring("--helmrelease-discovery-interval must not be negative")))
}
