// Package email is the email notifier: one message per notice (in summary
// mode, one per completed promotion or deployment, with its whole
// timeline), with a plain-text part and an HTML part, sent over SMTP with
// github.com/wneessen/go-mail.
//
// STARTTLS is mandatory unless the notifier opts out (insecureSkipTLS);
// port 465 uses implicit TLS instead. The server's certificate is checked
// against the system roots, or the PEM CA from the Secret (key ca.crt).
// With a username, the client authenticates with the best mechanism the
// server offers (go-mail's auto-discovery: PLAIN, or LOGIN when only that
// is offered, or a SCRAM/CRAM mechanism); without TLS only the mechanisms
// that do not send the password in clear, then PLAIN and LOGIN.
//
// SMTP 4xx replies and network errors are retried; 5xx replies (bad
// credentials, a refused recipient), a server without STARTTLS and an
// untrusted certificate are permanent.
package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	netmail "net/mail"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/wneessen/go-mail"

	"tugboat.dev/tugboat/controllers/notify"
)

const (
	// DefaultTimeout bounds the connection and each SMTP exchange.
	DefaultTimeout = 30 * time.Second
	// SubjectPrefix starts every subject.
	SubjectPrefix = "[tugboat] "

	// HeaderEvent and HeaderNotice carry the notice's event and ID.
	HeaderEvent  = "X-Tugboat-Event"
	HeaderNotice = "X-Tugboat-Notice"
)

