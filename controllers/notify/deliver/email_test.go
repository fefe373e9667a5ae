package deliver_test

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/multipart"
	netmail "net/mail"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
)

// plainText returns the subject and the text/plain part of a received
// message, decoded as a mail client would.
func plainText(g Gomega, data []byte) (string, string) {
	m, err := netmail.ReadMessage(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mt).To(HavePrefix("multipart/"))
	var text string
	var walk func(r *multipart.Reader)
	walk = func(r *multipart.Reader) {
		for {
			p, err := r.NextPart()
			if err == io.EOF {
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			pt, pp, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
			switch {
			case strings.HasPrefix(pt, "multipart/"):
				walk(multipart.NewReader(p, pp["boundary"]))
			case pt == "text/plain":
				b, _ := io.ReadAll(p)
				text = string(b)
			}
		}
	}
	walk(multipart.NewReader(m.Body, params["boundary"]))
	return subject, text
}

// TestDeliver_emailSummaryOnceAfterCompletion sends the email summary of a
// promotion through a real SMTP server (STARTTLS with a private CA, AUTH
// PLAIN): nothing while it runs, one message once it completes, holding
// the timeline across the target with the events its agent reported. The
// hub was down when the promotion completed (killed before sending): the
// restarted hub sends it, once, and a further restart sends nothing.
func TestDeliver_emailSummaryOnceAfterCompletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "notify-email"
	ca := notifytest.NewTestCA(t)
	ms := notifytest.StartMailServer(t, ca.ServerTLS(), true)
	fixture(t, ns, tugboatv1alpha1.Notifier{
		Name: "mail", Type: tugboatv1alpha1.NotifierEmail,
		Email: &tugboatv1alpha1.EmailNotifier{Server: ms.Addr, From: "tugboat@example.com", To: []string{"releases@example.com"},
			SecretRef: &tugboatv1alpha1.LocalSecretReference{Name: "mail"}},
	})
	must(t, cluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mail"}, Data: map[string][]byte{
		"username": []byte(notifytest.MailUser), "password": []byte(notifytest.MailPassword), "ca.crt": ca.PEM,
	}}))
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName("prod-1", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "prod-1", Namespace: "apps", Release: "web"},
	}
	must(t, cluster.Client.Create(ctx, rh))
	stop := startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		now := metav1.Now()
		s.Phase, s.StartedAt = tugboatv1alpha1.PromotionVerifying, &now
		s.StrategyResult = &tugboatv1alpha1.StrategyResult{URL: "https://git.example.com/fleet/pulls/9", Message: "opened pull request #9"}
	})
	setCurrent(g, rh, 5, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Consistently(ms.Messages, 2*time.Second, 100*time.Millisecond).Should(BeEmpty(), "an email before completion")

	stop() // the hub goes down before the promotion completes
	now := metav1.Now()
	setTarget(g, ns, pr.Name, "prod-1", "apps", "web", tugboatv1alpha1.PromotionTargetStatus{Version: "1.4.0", Revision: 5,
		Health: tugboatv1alpha1.HealthCurrent, Done: true, LastTransitionTime: &now})
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Phase, s.CompletedAt = tugboatv1alpha1.PromotionSucceeded, &now
		s.Conditions = ready(metav1.ConditionTrue, tugboatv1alpha1.SucceededReason, "every target of production runs 1.4.0, healthy")
	})
	stop = startDeliverer(t, fastOptions())
	g.Eventually(ms.Messages, 30*time.Second, 100*time.Millisecond).Should(HaveLen(1))
	msg := ms.Messages()[0]
	g.Expect(msg.TLS).To(BeTrue())
	g.Expect(msg.User).To(Equal(notifytest.MailUser))
	subject, text := plainText(g, msg.Data)
	g.Expect(subject).To(ContainSubstring("1.4.0"))
	g.Expect(subject).To(ContainSubstring("production"))
	for _, want := range []string{
		"created, requested by auto",
		"strategy notification started",
		"https://git.example.com/fleet/pulls/9",
		"revision 5: chart web 1.4.0 deployed",
		"Created Pod/web-1: Pod web-1 created",
		"runs 1.4.0, Current",
		"Succeeded: every target of production runs 1.4.0, healthy",
	} {
		g.Expect(text).To(ContainSubstring(want))
	}
	stop()
	startDeliverer(t, fastOptions())
	g.Consistently(ms.Messages, 3*time.Second, 100*time.Millisecond).Should(HaveLen(1), "the summary was sent again after a restart")
}
