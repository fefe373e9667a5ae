package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// PullRequest is what a Provider opens or updates.
type PullRequest struct {
	// Head is the branch with the change, in the same repository.
	Head string
	// Base is the branch the change is for.
	Base string
	// Title and Body describe the change.
	Title string
	// Body is Markdown.
	Body string
}

// PullRequestStatus is the open pull request a Provider ensured.
type PullRequestStatus struct {
	// URL is the pull request's web page.
	URL string
	// Number is its number (GitLab: the merge request's iid).
	Number int64
	// Created is true when this call opened it.
	Created bool
	// Updated is true when this call changed an open one's title, body or base.
	Updated bool
}

// Provider opens pull requests on one hosting service.
type Provider interface {
	// EnsurePullRequest returns the open pull request from pr.Head, updating
	// its title, body and base when they differ from pr, or opens one when
	// there is none. It never opens a second pull request for a head branch
	// that has an open one.
	EnsurePullRequest(ctx context.Context, pr PullRequest) (PullRequestStatus, error)
}

// ProviderConfig is what a ProviderFactory needs.
type ProviderConfig struct {
	// Kind is github, gitlab or gitea.
	Kind tugboatv1alpha1.GitProvider
	// RepoURL is the repository's clone URL, without user information.
	RepoURL *url.URL
	// APIURL, when set, overrides the API base URL derived from RepoURL.
	APIURL string
	// Credentials authenticate to the API.
	Credentials Credentials
	// HTTPClient makes the API calls; never nil.
	HTTPClient *http.Client
}

// ProviderFactory builds a Provider. NewProvider is the default; tests may
// substitute their own with WithProviderFactory.
type ProviderFactory func(cfg ProviderConfig) (Provider, error)

// NewProvider returns the Provider for cfg.Kind, backed by the provider's
// maintained client library: google/go-github, gitlab-org/api/client-go or
// code.gitea.io/sdk/gitea. It does no network I/O. Errors are configuration
// errors (an unknown kind, a URL that names no repository).
func NewProvider(cfg ProviderConfig) (Provider, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	switch cfg.Kind {
	case tugboatv1alpha1.GitProviderGitHub:
		return newGitHub(cfg)
	case tugboatv1alpha1.GitProviderGitLab:
		return newGitLab(cfg)
	case tugboatv1alpha1.GitProviderGitea:
		return newGitea(cfg)
	}
	return nil, fmt.Errorf("unknown provider %q (want github, gitlab or gitea)", cfg.Kind)
}

// repoPath returns the repository's path segments, without a trailing
// ".git".
func repoPath(u *url.URL) []string {
	p := strings.Trim(u.Path, "/")
	p = strings.TrimSuffix(p, ".git")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// githubRepo derives owner, repository and API base URL (with a trailing
// slash) from a GitHub or GitHub Enterprise clone URL.
func githubRepo(u *url.URL, apiOverride string) (owner, repo, api string, err error) {
	parts := repoPath(u)
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", "", fmt.Errorf("%s does not name a GitHub repository (want https://host/owner/repo)", redactURL(u))
	}
	switch {
	case apiOverride != "":
		api = apiOverride
	case strings.EqualFold(u.Hostname(), "github.com") || strings.EqualFold(u.Hostname(), "www.github.com"):
		api = "https://api.github.com/"
	default:
		api = u.Scheme + "://" + u.Host + "/api/v3/"
	}
	if !strings.HasSuffix(api, "/") {
		api += "/"
	}
	return parts[0], parts[1], api, nil
}

// gitlabProject derives the project path (group/subgroup/repo) and API base
// URL from a GitLab clone URL.
func gitlabProject(u *url.URL, apiOverride string) (project, api string, err error) {
	parts := repoPath(u)
	if len(parts) < 2 {
		return "", "", fmt.Errorf("%s does not name a GitLab project (want https://host/group/project)", redactURL(u))
	}
	for _, p := range parts {
		if p == "" {
			return "", "", fmt.Errorf("%s does not name a GitLab project", redactURL(u))
		}
	}
	api = apiOverride
	if api == "" {
		api = u.Scheme + "://" + u.Host + "/api/v4"
	}
	return strings.Join(parts, "/"), api, nil
}

// giteaRepo derives owner, repository and the server's root URL (the SDK
// adds /api/v1) from a Gitea clone URL; Gitea may be served under a
// sub-path, which is kept.
func giteaRepo(u *url.URL, apiOverride string) (owner, repo, root string, err error) {
	parts := repoPath(u)
	if len(parts) < 2 || parts[len(parts)-2] == "" || parts[len(parts)-1] == "" {
		return "", "", "", fmt.Errorf("%s does not name a Gitea repository (want https://host/owner/repo)", redactURL(u))
	}
	owner, repo = parts[len(parts)-2], parts[len(parts)-1]
	if apiOverride != "" {
		root = strings.TrimSuffix(strings.TrimSuffix(apiOverride, "/"), "/api/v1")
	} else {
		prefix := strings.Join(parts[:len(parts)-2], "/")
		root = u.Scheme + "://" + u.Host
		if prefix != "" {
			root += "/" + prefix
		}
	}
	return owner, repo, root, nil
}

// httpStatusError is an API error with its HTTP status, for classification.
type httpStatusError interface {
	error
	statusCode() int
}

// apiError wraps a client library's error with the HTTP status it carried.
type apiError struct {
	status int
	err    error
}

func (e *apiError) Error() string   { return e.err.Error() }
func (e *apiError) Unwrap() error   { return e.err }
func (e *apiError) statusCode() int { return e.status }

// wrapAPIError records the HTTP status (0: none) of a failed API call.
func wrapAPIError(status int, err error) error {
	if err == nil || status == 0 {
		return err
	}
	return &apiError{status: status, err: err}
}

// refusedByAPI reports whether err is an API answer that retrying the same
// request cannot change: 400 Bad Request or 422 Unprocessable Entity.
// Authentication and permission errors (401, 403), not-found (404, which
// hosts also answer for private repositories) and server errors stay
// retryable, so fixing the Secret or the token's scopes heals the promotion
// without recreating it.
func refusedByAPI(err error) bool {
	var se httpStatusError
	if !errors.As(err, &se) {
		return false
	}
	return se.statusCode() == http.StatusBadRequest || se.statusCode() == http.StatusUnprocessableEntity
}
