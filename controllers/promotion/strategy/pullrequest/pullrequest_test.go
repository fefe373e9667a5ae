package pullrequest_test

import (
	"context"
	"strings"
	"testing"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/pullrequest"
	"tugboat.dev/tugboat/controllers/promotion/strategy/pullrequest/giteatest"
)

const (
	prodMarker    = `# tugboat: {"pipeline": "apps/web", "environment": "production"}`
	stagingMarker = `# tugboat: {"pipeline": "apps/web", "environment": "staging"}`
	headBranch    = "tugboat/web/production/1.3.0"
)

// helmRelease is a Flux HelmRelease whose chart version carries marker.
func helmRelease(version, marker string) string {
	return "apiVersion: helm.toolkit.fluxcd.io/v2\n" +
		"kind: HelmRelease\n" +
		"metadata:\n" +
		"  name: web\n" +
		"  namespace: web\n" +
		"spec:\n" +
		"  interval: 5m   # reconcile often\n" +
		"  chart:\n" +
		"    spec:\n" +
		"      chart: web\n" +
		"      version: \"" + version + "\"  " + marker + "\n" +
		"      sourceRef: {kind: HelmRepository, name: charts}\n" +
		"  values:\n" +
		"    replicas: 3\n" +
		"    image: {tag: '1.2.0'}\n"
}

// crlfValues is a values file with Windows line endings and a plain marked
// scalar in a sequence.
func crlfValues(version string) string {
	return "# production values\r\n" +
		"releases:\r\n" +
		"  - name: web\r\n" +
		"    version: " + version + " " + prodMarker + "\r\n" +
		"  - name: other\r\n" +
		"    version: 1.2.0\r\n"
}

func seedFiles() map[string]string {
	return map[string]string{
		"README.md":                              "# fleet\n",
		"clusters/production/web/release.yaml":   helmRelease("1.2.0", prodMarker),
		"clusters/production/web/values.yml":     crlfValues("1.2.0"),
		"clusters/production/web/untouched.yaml": "version: 1.2.0 # pinned by hand\n",
		"clusters/staging/web/release.yaml":      helmRelease("1.2.0", stagingMarker),
		"other/production.yaml":                  helmRelease("1.2.0", prodMarker), // outside path
	}
}

// expectedFiles is seed with only the marked production fields under
// clusters/ set to 1.3.0.
func expectedFiles(seed map[string]string) map[string]string {
	want := map[string]string{}
	for k, v := range seed {
		want[k] = v
	}
	want["clusters/production/web/release.yaml"] = helmRelease("1.3.0", prodMarker)
	want["clusters/production/web/values.yml"] = crlfValues("1.3.0")
	return want
}

func openGiteaPulls(t *testing.T, srv *giteatest.Server, repo string) []*sdk.PullRequest {
	t.Helper()
	c, err := srv.Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	prs, _, err := c.ListRepoPullRequests(giteatest.AdminUser, repo, sdk.ListPullRequestsOptions{State: sdk.StateOpen})
	if err != nil {
		t.Fatal(err)
	}
	return prs
}

