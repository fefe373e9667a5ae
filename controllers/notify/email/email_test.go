package email_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/email"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
)

const (
	user     = "tugboat@example.com"
	password = "correct horse battery staple"
)

// testCA is a certificate authority and a server certificate it signed for
// 127.0.0.1 and localhost.
type testCA struct {
	pem    []byte
	server tls.Certificate
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tugboat test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "smtp.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// received is one message the server accepted.
type received struct {
	From string
	To   []string
	Data []byte
	TLS  bool
	User string
}

// mailServer is a real SMTP server (emersion/go-smtp) with optional
// STARTTLS, authentication (PLAIN, or LOGIN only) and forced replies.
type mailServer struct {
	addr string

	mu        sync.Mutex
	messages  []received
	rcptErr   error // returned by RCPT when set
	loginOnly bool
}

func startMailServer(t *testing.T, tlsConfig *tls.Config, requireAuth bool) *mailServer {
	t.Helper()
	ms := &mailServer{}
	be := smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{ms: ms, conn: c, requireAuth: requireAuth}, nil
	})
	srv := smtp.NewServer(be)
	srv.Domain = "smtp.test"
	srv.TLSConfig = tlsConfig
	srv.AllowInsecureAuth = tlsConfig == nil // never AUTH in clear when TLS is offered
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ms
}

func (ms *mailServer) snapshot() []received {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]received(nil), ms.messages...)
}

type session struct {
	ms          *mailServer
	conn        *smtp.Conn
	requireAuth bool
	user        string
	from        string
	to          []string
}

func (s *session) AuthMechanisms() []string {
	s.ms.mu.Lock()
	defer s.ms.mu.Unlock()
	if s.ms.loginOnly {
		return []string{"LOGIN"}
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(mech string) (sasl.Server, error) {
	check := func(username, pw string) error {
		if username != user || pw != password {
			return smtp.ErrAuthFailed
		}
		s.user = username
		return nil
	}
	if mech == "LOGIN" {
		return &loginServer{check: check}, nil
	}
	return sasl.NewPlainServer(func(_, username, pw string) error { return check(username, pw) }), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.requireAuth && s.user == "" {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.ms.mu.Lock()
	defer s.ms.mu.Unlock()
	if s.ms.rcptErr != nil {
		return s.ms.rcptErr
	}
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.ms.mu.Lock()
	defer s.ms.mu.Unlock()
	s.ms.messages = append(s.ms.messages, received{From: s.from, To: s.to, Data: b, TLS: isTLS, User: s.user})
	return nil
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

// loginServer is the server side of SASL LOGIN (which go-sasl only offers
// as a client).
type loginServer struct {
	check    func(username, password string) error
	step     int
	username string
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step++
		if len(response) > 0 { // initial response: the username
			l.username = string(response)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.username = string(response)
		l.step++
		return []byte("Password:"), false, nil
	default:
		return nil, true, l.check(l.username, string(response))
	}
}

func tlsConfig(ca testCA) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12}
}

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
	ca := newTestCA(t)
	ms := startMailServer(t, tlsConfig(ca), true)
	e := newNotifier(t, email.Options{Server: ms.addr, Username: user, Password: password, CA: ca.pem})

	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded)
	n.Timeline = append(n.Timeline, notify.Step{Time: notifytest.Now, Source: "hub", Text: "note <script>alert(1)</script> & done"})
	_, err := e.Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())

	msgs := ms.snapshot()
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
}

func TestEmail_loginWhenOnlyThatIsOffered(t *testing.T) {
	g := NewWithT(t)
	ca := newTestCA(t)
	ms := startMailServer(t, tlsConfig(ca), true)
	ms.mu.Lock()
	ms.loginOnly = true
	ms.mu.Unlock()
	e := newNotifier(t, email.Options{Server: ms.addr, Username: user, Password: password, CA: ca.pem})
	_, err := e.Notify(context.Background(), notifytest.Deployment(tugboatv1alpha1.EventDeploymentHealthy), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ms.snapshot()).To(HaveLen(1))
	g.Expect(ms.snapshot()[0].User).To(Equal(user))
}

