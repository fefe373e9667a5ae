package email_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/email"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
)

const (
	user     = notifytest.MailUser
	password = notifytest.MailPassword
)

func newNotifier(t *testing.T, o email.Options) *email.Notifier {
	t.Helper()
	if o.From == "" {
		o.From = "tugboat <tugboat@example.com>"
	}
	if len(o.To) == 0 {
		o.To = []string{"platform@example.com", "Release Team <releases@example.com>"}
	}
	o.Timeout = 10 * time.Second
	n, err := email.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// parsed is a received message, decoded as a mail client would.
type parsed struct {
	Header  netmail.Header
	Subject string
	Parts   map[string]string // content type → decoded body
}

func parse(g *WithT, data []byte) parsed {
	m, err := netmail.ReadMessage(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	g.Expect(err).NotTo(HaveOccurred())
	mediaType, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mediaType).To(Equal("multipart/alternative"))
	p := parsed{Header: m.Header, Subject: subject, Parts: map[string]string{}}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		ct, _, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
		g.Expect(err).NotTo(HaveOccurred())
		var r io.Reader = part
		switch part.Header.Get("Content-Transfer-Encoding") {
		case "quoted-printable":
			r = quotedprintable.NewReader(part)
		case "", "7bit", "8bit":
		default:
			g.Expect(part.Header.Get("Content-Transfer-Encoding")).To(BeEmpty(), "an unexpected encoding")
		}
		b, err := io.ReadAll(r)
		g.Expect(err).NotTo(HaveOccurred())
		p.Parts[ct] = string(b)
	}
	return p
}

func TestEmail_summaryOverSTARTTLSWithAuth(t *testing.T) {
	g := NewWithT(t)
	ca := notifytest.NewTestCA(t)
	ms := notifytest.StartMailServer(t, ca.ServerTLS(), true)
	e := newNotifier(t, email.Options{Server: ms.Addr, Username: user, Password: password, CA: ca.PEM})

	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded)
	n.Timeline = append(n.Timeline, notify.Step{Time: notifytest.Now, Source: "hub", Text: "note <script>alert(1)</script> & done"})
	n.Promotion.Preview = "Ready: 3 objects and 7 lines change (tugboat diff web-production-1.4.0)"
	n.Promotion.DashboardURL = "https://tugboat.example.com/ui/promotions/web-production-1.4.0"
	_, err := e.Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())

	msgs := ms.Messages()
	g.Expect(msgs).To(HaveLen(1), "one message")
	m := msgs[0]
	g.Expect(m.TLS).To(BeTrue(), "sent after STARTTLS")
	g.Expect(m.User).To(Equal(user), "authenticated")
	g.Expect(m.From).To(Equal("tugboat@example.com"))
	g.Expect(m.To).To(ConsistOf("platform@example.com", "releases@example.com"))

	p := parse(g, m.Data)
	g.Expect(p.Subject).To(Equal("[tugboat] web 1.4.0 → production: Succeeded"))
	g.Expect(p.Header.Get("X-Tugboat-Event")).To(Equal("PromotionSucceeded"))
	g.Expect(p.Header.Get("X-Tugboat-Notice")).To(Equal(notify.ID(n)))
	g.Expect(p.Header.Get("Message-Id")).To(Equal("<notice-" + notify.ID(n) + "@example.com>"))
	g.Expect(p.Parts).To(HaveKey("text/plain"))
	g.Expect(p.Parts).To(HaveKey("text/html"))

	text, html := p.Parts["text/plain"], p.Parts["text/html"]
	for _, s := range n.Timeline[:len(n.Timeline)-1] {
		g.Expect(text).To(ContainSubstring(notify.StepLine(s)))
		g.Expect(html).To(ContainSubstring(s.Text))
		g.Expect(html).To(ContainSubstring(s.Time.UTC().Format(notify.TimeLayout)))
	}
	for _, want := range []string{
		"prod-eu/apps/web: 1.4.0 revision 12, Current, done", "prod-us/apps/web: 1.4.0 revision 9, Current, done",
		"https://git.example.com/org/fleet/pulls/42", "Approve by alice@example.com (Kubernetes)", "Approve by U024BE7LH bob (Slack)",
	} {
		g.Expect(text).To(ContainSubstring(want))
		g.Expect(html).To(ContainSubstring(want))
	}
	g.Expect(text).To(ContainSubstring("note <script>alert(1)</script> & done"))
	g.Expect(html).NotTo(ContainSubstring("<script>"))
	g.Expect(html).To(ContainSubstring("note &lt;script&gt;alert(1)&lt;/script&gt; &amp; done"))
	g.Expect(html).To(ContainSubstring(`<a href="https://git.example.com/org/fleet/pulls/42">`))
	// The preview's summary, and the link to its page on the dashboard.
	g.Expect(text).To(ContainSubstring("Preview: Ready: 3 objects and 7 lines change"))
	g.Expect(text).To(ContainSubstring("Dashboard: https://tugboat.example.com/ui/promotions/web-production-1.4.0"))
	g.Expect(html).To(ContainSubstring(`<a href="https://tugboat.example.com/ui/promotions/web-production-1.4.0">`))
}