// Options are an email notifier's resolved settings, from the notifier's
// spec.email and its Secret.
type Options struct {
	// Server is the SMTP server as host:port.
	Server string
	// From is the sender address; To the recipients.
	From string
	To   []string
	// Username and Password authenticate (the Secret's keys "username" and
	// "password"); no authentication without a username.
	Username, Password string
	// CA is a PEM certificate authority for a server with a private
	// certificate (the Secret's key "ca.crt"). Defaults to the system
	// roots.
	CA []byte
	// InsecureSkipTLS sends without STARTTLS: mail and password in clear.
	InsecureSkipTLS bool
	// Timeout bounds the connection and each exchange. Defaults to
	// DefaultTimeout.
	Timeout time.Duration
	// HELO is the name the client greets with. Defaults to go-mail's.
	HELO string
	// Dial connects to the server; the hub passes its egress policy's
	// dialer (controllers/egress), so a Pipeline's email.server cannot
	// point the hub at itself, the node or a metadata service. Defaults to
	// a plain dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// maxReply bounds the server's words in an error, which reaches the
// Promotion's status: a server the Pipeline's author chose must not copy a
// page of its own into a status many people read.
const maxReply = 200

// Notifier sends notices by email. It is safe for concurrent use: each
// Notify opens its own connection.
type Notifier struct {
	host      string
	port      int
	from      string
	fromHost  string
	to        []string
	opts      Options
	tlsConfig *tls.Config
}

var _ notify.Notifier = (*Notifier)(nil)

// New checks opts and returns an email notifier. A bad server address,
// sender, recipient or CA is a *notify.PermanentError.
func New(opts Options) (*Notifier, error) {
	host, portS, err := net.SplitHostPort(opts.Server)
	if err != nil || host == "" {
		return nil, notify.Permanentf("email: server %q is not host:port", opts.Server)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port < 1 || port > 65535 {
		return nil, notify.Permanentf("email: server %q has no valid port", opts.Server)
	}
	from, err := netmail.ParseAddress(opts.From)
	if err != nil {
		return nil, notify.Permanentf("email: sender %q: %w", opts.From, err)
	}
	if len(opts.To) == 0 {
		return nil, notify.Permanentf("email: no recipient")
	}
	var to []string
	for _, t := range opts.To {
		a, err := netmail.ParseAddress(t)
		if err != nil {
			return nil, notify.Permanentf("email: recipient %q: %w", t, err)
		}
		to = append(to, a.String())
	}
	tlsConfig := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if len(opts.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(opts.CA) {
			return nil, notify.Permanentf("email: ca.crt holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	_, fromHost, _ := strings.Cut(from.Address, "@")
	return &Notifier{
		host: host, port: port, from: from.String(), fromHost: fromHost, to: to,
		opts: opts, tlsConfig: tlsConfig,
	}, nil
}

// Notify sends n as one message. thread is ignored.
func (e *Notifier) Notify(ctx context.Context, n notify.Notice, _ string) (notify.Delivered, error) {
	msg, err := e.Message(n)
	if err != nil {
		return notify.Delivered{}, err
	}
	client, err := e.client()
	if err != nil {
		return notify.Delivered{}, notify.Permanentf("email: %w", err)
	}
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return notify.Delivered{}, bounded(classify(err), fmt.Sprintf("email via %s", e.opts.Server))
	}
	return notify.Delivered{}, nil
}

// Message is n as a go-mail message: the subject "[tugboat] " + the
// notice's title, a plain-text part and an HTML part, a Message-ID derived
// from the notice's ID (a redelivery has the same one), and the headers
// X-Tugboat-Event and X-Tugboat-Notice.
func (e *Notifier) Message(n notify.Notice) (*mail.Msg, error) {
	msg := mail.NewMsg()
	if err := msg.From(e.from); err != nil {
		return nil, notify.Permanentf("email: sender: %w", err)
	}
	if err := msg.To(e.to...); err != nil {
		return nil, notify.Permanentf("email: recipients: %w", err)
	}
	msg.Subject(Subject(n))
	id := notify.ID(n)
	domain := e.fromHost
	if domain == "" {
		domain = "tugboat.dev"
	}
	msg.SetMessageIDWithValue("notice-" + id + "@" + domain)
	msg.SetDate()
	msg.SetGenHeader(mail.Header(HeaderEvent), string(n.Event))
	msg.SetGenHeader(mail.Header(HeaderNotice), id)
	msg.SetGenHeader(mail.Header("Auto-Submitted"), "auto-generated")
	msg.SetBodyString(mail.TypeTextPlain, notify.Text(n))
	var html bytes.Buffer
	if err := renderHTML(&html, n); err != nil {
		return nil, notify.Permanentf("email: rendering the HTML part: %w", err)
	}
	msg.AddAlternativeString(mail.TypeTextHTML, html.String())
	return msg, nil
}

// Subject is the message subject for n, e.g.
// "[tugboat] web 1.4.0 → production: Succeeded".
func Subject(n notify.Notice) string {
	return SubjectPrefix + notify.Title(n)
}

func (e *Notifier) client() (*mail.Client, error) {
	opts := []mail.Option{
		mail.WithPort(e.port),
		mail.WithTimeout(e.opts.Timeout),
		mail.WithTLSConfig(e.tlsConfig),
	}
	switch {
	case e.opts.InsecureSkipTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case e.port == 465:
		opts = append(opts, mail.WithSSL())
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if e.opts.HELO != "" {
		opts = append(opts, mail.WithHELO(e.opts.HELO))
	}
	if e.opts.Username != "" {
		opts = append(opts, mail.WithUsername(e.opts.Username), mail.WithPassword(e.opts.Password))
		if e.opts.InsecureSkipTLS {
			// Auto-discovery refuses PLAIN and LOGIN without TLS; the
			// notifier opted in to clear text, so allow them last.
			opts = append(opts, mail.WithOpportunisticSMTPAuth(
				mail.SMTPAuthSCRAMSHA256, mail.SMTPAuthSCRAMSHA1, mail.SMTPAuthCramMD5,
				mail.SMTPAuthPlainNoEnc, mail.SMTPAuthLoginNoEnc))
		} else {
			opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover))
		}
	}
	if e.opts.Dial != nil {
		opts = append(opts, mail.WithDialContextFunc(e.opts.Dial))
	}
	return mail.NewClient(e.host, opts...)
}

// bounded is err, classified, with its text cut to maxReply printable
// characters after prefix.
func bounded(err error, prefix string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	msg := prefix + ": " + notify.Printable(err.Error(), maxReply)
	if notify.IsPermanent(err) {
		return notify.Permanent(errors.New(msg))
	}
	return errors.New(msg)
}

// classify sorts a sending error: network errors, a server hanging up and
// 4xx replies are retried; everything else (5xx replies, TLS and
// authentication set-up) is permanent.
func classify(err error) error {
	var (
		netErr  net.Error
		tpErr   *textproto.Error
		sendErr *mail.SendError
		certErr *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		hostErr x509.HostnameError
	)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &certErr), errors.As(err, &unknown), errors.As(err, &hostErr):
		return notify.Permanent(err)
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return err
	case errors.As(err, &tpErr):
		if tpErr.Code >= 400 && tpErr.Code < 500 {
			return err
		}
		return notify.Permanent(err)
	case errors.As(err, &sendErr):
		if sendErr.IsTemp() {
			return err
		}
		return notify.Permanent(err)
	}
	return notify.Permanent(err)
}
