package pullrequest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

const secretData = "cGFzc3dvcmQtbmV2ZXItc2hvd24="

// previewOf is the preview of the request's Promotion: one change on
// prod-eu (a Deployment's diff, a Secret, a values diff).
func previewOf(p promotion) (*tugboatv1alpha1.PromotionPreview, *tugboatv1alpha1.PreviewSummary) {
	name := p.request().Promotion.Name
	digest := strings.Repeat("ab", 32)
	pp := &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: name, UID: p.request().Promotion.UID, Controller: ptr.To(true)}}},
		Spec: tugboatv1alpha1.PromotionPreviewSpec{Promotion: name, Version: p.version, TotalTargets: 1, Deadline: metav1.NewTime(time.Now()),
			Targets: []tugboatv1alpha1.PreviewTarget{{Spoke: "prod-eu", Namespace: "web", Release: "web", ActionID: strings.Repeat("0f", 16), Targets: 1}}},
		Status: tugboatv1alpha1.PromotionPreviewStatus{Groups: []tugboatv1alpha1.PreviewGroup{{
			Digest: digest, Targets: 1, Spokes: []string{"prod-eu"}, FromVersion: "1.2.0", DryRun: "server", ObjectsChanged: 2, LinesChanged: 4,
			Objects: []tugboatv1alpha1.PreviewObject{
				{Kind: "Deployment", Namespace: "web", Name: "web", Change: tugboatv1alpha1.PreviewChanged,
					Diff: "--- a\n+++ b\n@@ -1,2 +1,4 @@\n-        image: web:1.2.0\n+        image: web:1.3.0\n+      tolerations:\n+        - key: dedicated\n"},
				{Kind: "Secret", Namespace: "web", Name: "web-db", Change: tugboatv1alpha1.PreviewChanged, Secret: true},
			},
			ValuesDiff: "--- a/values\n+++ b/values\n@@ -1 +1 @@\n-replicas: 2\n+replicas: 3\n",
		}}},
	}
	sum := &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewReady, Name: name, Digest: digest, ObjectsChanged: 2, LinesChanged: 4, Groups: 1, TargetsPreviewed: 1}
	return pp, sum
}

// A pullRequest Promotion with a preview opens a pull request whose body
// carries the preview: its summary, the objects, the diffs collapsed, the
// Secret only as changed. The strategy reads the PromotionPreview from a
// real API server as the hub's ServiceAccount, with the RBAC we ship.
func TestPromote_gitea_pullRequestBodyCarriesThePreview(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, seedFiles())
	p := promotion{provider: tugboatv1alpha1.GitProviderGitea, url: repo.url, path: "clusters", version: "1.3.0",
		secret: map[string]string{"token": srv.Token}}
	pp, sum := previewOf(p)
	hub := realHub(t, namespace, p.secret)
	status := pp.Status
	pp.Status = tugboatv1alpha1.PromotionPreviewStatus{}
	g.Expect(hub.Create(context.Background(), pp)).To(Succeed())
	orig := pp.DeepCopy()
	pp.Status = status
	g.Expect(hub.Status().Patch(context.Background(), pp, client.MergeFrom(orig))).To(Succeed())
	p.reader, p.summary = hub, sum

	_, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	prs := openGiteaPulls(t, srv, repo.name)
	g.Expect(prs).To(HaveLen(1))
	body := prs[0].Body
	g.Expect(body).To(ContainSubstring("### Preview"))
	g.Expect(body).To(ContainSubstring("Ready: 2 objects and 4 lines change (1 target previewed) (`tugboat diff web-production-1-3-0` shows it all)"))
	g.Expect(body).To(ContainSubstring("**1 target(s)** (prod-eu), from 1.2.0: 2 objects and 4 lines change (server dry run)"))
	g.Expect(body).To(ContainSubstring("- Changed Deployment `web/web`"))
	g.Expect(body).To(ContainSubstring("- Changed Secret `web/web-db`: a Secret, its data never shown"))
	g.Expect(body).To(ContainSubstring("<details><summary>Changed Deployment web/web</summary>\n\n```diff\n--- a\n"))
	g.Expect(body).To(ContainSubstring("+      tolerations:\n"))
	g.Expect(body).To(ContainSubstring("<details><summary>Values diff (sensitive values redacted)</summary>"))
	g.Expect(body).NotTo(ContainSubstring(secretData))
	// The body still opens with what it always said.
	g.Expect(body).To(HavePrefix("Tugboat promotes **web** to **1.3.0** in **production**."))

	// The preview goes stale: the next run updates the open pull request.
	p.summary.Phase = tugboatv1alpha1.PreviewStale
	res, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(ContainSubstring("updated pull request"))
	prs = openGiteaPulls(t, srv, repo.name)
	g.Expect(prs).To(HaveLen(1))
	g.Expect(prs[0].Body).To(ContainSubstring("> **Stale:**"))
}

// A rollback's revert pull request carries no preview: the preview was of
// the version rolled back from.
func TestPromote_gitea_rollbackCarriesNoPreview(t *testing.T) {
	g := NewWithT(t)
	srv := gitea(t)
	repo := newRepo(t, srv, expectedFiles(seedFiles()))
	p := promotion{provider: tugboatv1alpha1.GitProviderGitea, url: repo.url, path: "clusters", version: "1.2.0", rollbackFrom: "1.3.0",
		secret: map[string]string{"token": srv.Token}}
	p.preview, p.summary = previewOf(p)
	_, err := p.run(t)
	g.Expect(err).NotTo(HaveOccurred())
	prs := openGiteaPulls(t, srv, repo.name)
	g.Expect(prs).To(HaveLen(1))
	g.Expect(prs[0].Body).NotTo(ContainSubstring("Preview"))
}
