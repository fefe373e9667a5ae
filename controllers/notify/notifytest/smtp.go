package notifytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// TestCA is a certificate authority and a server certificate it signed for
// 127.0.0.1 and localhost.
type TestCA struct {
	// PEM is the authority's certificate, for a client to trust.
	PEM []byte
	// Server is the server's certificate and key.
	Server tls.Certificate
}

// NewTestCA generates a TestCA.
func NewTestCA(t testing.TB) TestCA {
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
	return TestCA{
		PEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// Received is one message a MailServer accepted.
type Received struct {
	From string
	To   []string
	Data []byte
	TLS  bool
	User string
}

// MailServer is a real SMTP server (emersion/go-smtp) on loopback with
// optional STARTTLS, authentication as MailUser/MailPassword (PLAIN, or
// LOGIN only) and forced replies.
type MailServer struct {
	// Addr is the server's host:port.
	Addr string

	mu        sync.Mutex
	messages  []Received
	rcptErr   error // returned by RCPT when set
	loginOnly bool
}

// The credentials a MailServer accepts.
const (
	MailUser     = "tugboat@example.com"
	MailPassword = "correct horse battery staple"
)

// SetRcptError makes RCPT answer err (nil: accept).
func (ms *MailServer) SetRcptError(err error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.rcptErr = err
}

// OfferLoginOnly makes the server offer only AUTH LOGIN.
func (ms *MailServer) OfferLoginOnly() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.loginOnly = true
}

// StartMailServer serves on a free loopback port until the test ends; with
// tlsConfig it offers STARTTLS, and with requireAuth it takes mail only
// from an authenticated client.
func StartMailServer(t testing.TB, tlsConfig *tls.Config, requireAuth bool) *MailServer {
	t.Helper()
	ms := &MailServer{}
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
	ms.Addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ms
}

// Messages returns the messages accepted so far.
func (ms *MailServer) Messages() []Received {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]Received(nil), ms.messages...)
}

type session struct {
	ms          *MailServer
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
		if username != MailUser || pw != MailPassword {
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
	s.ms.messages = append(s.ms.messages, Received{From: s.from, To: s.to, Data: b, TLS: isTLS, User: s.user})
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

// ServerTLS is the server side TLS configuration of ca's certificate.
func (ca TestCA) ServerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.Server}, MinVersion: tls.VersionTLS12}
}
