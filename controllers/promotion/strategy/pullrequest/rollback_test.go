package pullrequest_test

import (
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestPromote_gitea_opensARevertPullRequestForARollback: production's
// marked fields run 1.3.0 (its promotion was merged) when the rollout of
// 1.3.0 spends its budget; the rollback request opens a pull request of its
// own (branch tugboat/web/production/rollback-1.3.0-to-1.2.0, a title and
// body that say it is a rollback) setting the fields back to 1.2.0, byte for
// byte what they were; run again, it reuses it.
func TestPromote_gitea_opensARevertPullRequestForARollback(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	promoted := expectedFiles(seedFiles())
	repo := newRepo(t, srv, promoted)
	mainBefore := repo.branchHead(t, "main").Hash()
	p := promotion{provider: tugboatv1alpha1.GitProviderGitea, url: repo.url, path: "clusters", version: "1.2.0", rollbackFrom: "1.3.0",
		secret: map[string]string{"token": srv.Token}}
	const branch = "tugboat/web/production/rollback-1.3.0-to-1.2.0"

	res, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reference).To(Equal(branch))
	g.Expect(res.Message).To(ContainSubstring("opened pull request"))
	prs := openGiteaPulls(t, srv, repo.name)
	g.Expect(prs).To(HaveLen(1))
	g.Expect(res.URL).To(Equal(prs[0].HTMLURL))
	g.Expect(prs[0].Head.Ref).To(Equal(branch))
	g.Expect(prs[0].Title).To(Equal("Roll back web from 1.3.0 to 1.2.0 in production"))
	g.Expect(prs[0].Body).To(ContainSubstring("the rollout of 1.3.0 spent its failure budget (onFailure: Rollback)"))

	commit, files := repo.readBranch(t, branch)
	want := seedFiles()
	g.Expect(sortedKeys(files)).To(Equal(sortedKeys(want)))
	for name := range want {
		g.Expect(files[name]).To(Equal(want[name]), name)
	}
	g.Expect(commit.Message).To(HavePrefix("Roll back web from 1.3.0 to 1.2.0 in production\n"))
	g.Expect(repo.branchHead(t, "main").Hash()).To(Equal(mainBefore), "main is never pushed to")

	again, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.URL).To(Equal(res.URL))
	g.Expect(openGiteaPulls(t, srv, repo.name)).To(HaveLen(1))
}
