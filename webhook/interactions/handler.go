package interactions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/slack-go/slack"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	notifyslack "tugboat.dev/tugboat/controllers/notify/slack"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/webhook/secretcache"
)

// Path is where the handler is mounted.
const Path = "/v1/slack/interactions"

// PathPrefix is the receiver mount the handler serves under.
const PathPrefix = "/v1/slack/"

// SigningSecretKey is the key of the Slack notifier's Secret that holds the
// Slack app's signing secret.
const SigningSecretKey = "signingSecret"

// Decider records an authenticated vote (request.Decide).
type Decider func(ctx context.Context, c client.Client, namespace, name string, vote tugboatv1alpha1.ApprovalVote) (*tugboatv1alpha1.Promotion, error)

// Authorizer says whether an identity may approve promotions into env
// (request.MayApprove).
type Authorizer func(p *tugboatv1alpha1.Pipeline, env string, source tugboatv1alpha1.ApprovalSource, user string) bool

// Options configure a Handler.
type Options struct {
	// BodyLimit is the largest body accepted (64 KiB when zero).
	BodyLimit int64
	// Timeout bounds the work of one request (2.5 s when zero: Slack
	// wants an answer within 3 s).
	Timeout time.Duration
	// ResponseURLAllowed says whether the hub may post to a response_url.
	// Defaults to https URLs on slack.com hosts.
	ResponseURLAllowed func(*url.URL) bool
	// HTTPClient posts to response_url (a client with a 10 s timeout when nil).
	HTTPClient *http.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger defaults to controller-runtime's logger named "slack-interactions".
	Logger logr.Logger
	// SecretCacheTTL is how long a notifier's Secret (or its absence) is
	// kept (secretcache.DefaultTTL when zero): a forged click costs the API
	// server no read, and a rotated signing secret takes effect within it.
	SecretCacheTTL time.Duration
}

// Handler serves Slack interactions.
type Handler struct {
	client  client.Client
	secrets *secretcache.Cache
	decide  Decider
	mayVote Authorizer
	opts    Options

	// dummy is a random signing secret known to no one, tried when the
	// button names no Slack notifier with a secret.
	dummy string

	mu   sync.Mutex
	seen map[string]time.Time // signature bytes → when first seen, for replays
	wg   sync.WaitGroup       // response_url posts in flight
}

// New returns a Handler. c reads Pipelines and Promotions (the cache) and
// writes votes; reader reads Secrets.
func New(c client.Client, reader client.Reader, decide Decider, mayVote Authorizer, opts Options) *Handler {
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = 64 << 10
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2500 * time.Millisecond
	}
	if opts.ResponseURLAllowed == nil {
		opts.ResponseURLAllowed = slackHost
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = ctrllog.Log.WithName("slack-interactions")
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &Handler{client: c, secrets: secretcache.New(reader, opts.SecretCacheTTL, opts.Now), decide: decide, mayVote: mayVote, opts: opts,
		dummy: hex.EncodeToString(key), seen: map[string]time.Time{}}
}

func slackHost(u *url.URL) bool {
	h := strings.ToLower(u.Hostname())
	return u.Scheme == "https" && (h == "slack.com" || strings.HasSuffix(h, ".slack.com"))
}

// answer is the JSON body of every response (Slack ignores it; people and
// tests read it).
type answer struct {
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

func respond(w http.ResponseWriter, code int, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}

// ServeHTTP takes one interaction.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		respond(w, http.StatusNotFound, answer{Error: "no such endpoint: use POST " + Path})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		respond(w, http.StatusMethodNotAllowed, answer{Error: "method not allowed: use POST"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	body, err := io.ReadAll(io.LimitReader(r.Body, h.opts.BodyLimit+1))
	if err != nil {
		respond(w, http.StatusBadRequest, answer{Error: "reading the body: " + err.Error()})
		return
	}
	if int64(len(body)) > h.opts.BodyLimit {
		respond(w, http.StatusRequestEntityTooLarge, answer{Error: fmt.Sprintf("body larger than %d bytes", h.opts.BodyLimit)})
		return
	}
	in, err := Parse(r.Header.Get("Content-Type"), body)
	if errors.Is(err, ErrLinkClick) {
		// Acknowledged, so Slack shows no error beside the button; it
		// changes nothing, so it needs no signature.
		respond(w, http.StatusOK, answer{Result: "link opened"})
		return
	}
	if err != nil {
		respond(w, http.StatusBadRequest, answer{Error: err.Error()})
		return
	}
	code, a := h.take(ctx, r.Header, body, in)
	respond(w, code, a)
}

