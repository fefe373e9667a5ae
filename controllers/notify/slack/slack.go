// Package slack is the Slack notifier: Block Kit messages built with
// github.com/slack-go/slack, posted to an incoming webhook or, with a bot
// token, to a channel through chat.postMessage. With a bot token, later
// notices about a promotion go into the first message's thread, and the
// first message is updated in place (chat.update) to show the latest state.
//
// When a notice carries an approval request and the notifier has a signing
// secret (the Slack app can send interactions to the hub), the message holds
// Approve and Reject buttons (ActionApprove, ActionReject, value
// ActionValue). The hub's interaction endpoint parses them with
// ParseActionValue and answers through response_url with DecisionMessage.
//
// It respects Slack's limits: at most one message per second per channel
// (a limiter in the notifier), 429 with Retry-After (a
// *notify.RetryAfterError), and the Block Kit sizes (see Blocks).
//
// It is not the interaction endpoint: verifying Slack's signature and
// recording decisions belong to the hub's webhook receiver.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"tugboat.dev/tugboat/controllers/notify"
)

const (
	// DefaultTimeout bounds one request when the HTTP client sets none.
	DefaultTimeout = 10 * time.Second
	// DefaultPerChannelInterval is Slack's limit: one message per second
	// per channel.
	DefaultPerChannelInterval = time.Second
	// MaxLimiterWait is the longest the notifier waits for its channel's
	// turn; beyond it, Notify returns a *notify.RetryAfterError.
	MaxLimiterWait = 5 * time.Second
	// DefaultRetryAfter is the wait asked for by a 429 without Retry-After.
	DefaultRetryAfter = 30 * time.Second
)

// Options are a Slack notifier's resolved settings, from the notifier's
// spec.slack and its Secret.
type Options struct {
	// WebhookURL is an incoming webhook (the Secret's key "address").
	WebhookURL string
	// Token is a bot token (the Secret's key "token"), used with Channel.
	// When both are set, the token is used.
	Token string
	// Channel is the channel id or name to post to with Token.
	Channel string
	// SigningSecret is the Slack app's signing secret (the Secret's key
	// "signingSecret"). The notifier only checks that it is set: messages
	// then carry Approve/Reject buttons when a notice asks for a decision.
	SigningSecret string
	// APIURL is Slack's Web API base. Defaults to slack.APIURL.
	APIURL string
	// HTTPClient sends the requests. Defaults to a client with
	// DefaultTimeout.
	HTTPClient *http.Client
	// PerChannelInterval is the least time between two messages to a
	// channel. Defaults to DefaultPerChannelInterval.
	PerChannelInterval time.Duration
}

// Notifier posts notices to Slack. It is safe for concurrent use.
type Notifier struct {
	webhookURL string
	token      string
	channel    string
	buttons    bool
	client     *http.Client
	api        *slack.Client
	limiter    *limiter

	mu        sync.Mutex
	channelID string // the configured channel's id, once Slack said it
}

var _ notify.Notifier = (*Notifier)(nil)

// New returns a Slack notifier. Missing settings (no webhook URL nor token,
// a token without channel, a webhook URL that is not https or http) are a
// *notify.PermanentError.
func New(opts Options) (*Notifier, error) {
	client := &http.Client{Timeout: DefaultTimeout}
	if opts.HTTPClient != nil {
		client = opts.HTTPClient
	}
	interval := opts.PerChannelInterval
	if interval <= 0 {
		interval = DefaultPerChannelInterval
	}
	n := &Notifier{
		client:  client,
		buttons: opts.SigningSecret != "",
		limiter: newLimiter(interval, time.Now),
	}
	switch {
	case opts.Token != "":
		if opts.Channel == "" {
			return nil, notify.Permanentf("slack: a bot token needs a channel")
		}
		apiURL := opts.APIURL
		if apiURL == "" {
			apiURL = slack.APIURL
		}
		if !strings.HasSuffix(apiURL, "/") {
			apiURL += "/"
		}
		n.token, n.channel = opts.Token, opts.Channel
		n.api = slack.New(opts.Token, slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(client))
	case opts.WebhookURL != "":
		u, err := url.Parse(opts.WebhookURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, notify.Permanentf("slack: the webhook address is not an absolute https URL")
		}
		n.webhookURL = opts.WebhookURL
	default:
		return nil, notify.Permanentf("slack: the Secret has neither an address (incoming webhook) nor a token")
	}
	return n, nil
}

// Notify posts n. With an incoming webhook every notice is a message of its
// own and thread is ignored. With a bot token, the first notice about a
// promotion (thread "") is posted to the channel and its Reference,
// "CHANNEL/TS", returned; a later one (thread set to that Reference)
// updates that message in place to show n, then posts n into its thread
// (without buttons: those live in the first message). When the first
// message is gone, n is posted anew and the new Reference returned.
func (s *Notifier) Notify(ctx context.Context, n notify.Notice, thread string) (notify.Delivered, error) {
	if s.api == nil {
		return notify.Delivered{}, s.postWebhook(ctx, n)
	}
	if ch, ts, ok := parseReference(thread); ok {
		err := s.update(ctx, ch, ts, n)
		switch {
		case err == nil:
			if err := s.post(ctx, ch, ts, n, false); err != nil {
				return notify.Delivered{}, err
			}
			return notify.Delivered{Reference: thread}, nil
		case !isGone(err):
			return notify.Delivered{}, err
		}
	}
	ch, ts, err := s.postTop(ctx, n)
	if err != nil {
		return notify.Delivered{}, err
	}
	return notify.Delivered{Reference: ch + "/" + ts}, nil
}