func TestEmail_loginWhenOnlyThatIsOffered(t *testing.T) {
	g := NewWithT(t)
	ca := notifytest.NewTestCA(t)
	ms := notifytest.StartMailServer(t, ca.ServerTLS(), true)
	ms.OfferLoginOnly()
	e := newNotifier(t, email.Options{Server: ms.Addr, Username: user, Password: password, CA: ca.PEM})
	_, err := e.Notify(context.Background(), notifytest.Deployment(tugboatv1alpha1.EventDeploymentHealthy), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ms.Messages()).To(HaveLen(1))
	g.Expect(ms.Messages()[0].User).To(Equal(user))
}

func TestEmail_badCredentialsArePermanent(t *testing.T) {
	g := NewWithT(t)
	ca := notifytest.NewTestCA(t)
	ms := notifytest.StartMailServer(t, ca.ServerTLS(), true)
	e := newNotifier(t, email.Options{Server: ms.Addr, Username: user, Password: "wrong", CA: ca.PEM})
	_, err := e.Notify(context.Background(), notifytest.Promotion(tugboatv1alpha1.EventPromotionFailed), "")
	g.Expect(err).To(HaveOccurred())
	g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring("wrong"), "the password is not in the error")
	g.Expect(ms.Messages()).To(BeEmpty())
}

func TestEmail_STARTTLSIsRequired(t *testing.T) {
	ctx := context.Background()
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded)

	t.Run("a server without STARTTLS is refused", func(t *testing.T) {
		g := NewWithT(t)
		ms := notifytest.StartMailServer(t, nil, true)
		e := newNotifier(t, email.Options{Server: ms.Addr, Username: user, Password: password})
		_, err := e.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
		g.Expect(err).To(MatchError(ContainSubstring("STARTTLS")))
		g.Expect(ms.Messages()).To(BeEmpty())
	})

	t.Run("unless insecureSkipTLS", func(t *testing.T) {
		g := NewWithT(t)
		ms := notifytest.StartMailServer(t, nil, true)
		e := newNotifier(t, email.Options{Server: ms.Addr, Username: user, Password: password, InsecureSkipTLS: true})
		_, err := e.Notify(ctx, n, "")
		g.Expect(err).NotTo(HaveOccurred())
		msgs := ms.Messages()
		g.Expect(msgs).To(HaveLen(1))
		g.Expect(msgs[0].TLS).To(BeFalse())
		g.Expect(msgs[0].User).To(Equal(user))
	})

	t.Run("an untrusted certificate is refused", func(t *testing.T) {
		g := NewWithT(t)
		ms := notifytest.StartMailServer(t, notifytest.NewTestCA(t).ServerTLS(), true)
		other := notifytest.NewTestCA(t)
		e := newNotifier(t, email.Options{Server: ms.Addr, Username: user, Password: password, CA: other.PEM})
		_, err := e.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
		g.Expect(ms.Messages()).To(BeEmpty())
	})
}