// take verifies and records one parsed interaction.
//
// The click must be signed with the signing secret of the notifier that
// posted the message: the notifier the button's value names, of the
// Pipeline it names, which must be the Promotion's own Pipeline. A secret
// of another notifier or of another Pipeline in the namespace (which a
// tenant who can create Pipelines, or read one of their Secrets, may know)
// authenticates nothing.
func (h *Handler) take(ctx context.Context, header http.Header, body []byte, in *Interaction) (int, answer) {
	unauthenticated := answer{Error: "unauthenticated: the Slack signature does not verify, or its timestamp is more than 5 minutes away"}
	var pr *tugboatv1alpha1.Promotion
	pipelineName := in.Pipeline
	if pipelineName == "" {
		// A message posted before button values named the Pipeline: the
		// Promotion names it. Without the Promotion there is no secret
		// to verify with, which is answered like a bad signature.
		pr = &tugboatv1alpha1.Promotion{}
		if err := h.client.Get(ctx, types.NamespacedName{Namespace: in.Namespace, Name: in.Promotion}, pr); err != nil {
			if client.IgnoreNotFound(err) == nil {
				h.verified(ctx, header, body, nil, in.Notifier) // the same work as for a bad signature
				return http.StatusUnauthorized, unauthenticated
			}
			return http.StatusServiceUnavailable, answer{Error: "the hub could not read the promotion; try again"}
		}
		pipelineName = pr.Spec.Pipeline
	}
	p := &tugboatv1alpha1.Pipeline{}
	if err := h.client.Get(ctx, types.NamespacedName{Namespace: in.Namespace, Name: pipelineName}, p); err != nil {
		if client.IgnoreNotFound(err) != nil {
			h.opts.Logger.Error(err, "reading the Pipeline of a Slack interaction", "pipeline", in.Namespace+"/"+pipelineName)
			return http.StatusServiceUnavailable, answer{Error: "the hub could not read its Pipelines; try again"}
		}
		p = nil // nothing to verify with: answered like a bad signature
	}
	sig, ok := h.verified(ctx, header, body, p, in.Notifier)
	if !ok {
		return http.StatusUnauthorized, unauthenticated
	}
	if h.replayed(sig) {
		return http.StatusConflict, answer{Error: "replayed: this interaction was already taken"}
	}
	if pr == nil {
		pr = &tugboatv1alpha1.Promotion{}
		if err := h.client.Get(ctx, types.NamespacedName{Namespace: in.Namespace, Name: in.Promotion}, pr); err != nil {
			if client.IgnoreNotFound(err) == nil {
				h.reply(in, notifyslack.Outcome{Kind: notifyslack.OutcomeClosed, Message: "promotion " + in.Promotion + " no longer exists"})
				return http.StatusNotFound, answer{Error: "promotion " + in.Namespace + "/" + in.Promotion + " not found"}
			}
			return http.StatusServiceUnavailable, answer{Error: "the hub could not read the promotion; try again"}
		}
	}
	if pr.Spec.Pipeline != p.Name {
		// Signed by a notifier of another Pipeline than the Promotion's:
		// never a message tugboat posted.
		h.opts.Logger.Info("refused a Slack click signed for another pipeline", "promotion", in.Namespace+"/"+in.Promotion,
			"pipeline", pr.Spec.Pipeline, "signedFor", p.Name+"/"+in.Notifier, "slackUser", in.UserID)
		return http.StatusForbidden, answer{Error: "promotion " + in.Promotion + " belongs to pipeline " + pr.Spec.Pipeline +
			", not to pipeline " + p.Name + " whose notifier " + in.Notifier + " signed this click"}
	}
	who := notifyslack.Outcome{UserID: in.UserID, UserName: in.UserName}
	if !h.mayVote(p, pr.Spec.To, tugboatv1alpha1.ApprovalSourceSlack, in.UserID) {
		who.Kind, who.Message = notifyslack.OutcomeRefused, "not an approver of "+pr.Spec.To+" (gates.approvers.slackUsers)"
		h.reply(in, who)
		return http.StatusForbidden, answer{Error: "slack user " + in.UserID + " may not approve promotions into " + pr.Spec.To}
	}
	vote := tugboatv1alpha1.ApprovalVote{
		Decision: in.Decision, User: in.UserID, DisplayName: in.UserName,
		Source: tugboatv1alpha1.ApprovalSourceSlack, Time: metaNow(h.opts.Now()),
	}
	pr, err := h.decide(ctx, h.client, in.Namespace, in.Promotion, vote)
	if err != nil {
		code, msg := classify(err)
		who.Kind, who.Message = notifyslack.OutcomeRefused, msg
		if code == http.StatusConflict || code == http.StatusNotFound {
			who.Kind = notifyslack.OutcomeClosed
		}
		h.reply(in, who)
		return code, answer{Error: msg}
	}
	tally := request.Count(p, pr)
	switch {
	case in.Decision == tugboatv1alpha1.DecisionReject:
		who.Kind = notifyslack.OutcomeRejected
	case tally.Approved():
		who.Kind = notifyslack.OutcomeApproved
	default:
		who.Kind, who.Message = notifyslack.OutcomeVoted, tally.Summary()
	}
	h.reply(in, who)
	h.opts.Logger.Info("Slack decision recorded", "promotion", in.Namespace+"/"+in.Promotion, "decision", in.Decision, "slackUser", in.UserID)
	return http.StatusOK, answer{Result: strings.ToLower(string(who.Kind)) + " by " + in.UserID}
}