func TestPromote_gitea_opensOnePullRequestChangingOnlyTheMarkedFields(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, seedFiles())
	mainBefore := repo.branchHead(t, "main").Hash()
	p := promotion{provider: tugboatv1alpha1.GitProviderGitea, url: repo.url, path: "clusters", version: "1.3.0",
		secret: map[string]string{"token": srv.Token}}

	res, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reference).To(Equal(headBranch))
	g.Expect(res.Message).To(ContainSubstring("opened pull request"))

	prs := openGiteaPulls(t, srv, repo.name)
	g.Expect(prs).To(HaveLen(1))
	pr := prs[0]
	g.Expect(res.URL).To(Equal(pr.HTMLURL))
	g.Expect(pr.Head.Ref).To(Equal(headBranch))
	g.Expect(pr.Base.Ref).To(Equal("main"))
	g.Expect(pr.Title).To(Equal("Promote web to 1.3.0 in production"))
	g.Expect(pr.Body).To(And(ContainSubstring("`apps/web`"), ContainSubstring("`web-production-1-3-0`"),
		ContainSubstring("`1.3.0`"), ContainSubstring("`prod-eu: web/web`"), ContainSubstring("clusters/production/web/release.yaml")))
	// A Promotion without a preview: nothing about one.
	g.Expect(pr.Body).NotTo(ContainSubstring("Preview"))

	// The pushed branch differs from main only at the marked fields,
	// byte for byte.
	commit, files := repo.readBranch(t, headBranch)
	want := expectedFiles(repo.files)
	g.Expect(sortedKeys(files)).To(Equal(sortedKeys(want)))
	for name := range want {
		g.Expect(files[name]).To(Equal(want[name]), name)
	}
	g.Expect(commit.Author.Name).To(Equal("tugboat"))
	g.Expect(commit.Author.Email).To(Equal("tugboat@tugboat.dev"))
	g.Expect(commit.Message).To(Equal("Promote web 1.3.0 to production\n\nPipeline: apps/web\nPromotion: web-production-1-3-0\n"))
	g.Expect(commit.ParentHashes).To(Equal([]plumbing.Hash{mainBefore}))
	g.Expect(repo.branchHead(t, "main").Hash()).To(Equal(mainBefore), "main is never pushed to")

	// Again, as after a controller restart: the same pull request, and the
	// branch is not pushed again.
	pushed := repo.branchHead(t, headBranch).Hash()
	res2, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res2.URL).To(Equal(res.URL))
	g.Expect(res2.Message).To(ContainSubstring("pull request is open"))
	g.Expect(openGiteaPulls(t, srv, repo.name)).To(HaveLen(1))
	g.Expect(repo.branchHead(t, headBranch).Hash()).To(Equal(pushed))

	// main moves on: the branch is replaced by one on the new main, and the
	// pull request is reused.
	repo.commitToMain(t, "unrelated change", map[string]string{"docs/notes.md": "notes\n"})
	newMain := repo.branchHead(t, "main").Hash()
	res3, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res3.URL).To(Equal(res.URL))
	g.Expect(openGiteaPulls(t, srv, repo.name)).To(HaveLen(1))
	commit, files = repo.readBranch(t, headBranch)
	g.Expect(commit.ParentHashes).To(Equal([]plumbing.Hash{newMain}))
	g.Expect(files).To(Equal(expectedFiles(repo.files)))
}

func TestPromote_alreadyAtTheVersionIsSuccessWithNothingPushed(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, map[string]string{"release.yaml": helmRelease("1.3.0", prodMarker)})
	p := promotion{provider: tugboatv1alpha1.GitProviderGitea, url: repo.url, version: "1.3.0",
		secret: map[string]string{"token": srv.Token}}

	res, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(HavePrefix("already at 1.3.0"))
	g.Expect(res.URL).To(BeEmpty())
	g.Expect(repo.branchHead(t, headBranch)).To(BeNil())
	g.Expect(openGiteaPulls(t, srv, repo.name)).To(BeEmpty())
}

func TestPromote_noMarkedFieldIsTerminal(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, map[string]string{
		"staging.yaml": helmRelease("1.2.0", stagingMarker),
		"prod.yaml":    helmRelease("1.2.0", "# tugboat: {\"pipeline\": \"apps/other\", \"environment\": \"production\"}"),
	})
	p := promotion{provider: tugboatv1alpha1.GitProviderGitea, url: repo.url, version: "1.3.0",
		secret: map[string]string{"token": srv.Token}}

	_, err := p.run(t)
	g.Expect(err).To(HaveOccurred())
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("no field marked for pipeline apps/web environment production under path /"))
	g.Expect(repo.branchHead(t, headBranch)).To(BeNil())

	// A path that does not exist is terminal too.
	p.path = "clusters/nowhere"
	_, err = p.run(t)
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring(`path "clusters/nowhere" does not exist`))
}

