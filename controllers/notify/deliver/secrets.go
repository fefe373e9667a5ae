package deliver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/email"
	"tugboat.dev/tugboat/controllers/notify/flux"
	"tugboat.dev/tugboat/controllers/notify/slack"
	"tugboat.dev/tugboat/controllers/notify/webhook"
)

// SecretBuilderOptions configure a SecretBuilder.
type SecretBuilderOptions struct {
	// SlackAPIURL is Slack's Web API base URL.
	SlackAPIURL string
	// HTTPClient sends every notifier request (the hub's egress policy).
	HTTPClient *http.Client
	// Dial connects the email notifier to its server (the hub's egress
	// policy).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// NotificationControllerAddress is the default address of Flux
	// notifiers.
	NotificationControllerAddress string
}

// SecretBuilder builds the notifiers of controllers/notify from a notifier
// spec and the Secret it names. It keeps one notifier per Pipeline and
// notifier name while neither the spec nor the Secret changes, so a
// notifier's own state (Slack's per-channel rate limit) lasts.
type SecretBuilder struct {
	reader client.Reader
	opts   SecretBuilderOptions

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	fingerprint string
	notifier    notify.Notifier
	used        time.Time
}

// NewSecretBuilder returns a SecretBuilder reading Secrets with reader.
func NewSecretBuilder(reader client.Reader, opts SecretBuilderOptions) *SecretBuilder {
	return &SecretBuilder{reader: reader, opts: opts, cache: map[string]cached{}}
}

// Keys of the notifiers' Secrets.
const (
	SlackAddressKey       = "address"
	SlackTokenKey         = "token"
	SlackSigningSecretKey = "signingSecret"
	EmailUsernameKey      = "username"
	EmailPasswordKey      = "password"
	EmailCAKey            = "ca.crt"
	WebhookKeyKey         = "key"
	WebhookAddressKey     = "address"
)

// Build returns the notifier n of Pipeline p.
func (b *SecretBuilder) Build(ctx context.Context, p *tugboatv1alpha1.Pipeline, n *tugboatv1alpha1.Notifier) (notify.Notifier, error) {
	var ref *tugboatv1alpha1.LocalSecretReference
	switch {
	case n.Slack != nil:
		ref = &n.Slack.SecretRef
	case n.Email != nil:
		ref = n.Email.SecretRef
	case n.Webhook != nil:
		ref = n.Webhook.SecretRef
	}
	data := map[string][]byte{}
	rv := ""
	if ref != nil {
		s := &corev1.Secret{}
		if err := b.reader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, notify.Permanentf("notifier %s: Secret %s/%s not found", n.Name, p.Namespace, ref.Name)
			}
			return nil, fmt.Errorf("notifier %s: reading Secret %s/%s: %w", n.Name, p.Namespace, ref.Name, err)
		}
		data, rv = s.Data, s.ResourceVersion
	}
	spec, _ := json.Marshal(n)
	key := p.Namespace + "/" + p.Name + "/" + n.Name
	fp := string(spec) + "@" + rv
	b.mu.Lock()
	if c, ok := b.cache[key]; ok && c.fingerprint == fp {
		c.used = time.Now()
		b.cache[key] = c
		b.mu.Unlock()
		return c.notifier, nil
	}
	b.mu.Unlock()

	built, err := b.build(p, n, ref, data)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for k, c := range b.cache { // forget notifiers of deleted or idle pipelines
		if now.Sub(c.used) > 24*time.Hour {
			delete(b.cache, k)
		}
	}
	b.cache[key] = cached{fingerprint: fp, notifier: built, used: now}
	return built, nil
}

func (b *SecretBuilder) build(p *tugboatv1alpha1.Pipeline, n *tugboatv1alpha1.Notifier, ref *tugboatv1alpha1.LocalSecretReference, data map[string][]byte) (notify.Notifier, error) {
	val := func(k string) string { return strings.TrimSpace(string(data[k])) }
	missing := func(keys ...string) error {
		return notify.Permanentf("notifier %s: Secret %s/%s has none of the keys %s", n.Name, p.Namespace, ref.Name, strings.Join(keys, ", "))
	}
	switch n.Type {
	case tugboatv1alpha1.NotifierSlack:
		o := slack.Options{
			WebhookURL: val(SlackAddressKey), Token: val(SlackTokenKey), Channel: n.Slack.Channel,
			SigningSecret: val(SlackSigningSecretKey), APIURL: b.opts.SlackAPIURL, HTTPClient: b.opts.HTTPClient,
		}
		if o.WebhookURL == "" && o.Token == "" {
			return nil, missing(SlackAddressKey, SlackTokenKey)
		}
		if o.Token != "" && o.Channel == "" && o.WebhookURL == "" {
			return nil, notify.Permanentf("notifier %s: a Slack bot token needs spec.notify[].slack.channel", n.Name)
		}
		return slack.New(o)
	case tugboatv1alpha1.NotifierEmail:
		o := email.Options{
			Server: n.Email.Server, From: n.Email.From, To: n.Email.To, InsecureSkipTLS: n.Email.InsecureSkipTLS,
			Username: val(EmailUsernameKey), Password: string(data[EmailPasswordKey]), CA: data[EmailCAKey],
			Dial: b.opts.Dial,
		}
		return email.New(o)
	case tugboatv1alpha1.NotifierWebhook:
		o := webhook.Options{URL: n.Webhook.URL, HTTPClient: b.opts.HTTPClient}
		if ref != nil {
			if addr := val(WebhookAddressKey); addr != "" {
				o.URL = addr
			}
			o.Key = data[WebhookKeyKey]
			if len(o.Key) == 0 && val(WebhookAddressKey) == "" {
				return nil, missing(WebhookKeyKey, WebhookAddressKey)
			}
		}
		if o.URL == "" {
			return nil, notify.Permanentf("notifier %s: no URL: set spec.notify[].webhook.url or the Secret's key %s", n.Name, WebhookAddressKey)
		}
		return webhook.New(o)
	case tugboatv1alpha1.NotifierFlux:
		addr := b.opts.NotificationControllerAddress
		if n.Flux != nil && n.Flux.Address != "" {
			addr = n.Flux.Address
		}
		return flux.New(flux.Options{Address: addr, HTTPClient: b.opts.HTTPClient})
	}
	return nil, notify.Permanentf("notifier %s: unknown type %q", n.Name, n.Type)
}