func TestEmail_badCredentialsArePermanent(t *testing.T) {
	g := NewWithT(t)
	ca := newTestCA(t)
	ms := startMailServer(t, tlsConfig(ca), true)
	e := newNotifier(t, email.Options{Server: ms.addr, Username: user, Password: "wrong", CA: ca.pem})
	_, err := e.Notify(context.Background(), notifytest.Promotion(tugboatv1alpha1.EventPromotionFailed), "")
	g.Expect(err).To(HaveOccurred())
	g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring("wrong"), "the password is not in the error")
	g.Expect(ms.snapshot()).To(BeEmpty())
}

func TestEmail_STARTTLSIsRequired(t *testing.T) {
	ctx := context.Background()
	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded)

	t.Run("a server without STARTTLS is refused", func(t *testing.T) {
		g := NewWithT(t)
		ms := startMailServer(t, nil, true)
		e := newNotifier(t, email.Options{Server: ms.addr, Username: user, Password: password})
		_, err := e.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
		g.Expect(err).To(MatchError(ContainSubstring("STARTTLS")))
		g.Expect(ms.snapshot()).To(BeEmpty())
	})

	t.Run("unless insecureSkipTLS", func(t *testing.T) {
		g := NewWithT(t)
		ms := startMailServer(t, nil, true)
		e := newNotifier(t, email.Options{Server: ms.addr, Username: user, Password: password, InsecureSkipTLS: true})
		_, err := e.Notify(ctx, n, "")
		g.Expect(err).NotTo(HaveOccurred())
		msgs := ms.snapshot()
		g.Expect(msgs).To(HaveLen(1))
		g.Expect(msgs[0].TLS).To(BeFalse())
		g.Expect(msgs[0].User).To(Equal(user))
	})

	t.Run("an untrusted certificate is refused", func(t *testing.T) {
		g := NewWithT(t)
		ms := startMailServer(t, tlsConfig(newTestCA(t)), true)
		other := newTestCA(t)
		e := newNotifier(t, email.Options{Server: ms.addr, Username: user, Password: password, CA: other.pem})
		_, err := e.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
		g.Expect(ms.snapshot()).To(BeEmpty())
	})
}

func TestEmail_replies(t *testing.T) {
	ctx := context.Background()
	n := notifytest.Deployment(tugboatv1alpha1.EventDeploymentFailed)
	ca := newTestCA(t)

	t.Run("4xx is retried", func(t *testing.T) {
		g := NewWithT(t)
		ms := startMailServer(t, tlsConfig(ca), false)
		ms.mu.Lock()
		ms.rcptErr = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
		ms.mu.Unlock()
		e := newNotifier(t, email.Options{Server: ms.addr, CA: ca.pem})
		_, err := e.Notify(ctx, n, "")
		g.Expect(err).To(HaveOccurred())
		g.Expect(notify.IsPermanent(err)).To(BeFalse(), "%v", err)

		ms.mu.Lock()
		ms.rcptErr = nil
		ms.mu.Unlock()
		_, err = e.Notify(ctx, n, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ms.snapshot()).To(HaveLen(1))
	})

	t.Run("5xx is permanent", func(t *testing.T) {
		g := NewWithT(t)
		ms := startMailServer(t, tlsConfig(ca), false)
		ms.mu.Lock()
		ms.rcptErr = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		ms.mu.Unlock()
		e := newNotifier(t, email.Options{Server: ms.addr, CA: ca.pem})
		_, err := e.Notify(ctx, n, "")
		g.Expect(notify.IsPermanent(err)).To(BeTrue(), "%v", err)
	})

	t.Run("unreachable is retried", func(t *testing.T) {
		g := NewWithT(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		g.Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String()
		g.Expect(l.Close()).To(Succeed())
		e := newNotifier(t, email.Options{Server: addr, CA: ca.pem})
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