func TestPromote_credentials(t *testing.T) {
	base := promotion{provider: tugboatv1alpha1.GitProviderGitHub, url: "https://github.com/acme/fleet", version: "1.3.0"}

	t.Run("missing secret is retryable", func(t *testing.T) {
		g := NewWithT(t)
		_, err := base.run(t)
		g.Expect(err).To(MatchError(ContainSubstring("credentials secret apps/git-credentials not found")))
		g.Expect(strategy.IsTerminal(err)).To(BeFalse())
	})
	for name, secret := range map[string]map[string]string{
		"no keys":          {"apiURL": "https://api.example"},
		"username only":    {"username": "bot"},
		"blank token":      {"token": " \n"},
		"malformed apiURL": {"token": "t", "apiURL": "ftp://x"},
	} {
		t.Run(name+" is terminal", func(t *testing.T) {
			g := NewWithT(t)
			p := base
			p.secret = secret
			_, err := p.run(t)
			g.Expect(err).To(HaveOccurred())
			g.Expect(strategy.IsTerminal(err)).To(BeTrue(), err.Error())
		})
	}
	t.Run("ssh URL is terminal", func(t *testing.T) {
		g := NewWithT(t)
		p := base
		p.url, p.secret = "ssh://git@github.com/acme/fleet.git", map[string]string{"token": "t"}
		_, err := p.run(t)
		g.Expect(strategy.IsTerminal(err)).To(BeTrue())
	})
}

// Authentication failures against the real git server are retryable: the
// token may be rotated in the Secret while the Promotion waits, and the
// reconciler's backoff and timeout bound the retries. The error never shows
// the credentials, not even ones written into the URL.
func TestPromote_badCredentialsAreRetryableAndNotShown(t *testing.T) {
	srv := gitea(t)
	repo := newRepo(t, srv, map[string]string{"release.yaml": helmRelease("1.2.0", prodMarker)})
	const badToken = "s3cr3t-but-wrong-token-0123456789abcdef"
	const urlPassword = "password-in-the-url-9876"
	withUserInURL := strings.Replace(repo.url, "://", "://someone:"+urlPassword+"@", 1)

	for name, p := range map[string]promotion{
		"token": {provider: tugboatv1alpha1.GitProviderGitea, url: repo.url, version: "1.3.0",
			secret: map[string]string{"token": badToken}},
		"username and password": {provider: tugboatv1alpha1.GitProviderGitLab, url: withUserInURL, version: "1.3.0",
			secret: map[string]string{"username": giteatest.AdminUser, "password": badToken}},
		"github user name": {provider: tugboatv1alpha1.GitProviderGitHub, url: repo.url, version: "1.3.0",
			secret: map[string]string{"token": badToken, "apiURL": "http://127.0.0.1:1/"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := p.run(t)
			g.Expect(err).To(HaveOccurred())
			g.Expect(strategy.IsTerminal(err)).To(BeFalse(), err.Error())
			g.Expect(err.Error()).To(ContainSubstring("authentication failed"))
			g.Expect(err.Error()).NotTo(ContainSubstring(badToken))
			g.Expect(err.Error()).NotTo(ContainSubstring(urlPassword))
		})
	}
	g := NewWithT(t)
	g.Expect(repo.branchHead(t, headBranch)).To(BeNil())
}

func TestPromote_github_opensOnePullRequestThroughTheAPI(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, seedFiles())
	api := newGitHubStub(t, giteatest.AdminUser, repo.name, srv.Token, repo.branchExists)
	p := promotion{provider: tugboatv1alpha1.GitProviderGitHub, url: repo.url, path: "clusters", version: "1.3.0",
		secret: map[string]string{"token": srv.Token, "apiURL": api.APIURL()}}

	res, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.Failures()).To(BeEmpty())
	g.Expect(api.Creates()).To(Equal(1))
	g.Expect(res.URL).To(Equal("https://github.example/" + giteatest.AdminUser + "/" + repo.name + "/pull/1"))
	open := api.Open()
	g.Expect(open).To(HaveLen(1))
	g.Expect(open[0].Head).To(Equal(headBranch))
	g.Expect(open[0].Base).To(Equal("main"))
	g.Expect(open[0].Title).To(Equal("Promote web to 1.3.0 in production"))
	g.Expect(open[0].Body).To(ContainSubstring("`apps/web`"))
	_, files := repo.readBranch(t, headBranch)
	g.Expect(files).To(Equal(expectedFiles(repo.files)))

	pushed := repo.branchHead(t, headBranch).Hash()
	res2, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res2.URL).To(Equal(res.URL))
	g.Expect(api.Creates()).To(Equal(1))
	g.Expect(api.Updates()).To(Equal(0))
	g.Expect(repo.branchHead(t, headBranch).Hash()).To(Equal(pushed))
	g.Expect(api.Failures()).To(BeEmpty())
}

