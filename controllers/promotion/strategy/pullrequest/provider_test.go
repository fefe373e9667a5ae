package pullrequest

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestGitHubRepo(t *testing.T) {
	for in, want := range map[string][3]string{
		"https://github.com/acme/fleet":          {"acme", "fleet", "https://api.github.com/"},
		"https://github.com/acme/fleet.git":      {"acme", "fleet", "https://api.github.com/"},
		"https://ghe.example.com/acme/fleet.git": {"acme", "fleet", "https://ghe.example.com/api/v3/"},
		"http://ghe.local:8080/acme/fleet/":      {"acme", "fleet", "http://ghe.local:8080/api/v3/"},
	} {
		owner, repo, api, err := githubRepo(mustURL(t, in), "")
		if err != nil || [3]string{owner, repo, api} != want {
			t.Errorf("githubRepo(%s) = %s %s %s %v, want %v", in, owner, repo, api, err, want)
		}
	}
	_, _, api, _ := githubRepo(mustURL(t, "https://github.com/a/b"), "http://127.0.0.1:9/api/v3")
	if api != "http://127.0.0.1:9/api/v3/" {
		t.Errorf("override: %s", api)
	}
	for _, bad := range []string{"https://github.com/acme", "https://github.com/a/b/c"} {
		if _, _, _, err := githubRepo(mustURL(t, bad), ""); err == nil {
			t.Errorf("githubRepo(%s) succeeded", bad)
		}
	}
}

func TestGitLabProject(t *testing.T) {
	for in, want := range map[string][2]string{
		"https://gitlab.com/group/sub/fleet.git": {"group/sub/fleet", "https://gitlab.com/api/v4"},
		"https://gitlab.example/acme/fleet":      {"acme/fleet", "https://gitlab.example/api/v4"},
	} {
		project, api, err := gitlabProject(mustURL(t, in), "")
		if err != nil || [2]string{project, api} != want {
			t.Errorf("gitlabProject(%s) = %s %s %v, want %v", in, project, api, err, want)
		}
	}
	if _, _, err := gitlabProject(mustURL(t, "https://gitlab.com/fleet"), ""); err == nil {
		t.Error("a single path segment was accepted")
	}
}

func TestGiteaRepo(t *testing.T) {
	for in, want := range map[string][3]string{
		"https://gitea.example/acme/fleet.git":     {"acme", "fleet", "https://gitea.example"},
		"https://example.com/git/acme/fleet":       {"acme", "fleet", "https://example.com/git"},
		"http://127.0.0.1:3000/tugboat-admin/repo": {"tugboat-admin", "repo", "http://127.0.0.1:3000"},
	} {
		owner, repo, root, err := giteaRepo(mustURL(t, in), "")
		if err != nil || [3]string{owner, repo, root} != want {
			t.Errorf("giteaRepo(%s) = %s %s %s %v, want %v", in, owner, repo, root, err, want)
		}
	}
	_, _, root, _ := giteaRepo(mustURL(t, "https://x/a/b"), "https://gitea.internal/api/v1/")
	if root != "https://gitea.internal" {
		t.Errorf("override: %s", root)
	}
}

func TestNewProvider_refusesUnknownKinds(t *testing.T) {
	g := NewWithT(t)
	_, err := NewProvider(ProviderConfig{Kind: "bitbucket", RepoURL: mustURL(t, "https://x/a/b")})
	g.Expect(err).To(MatchError(ContainSubstring("unknown provider")))
}

func TestGitBasicAuth(t *testing.T) {
	tok := Credentials{Token: "T"}
	for provider, want := range map[tugboatv1alpha1.GitProvider][2]string{
		tugboatv1alpha1.GitProviderGitHub: {"x-access-token", "T"},
		tugboatv1alpha1.GitProviderGitLab: {"oauth2", "T"},
		tugboatv1alpha1.GitProviderGitea:  {"T", ""},
	} {
		if u, p := tok.gitBasicAuth(provider); [2]string{u, p} != want {
			t.Errorf("%s: %s %s", provider, u, p)
		}
	}
	if u, p := (Credentials{Username: "u", Password: "p"}).gitBasicAuth(tugboatv1alpha1.GitProviderGitHub); u != "u" || p != "p" {
		t.Errorf("basic: %s %s", u, p)
	}
	if s := fmt.Sprintf("%v %+v %#v", tok, tok, tok); s != "token(redacted) token(redacted) token(redacted)" {
		t.Errorf("credentials print as %q", s)
	}
}

func TestScrubber(t *testing.T) {
	g := NewWithT(t)
	s := newScrubber(Credentials{Token: "abc/def+1"})
	err := strategy.Terminal(fmt.Errorf("GET https://x/?t=%s and %s: %w", url.QueryEscape("abc/def+1"), "abc/def+1", errors.ErrUnsupported))
	got := s.error(err)
	g.Expect(got.Error()).To(Equal("GET https://x/?t=*** and ***: unsupported operation"))
	g.Expect(strategy.IsTerminal(got)).To(BeTrue())
	g.Expect(errors.Is(got, errors.ErrUnsupported)).To(BeTrue())
	g.Expect(s.error(nil)).To(Succeed())
}

func TestRefusedByAPI(t *testing.T) {
	g := NewWithT(t)
	resp := func(code int) int { return code }
	g.Expect(refusedByAPI(wrapAPIError(resp(422), errors.New("x")))).To(BeTrue())
	g.Expect(refusedByAPI(fmt.Errorf("wrapped: %w", wrapAPIError(resp(400), errors.New("x"))))).To(BeTrue())
	for _, code := range []int{401, 403, 404, 409, 429, 500, 502} {
		g.Expect(refusedByAPI(wrapAPIError(resp(code), errors.New("x")))).To(BeFalse(), "%d", code)
	}
	g.Expect(refusedByAPI(errors.New("x"))).To(BeFalse())
}