func TestEmail_replies(t *testing.T) {
	ctx := context.Background()
	n := notifytest.Deployment(tugboatv1alpha1.EventDeploymentFailed)
	ca := notifytest.NewTestCA(t)

	t.Run("4xx is retried", func(t *testing.T) {
		g := NewWithT(t)
		ms := notifytest.StartMailServer(t, ca.ServerTLS(), false)
		ms.SetRcptError(&smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"})
		e := newNotifier(t, email.Options{Server: ms.Addr, CA: ca.PEM})
		_, err := e.Notify(ctx, n, "")
		g.Expect(err).To(HaveOccurred())
		g.Expect(notify.IsPermanent(err)).To(BeFalse(), "%v", err)

		ms.SetRcptError(nil)
		_, err = e.Notify(ctx, n, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ms.Messages()).To(HaveLen(1))
	})

	t.Run("5xx is permanent", func(t *testing.T) {
		g := NewWithT(t)
		ms := notifytest.StartMailServer(t, ca.ServerTLS(), false)
		ms.SetRcptError(&smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"})
		e := newNotifier(t, email.Options{Server: ms.Addr, CA: ca.PEM})
		_, err := e.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
	})

	t.Run("the server's words in an error are bounded", func(t *testing.T) {
		g := NewWithT(t)
		ms := notifytest.StartMailServer(t, ca.ServerTLS(), false)
		ms.SetRcptError(&smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: strings.Repeat("internal data ", 300)})
		e := newNotifier(t, email.Options{Server: ms.Addr, CA: ca.PEM})
		_, err := e.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
		g.Expect(len(err.Error())).To(BeNumerically("<", 260), "a status holds at most 200 characters of what the server said: %v", err)
		g.Expect(err.Error()).To(HavePrefix("email via " + ms.Addr + ": "))
	})

	t.Run("unreachable is retried", func(t *testing.T) {
		g := NewWithT(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		g.Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String()
		g.Expect(l.Close()).To(Succeed())
		e := newNotifier(t, email.Options{Server: addr, CA: ca.PEM})
		_, err = e.Notify(ctx, n, "")
		g.Expect(err).To(HaveOccurred())
		g.Expect(notify.IsPermanent(err)).To(BeFalse(), "%v", err)
	})

	t.Run("bad settings are permanent", func(t *testing.T) {
		g := NewWithT(t)
		for _, o := range []email.Options{
			{Server: "smtp.example.com", From: "a@example.com", To: []string{"b@example.com"}},
			{Server: "smtp.example.com:0", From: "a@example.com", To: []string{"b@example.com"}},
			{Server: "smtp.example.com:587", From: "not an address", To: []string{"b@example.com"}},
			{Server: "smtp.example.com:587", From: "a@example.com", To: []string{"b"}},
			{Server: "smtp.example.com:587", From: "a@example.com", To: []string{"b@example.com"}, CA: []byte("not PEM")},
		} {
			_, err := email.New(o)
			g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%+v", o)
		}
	})
}

// TestEmail_dialsThroughTheEgressPolicy: the hub passes its egress policy's
// dialer, so a Pipeline's email.server on loopback (the hub itself, the
// node) is refused before a byte is sent, and allowed where the policy
// allows loopback (security review 3: the email notifier dialed
// email.server directly).
func TestEmail_dialsThroughTheEgressPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := notifytest.Deployment(tugboatv1alpha1.EventDeploymentFailed)
	ca := notifytest.NewTestCA(t)
	ms := notifytest.StartMailServer(t, ca.ServerTLS(), false)

	refused := newNotifier(t, email.Options{Server: ms.Addr, CA: ca.PEM, Dial: egress.Policy{}.Dialer(0).DialContext})
	_, err := refused.Notify(ctx, n, "")
	g.Expect(err).To(MatchError(ContainSubstring("loopback")))
	g.Expect(ms.Messages()).To(BeEmpty())

	allowed := newNotifier(t, email.Options{Server: ms.Addr, CA: ca.PEM, Dial: egress.Policy{AllowLoopback: true}.Dialer(0).DialContext})
	_, err = allowed.Notify(ctx, n, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ms.Messages()).To(HaveLen(1))
}