// verified checks the request's Slack signature with the signing secret
// of notifier, a Slack notifier of p, and returns the signature's bytes
// when it verifies. A missing Pipeline (nil), notifier or secret is tried
// with a key nobody holds, so that every failure costs the same work.
func (h *Handler) verified(ctx context.Context, header http.Header, body []byte, p *tugboatv1alpha1.Pipeline, notifier string) ([]byte, bool) {
	secret := ""
	if p != nil {
		for _, n := range p.Spec.Notify {
			if n.Name != notifier || n.Type != tugboatv1alpha1.NotifierSlack || n.Slack == nil {
				continue
			}
			// Cached: anonymous clicks naming a real notifier cost the API
			// server one read per TTL, not one each.
			if s, err := h.secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: n.Slack.SecretRef.Name}); err == nil {
				secret = strings.TrimSpace(string(s.Data[SigningSecretKey]))
			}
		}
	}
	known := secret != ""
	if !known {
		secret = h.dummy
	}
	sv, err := slack.NewSecretsVerifier(header, secret)
	if err != nil {
		return nil, false // malformed or stale headers
	}
	_, _ = sv.Write(body)
	if sv.Ensure() != nil || !known {
		return nil, false
	}
	// It verified, so the header is "v0=" and 64 hex digits.
	sig, err := hex.DecodeString(strings.TrimPrefix(header.Get("X-Slack-Signature"), "v0="))
	if err != nil {
		return nil, false
	}
	return sig, true
}

// replayed records sig (a verified signature's bytes: the header's text
// could be written again in upper case) and reports whether it was seen
// within the last 10 minutes (twice Slack's timestamp window). The record
// is this process's own: see docs/security.md for why a repeat on another
// replica, or after a restart, is harmless.
func (h *Handler) replayed(sig []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.opts.Now()
	for s, t := range h.seen {
		if now.Sub(t) > 10*time.Minute {
			delete(h.seen, s)
		}
	}
	if _, dup := h.seen[string(sig)]; dup {
		return true
	}
	h.seen[string(sig)] = now
	return false
}

// reply updates the clicked Slack message through the interaction's
// response_url, in the background: the outcome replaces the buttons (or
// sits above them, when they stay for someone else).
func (h *Handler) reply(in *Interaction, o notifyslack.Outcome) {
	u, err := url.Parse(in.ResponseURL)
	if in.ResponseURL == "" || err != nil || !h.opts.ResponseURLAllowed(u) {
		return
	}
	if o.UserID == "" {
		o.UserID, o.UserName = in.UserID, in.UserName
	}
	msg := notifyslack.DecisionMessage(in.Message, o)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := slack.PostWebhookCustomHTTPContext(ctx, in.ResponseURL, h.opts.HTTPClient, msg); err != nil {
			h.opts.Logger.Info("updating the Slack message failed", "promotion", in.Namespace+"/"+in.Promotion, "error", redact(err.Error()))
		}
	}()
}

// Wait waits for the response_url posts in flight (tests, shutdown).
func (h *Handler) Wait() { h.wg.Wait() }

func redact(s string) string {
	if i := strings.Index(s, "https://"); i >= 0 {
		return s[:i] + "[response_url]"
	}
	return s
}
