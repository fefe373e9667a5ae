package pullrequest

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Keys of the credentials Secret.
const (
	// SecretKeyToken is an access token: a bearer/provider token for the API,
	// and the password of HTTPS basic auth for git.
	SecretKeyToken = "token"
	// SecretKeyUsername and SecretKeyPassword are used when there is no token.
	SecretKeyUsername = "username"
	// SecretKeyPassword goes with SecretKeyUsername.
	SecretKeyPassword = "password"
	// SecretKeyAPIURL optionally overrides the provider's API base URL derived
	// from the repository URL (self-hosted instances, tests).
	SecretKeyAPIURL = "apiURL"
)

// Credentials authenticate to the git host and its API. Either Token, or
// Username and Password, is set.
type Credentials struct {
	// Token is an access token.
	Token string
	// Username and Password are basic-auth credentials.
	Username string
	// Password goes with Username.
	Password string
}

// String never prints secrets.
func (c Credentials) String() string {
	switch {
	case c.Token != "":
		return "token(redacted)"
	case c.Username != "":
		return "basic(" + c.Username + ", redacted)"
	}
	return "none"
}

// GoString never prints secrets.
func (c Credentials) GoString() string { return c.String() }

// gitBasicAuth returns the HTTPS basic-auth user and password git uses for
// the provider: a token goes with the user name each host expects
// (x-access-token on GitHub, oauth2 on GitLab, the token itself on Gitea).
func (c Credentials) gitBasicAuth(provider tugboatv1alpha1.GitProvider) (user, password string) {
	if c.Token == "" {
		return c.Username, c.Password
	}
	switch provider {
	case tugboatv1alpha1.GitProviderGitHub:
		return "x-access-token", c.Token
	case tugboatv1alpha1.GitProviderGitLab:
		return "oauth2", c.Token
	default:
		// Gitea reads a token given as the user name when the password is
		// empty.
		return c.Token, ""
	}
}

// readCredentials loads the credentials and the optional API URL from the
// Secret. A Secret that does not exist (yet) is a retryable error; one that
// lacks the keys is a configuration error.
func readCredentials(ctx context.Context, hub client.Reader, namespace, name string) (Credentials, string, error) {
	var secret corev1.Secret
	if err := hub.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return Credentials{}, "", fmt.Errorf("credentials secret %s/%s not found", namespace, name)
		}
		return Credentials{}, "", fmt.Errorf("reading credentials secret %s/%s: %w", namespace, name, err)
	}
	get := func(key string) string { return strings.TrimSpace(string(secret.Data[key])) }
	creds := Credentials{Token: get(SecretKeyToken), Username: get(SecretKeyUsername), Password: get(SecretKeyPassword)}
	if creds.Token != "" {
		creds.Username, creds.Password = "", ""
	} else if creds.Username == "" || creds.Password == "" {
		return Credentials{}, "", configErrorf("credentials secret %s/%s must hold key %q, or keys %q and %q",
			namespace, name, SecretKeyToken, SecretKeyUsername, SecretKeyPassword)
	}
	apiURL := get(SecretKeyAPIURL)
	if apiURL != "" {
		u, err := url.Parse(apiURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Credentials{}, "", configErrorf("key %q of secret %s/%s is not an http(s) URL", SecretKeyAPIURL, namespace, name)
		}
	}
	return creds, apiURL, nil
}

// scrubber removes secrets from error text.
type scrubber struct{ secrets []string }

func newScrubber(c Credentials, extra ...string) scrubber {
	var s scrubber
	for _, v := range append([]string{c.Token, c.Password}, extra...) {
		if v == "" {
			continue
		}
		s.secrets = append(s.secrets, v, url.QueryEscape(v), url.PathEscape(v))
	}
	return s
}

func (s scrubber) string(text string) string {
	for _, v := range s.secrets {
		if v != "" {
			text = strings.ReplaceAll(text, v, "***")
		}
	}
	return text
}

// error returns err with secrets removed from its text. The original stays
// reachable through errors.Is/As (for classification), but its text is never
// printed through the returned error, and strategy.IsTerminal still sees a
// terminal error.
func (s scrubber) error(err error) error {
	if err == nil {
		return nil
	}
	msg := s.string(err.Error())
	if msg == err.Error() {
		return err
	}
	return scrubbedError{msg: msg, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e scrubbedError) Error() string { return e.msg }
func (e scrubbedError) Unwrap() error { return e.err }

// redactURL returns u as text without user information.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}