func (s *Notifier) postWebhook(ctx context.Context, n notify.Notice) error {
	key := "webhook:" + s.webhookURL
	if err := s.limiter.wait(ctx, key); err != nil {
		return err
	}
	msg := &slack.WebhookMessage{
		Text:   escape(notify.Title(n)),
		Blocks: &slack.Blocks{BlockSet: Blocks(n, s.buttons)},
	}
	err := slack.PostWebhookCustomHTTPContext(ctx, s.webhookURL, s.client, msg)
	return s.classify(err, key, "posting to the incoming webhook")
}

// limiterKey is the configured channel's id once known (replies in
// threads use ids), else the channel as configured.
func (s *Notifier) limiterKey() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.channelID != "" {
		return s.channelID
	}
	return s.channel
}

// postTop posts n as a new message in the notifier's channel.
func (s *Notifier) postTop(ctx context.Context, n notify.Notice) (channel, ts string, err error) {
	key := s.limiterKey()
	if err := s.limiter.wait(ctx, key); err != nil {
		return "", "", err
	}
	channel, ts, err = s.api.PostMessageContext(ctx, s.channel,
		slack.MsgOptionText(escape(notify.Title(n)), false),
		slack.MsgOptionBlocks(Blocks(n, s.buttons)...),
	)
	if err != nil {
		return "", "", s.classify(err, key, "chat.postMessage")
	}
	if channel == "" || ts == "" {
		return "", "", fmt.Errorf("slack: chat.postMessage answered without channel or ts")
	}
	s.mu.Lock()
	s.channelID = channel
	s.mu.Unlock()
	return channel, ts, nil
}

// post posts n into the thread of message ts in channel.
func (s *Notifier) post(ctx context.Context, channel, ts string, n notify.Notice, buttons bool) error {
	if err := s.limiter.wait(ctx, channel); err != nil {
		return err
	}
	_, _, err := s.api.PostMessageContext(ctx, channel,
		slack.MsgOptionText(escape(notify.Title(n)), false),
		slack.MsgOptionBlocks(Blocks(n, buttons)...),
		slack.MsgOptionTS(ts),
	)
	return s.classify(err, channel, "chat.postMessage")
}

// update replaces message ts in channel with n.
func (s *Notifier) update(ctx context.Context, channel, ts string, n notify.Notice) error {
	_, _, _, err := s.api.UpdateMessageContext(ctx, channel, ts,
		slack.MsgOptionText(escape(notify.Title(n)), false),
		slack.MsgOptionBlocks(Blocks(n, s.buttons)...),
	)
	return s.classify(err, channel, "chat.update")
}

// parseReference splits a Reference made by Notify: "CHANNEL/TS".
func parseReference(ref string) (channel, ts string, ok bool) {
	channel, ts, ok = strings.Cut(ref, "/")
	return channel, ts, ok && channel != "" && ts != "" && !strings.Contains(ts, "/")
}

// isGone reports whether err says the message to update no longer exists.
func isGone(err error) bool {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "message_not_found", "cant_update_message", "edit_window_closed":
			return true
		}
	}
	return false
}

// Slack Web API errors worth retrying; every other one is permanent.
var retryableAPIErrors = map[string]bool{
	"internal_error": true, "fatal_error": true, "service_unavailable": true,
	"request_timeout": true, "ratelimited": true, "team_added_to_org": true,
}

// classify turns a slack-go error into the notify contract, with a message
// that holds neither the token nor the webhook address.
func (s *Notifier) classify(err error, limiterKey, what string) error {
	if err == nil {
		return nil
	}
	wrapped := &redactedError{msg: fmt.Sprintf("slack: %s: %s", what, s.redact(err.Error())), err: err}
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	switch {
	case errors.As(err, &rl):
		after := rl.RetryAfter
		s.limiter.block(limiterKey, after)
		return &notify.RetryAfterError{After: after, Err: wrapped}
	case errors.As(err, &sc):
		switch {
		case sc.Code == http.StatusTooManyRequests:
			s.limiter.block(limiterKey, DefaultRetryAfter)
			return &notify.RetryAfterError{After: DefaultRetryAfter, Err: wrapped}
		case sc.Code >= 500:
			return wrapped
		}
		return notify.Permanent(wrapped)
	case errors.As(err, &se):
		if retryableAPIErrors[se.Err] {
			return wrapped
		}
		return notify.Permanent(wrapped)
	}
	// Network errors, timeouts and undecodable answers: retry.
	return wrapped
}

// redactedError is err with a message that holds no secret; it unwraps to
// err, so errors.As still sees slack-go's error types.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact removes the webhook address (its path is the secret) and the
// token from msg.
func (s *Notifier) redact(msg string) string {
	if s.webhookURL != "" {
		msg = strings.ReplaceAll(msg, s.webhookURL, "(incoming webhook)")
		if u, err := url.Parse(s.webhookURL); err == nil && len(u.Path) > 1 {
			msg = strings.ReplaceAll(msg, u.Path, "/(redacted)")
		}
	}
	if s.token != "" {
		msg = strings.ReplaceAll(msg, s.token, "(token)")
	}
	return msg
}