func TestPromote_gitlab_reusesAndUpdatesTheOpenMergeRequest(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, seedFiles())
	project := giteatest.AdminUser + "/" + repo.name
	api := newGitLabStub(t, project, srv.Token, repo.branchExists)
	// A merge request left open by an earlier attempt, with an old title.
	api.Seed(stubPR{Head: headBranch, Base: "main", Title: "old title", Body: "old"})
	// And an unrelated one.
	api.Seed(stubPR{Head: "feature", Base: "main", Title: "feature"})
	p := promotion{provider: tugboatv1alpha1.GitProviderGitLab, url: strings.TrimSuffix(repo.url, ".git"), path: "clusters", version: "1.3.0",
		secret: map[string]string{"token": srv.Token, "apiURL": api.APIURL()}}

	res, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.Failures()).To(BeEmpty())
	g.Expect(api.Creates()).To(Equal(0))
	g.Expect(api.Updates()).To(Equal(1))
	g.Expect(res.URL).To(Equal("https://gitlab.example/" + project + "/-/merge_requests/1"))
	g.Expect(res.Message).To(ContainSubstring("updated pull request"))
	open := api.Open()
	g.Expect(open).To(HaveLen(2))
	g.Expect(open[0].Title).To(Equal("Promote web to 1.3.0 in production"))
	g.Expect(open[0].Body).To(ContainSubstring("`web-production-1-3-0`"))

	res2, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res2.URL).To(Equal(res.URL))
	g.Expect(api.Creates()).To(Equal(0))
	g.Expect(api.Updates()).To(Equal(1))
}

func TestPromote_gitlab_opensAMergeRequest(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, seedFiles())
	project := giteatest.AdminUser + "/" + repo.name
	api := newGitLabStub(t, project, srv.Token, repo.branchExists)
	p := promotion{provider: tugboatv1alpha1.GitProviderGitLab, url: repo.url, path: "clusters", version: "1.3.0",
		secret: map[string]string{"token": srv.Token, "apiURL": api.APIURL()}}

	res, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.Failures()).To(BeEmpty())
	g.Expect(api.Creates()).To(Equal(1))
	g.Expect(res.URL).To(Equal("https://gitlab.example/" + project + "/-/merge_requests/1"))
	_, err = p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.Creates()).To(Equal(1))
	g.Expect(api.Open()).To(HaveLen(1))
}

// TestPromote_plainHTTPIsRefusedByDefault: a repository over plain http://
// would receive the git credentials in clear; unless the hub allows it
// (--pull-request-allow-http, local development), the strategy refuses it,
// terminally, before reading the credentials (security review 3, medium 9).
func TestPromote_plainHTTPIsRefusedByDefault(t *testing.T) {
	g := NewWithT(t)
	p := promotion{provider: tugboatv1alpha1.GitProviderGitea, url: "http://git.example.com/acme/fleet", version: "1.3.0",
		secret: map[string]string{"token": "s3cr3t"}}
	s := pullrequest.New(p.hub(), pullrequest.WithWorkDir(t.TempDir()))
	_, err := s.Promote(context.Background(), p.request())
	g.Expect(strategy.IsTerminal(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("url http://git.example.com/acme/fleet is plain http://, which would send the git credentials in clear")))
}

// TestPromote_gitGoesThroughTheEgressPolicy: go-git reaches repositories
// through the transport the hub installs (its egress policy's client), so a
// repository on loopback (the hub's own node) is refused before any
// credential is sent, nothing pushed and no pull request opened (security review 3,
// medium 9: git used a plain client).
func TestPromote_gitGoesThroughTheEgressPolicy(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, seedFiles())
	pullrequest.InstallGitTransport(egress.Policy{}.Client(0))
	t.Cleanup(func() { pullrequest.InstallGitTransport(nil) })
	p := promotion{provider: tugboatv1alpha1.GitProviderGitea, url: repo.url, path: "clusters", version: "1.3.0",
		secret: map[string]string{"token": srv.Token}}

	_, err := p.run(t)
	// Refused at the clone, the first request: nothing pushed, no pull
	// request opened, no credential sent.
	g.Expect(err).To(MatchError(And(ContainSubstring("cloning branch main"), ContainSubstring("is a loopback address"))))
}
