package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/identity"
)

const (
	previewDigest = "c0c0ffee00000000000000000000000000000000000000000000000000000001"
	okAction      = "0123456789abcdef0123456789abcdef"
	failedAction  = "fedcba9876543210fedcba9876543210"
	// scriptLine is a line of a manifest diff that a browser would run,
	// were it not escaped.
	scriptLine = `+        note: "<script>window.pwned = true</script><img src=x onerror=window.pwned=true>"`
)

// deploymentDiff is the change of the sample chart's Deployment: the
// toleration it forgot, and a line that must render as text.
var deploymentDiff = strings.Join([]string{
	"--- a/apps/Deployment/web",
	"+++ b/apps/Deployment/web",
	"@@ -20,6 +20,10 @@",
	"       containers:",
	"-        image: web:2.1.0",
	"+        image: web:2.2.0",
	"+      tolerations:",
	"+        - key: dedicated",
	"+          operator: Exists",
	scriptLine,
	"",
}, "\n")

// seedPreview gives the Promotion name of f the preview the hub would
// store: status.preview, and a PromotionPreview with one change (four
// objects, one of them a Secret, the values diff, a truncation note) that
// prod-1 makes, and a failed answer of prod-2. Written as the hub's
// ServiceAccount.
func seedPreview(t *testing.T, ns, name string, phase tugboatv1alpha1.PreviewPhase, reason string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pr := &tugboatv1alpha1.Promotion{}
	must(hubc.Get(ctx, key(ns, name), pr))
	pp := &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: tugboatv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: pr.Name, UID: pr.UID, Controller: ptr.To(true)}}},
		Spec: tugboatv1alpha1.PromotionPreviewSpec{Promotion: name, Version: "1.4.0", TotalTargets: 3, Deadline: metav1.NewTime(time.Now().Add(time.Minute)),
			Targets: []tugboatv1alpha1.PreviewTarget{
				{Spoke: "prod-1", Namespace: "apps", Release: "web", ActionID: okAction, Targets: 2, Spokes: []string{"prod-1", "prod-3"}},
				{Spoke: "prod-2", Namespace: "apps", Release: "web", ActionID: failedAction, Targets: 1, Spokes: []string{"prod-2"}},
			}},
	}
	must(hubc.Create(ctx, pp))
	orig := pp.DeepCopy()
	pp.Status = tugboatv1alpha1.PromotionPreviewStatus{
		Targets: []tugboatv1alpha1.PreviewTargetStatus{
			{ActionID: okAction, Phase: tugboatv1alpha1.ActionSucceeded, Digest: previewDigest, Revision: 7, Deliveries: 1},
			{ActionID: failedAction, Phase: tugboatv1alpha1.ActionFailed, Message: "rendering web 1.4.0: template: web/templates/job.yaml:3: nil pointer", Deliveries: 1},
		},
		Groups: []tugboatv1alpha1.PreviewGroup{{
			Digest: previewDigest, Targets: 2, Spokes: []string{"prod-1", "prod-3"}, FromVersion: "1.3.0", DryRun: "server",
			ObjectsChanged: 5, LinesChanged: 9,
			Objects: []tugboatv1alpha1.PreviewObject{
				{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web", Change: tugboatv1alpha1.PreviewChanged, Diff: deploymentDiff},
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "web-flags", Change: tugboatv1alpha1.PreviewAdded,
					Diff: "--- a/apps/ConfigMap/web-flags\n+++ b/apps/ConfigMap/web-flags\n@@ -0,0 +1,3 @@\n+kind: ConfigMap\n+data:\n+  beta: \"on\"\n"},
				{APIVersion: "v1", Kind: "Secret", Namespace: "apps", Name: "web-db", Change: tugboatv1alpha1.PreviewChanged, Secret: true},
				{APIVersion: "batch/v1", Kind: "Job", Namespace: "apps", Name: "web-migrate", Change: tugboatv1alpha1.PreviewRemoved, Truncated: true},
			},
			ValuesDiff: "--- a/values\n+++ b/values\n@@ -1,3 +1,3 @@\n image:\n-  tag: 2.1.0\n+  tag: 2.2.0\n db:\n   password: <redacted>\n",
			Truncated:  true, Note: "1 object not listed: the group holds at most 4 here",
		}},
	}
	must(hubc.Status().Patch(ctx, pp, client.MergeFrom(orig)))

	origPr := pr.DeepCopy()
	pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: phase, Name: name, Digest: previewDigest, ObjectsChanged: 5, LinesChanged: 9,
		Groups: 1, TargetsPreviewed: 2, Reason: reason, ComputedAt: ago(time.Minute)}
	must(hubc.Status().Patch(ctx, pr, client.MergeFrom(origPr)))
}

// bindApprover binds the hub chart's ClusterRole tugboat-approver (what we
// ship for people who approve) to user in ns, and waits until RBAC lets
// them read PromotionPreviews.
func bindApprover(t *testing.T, ns, user string) {
	t.Helper()
	ctx := context.Background()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approver-role-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: identity.ApproverRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := hub.Client.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	c, err := identity.Client(hub.RESTConfig, hub.Client.Scheme(), user)
	if err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() error {
		return c.List(ctx, &tugboatv1alpha1.PromotionPreviewList{}, client.InNamespace(ns))
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
}

// An approver who holds the ClusterRole we ship sees, on the Promotion's
// page, what it would change: the summary, the failed target with its
// reason, the objects with expandable, colored diffs, the Secret without
// data, the values diff and the truncation note. A diff's <script> is
// text, never run.
func TestBrowser_promotionPageShowsThePreview(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	bindApprover(t, f.NS, "carol")
	seedPreview(t, f.NS, f.Waiting, tugboatv1alpha1.PreviewReady, "1 of 2 targets asked failed")
	d := serve(t, f.NS, "carol", false)
	ctx := newChrome(t)

	do(t, ctx, chromedp.Navigate(d.URL+"/promotions/"+f.Waiting), chromedp.WaitVisible(chromedp.ID("preview")))
	waitLive(t, ctx)
	text := func(expr string) string {
		t.Helper()
		s, err := eval[string](ctx, expr)
		g.Expect(err).NotTo(HaveOccurred())
		return s
	}
	g.Expect(text(`document.getElementById("preview-summary").innerText`)).To(And(
		ContainSubstring("Ready: 5 objects and 9 lines change (2 targets previewed)"), ContainSubstring("computed ")))
	g.Expect(text(`document.getElementById("preview-reason").innerText`)).To(Equal("1 of 2 targets asked failed"))
	g.Expect(text(`document.getElementById("preview-failed").innerText`)).To(And(
		ContainSubstring("prod-2/apps/web"), ContainSubstring("Failed"), ContainSubstring("nil pointer")))
	g.Expect(text(`document.querySelector("#pv-1 h3").innerText`)).To(Equal("2 targets (prod-1, prod-3)"))
	g.Expect(text(`document.querySelector("#pv-1 p.small").innerText`)).To(And(
		ContainSubstring("from 1.3.0"), ContainSubstring("5 objects, 9 lines change"), ContainSubstring("server dry run"),
		ContainSubstring("1 added, 1 removed, 2 changed")))
	g.Expect(text(`document.querySelector("#pv-1 .pv-note").innerText`)).To(ContainSubstring("1 object not listed"))
	g.Expect(text(`Array.from(document.querySelectorAll("#pv-1 ul.pv-objects > li")).map(li => li.dataset.change + " " + li.querySelector("summary, p").innerText).join("\n")`)).
		To(Equal(strings.Join([]string{
			"Changed Changed Deployment apps/web",
			"Added Added ConfigMap apps/web-flags",
			"Changed Changed Secret apps/web-db Secret: its data is never sent, only that it changed",
			"Removed Removed Job apps/web-migrate (diff left out)",
		}, "\n")))
	// A Secret has no diff to open.
	g.Expect(eval[int](ctx, `document.querySelectorAll("#pv-1 details").length`)).To(Equal(3))

	// Diffs are closed until opened; opened, their lines are colored by
	// kind, and a diff's markup is text.
	g.Expect(eval[bool](ctx, `document.getElementById("pv-1-0").open`)).To(BeFalse())
	g.Expect(eval[bool](ctx, `document.querySelector("#pv-1-0 pre").checkVisibility()`)).To(BeFalse())
	click(t, ctx, "#pv-1-0 summary")
	g.Eventually(func() (bool, error) {
		return eval[bool](ctx, `document.querySelector("#pv-1-0 pre").checkVisibility()`)
	}, 5*time.Second, 20*time.Millisecond).Should(BeTrue())
	g.Expect(text(`document.querySelector("#pv-1-0 pre").textContent`)).To(Equal(deploymentDiff))
	g.Expect(eval[[]string](ctx, `Array.from(document.querySelectorAll("#pv-1-0 pre span")).map(s => s.className)`)).To(Equal([]string{
		"d-file", "d-file", "d-hunk", "d-ctx", "d-del", "d-add", "d-add", "d-add", "d-add", "d-add"}))
	add, del := text(`getComputedStyle(document.querySelector("#pv-1-0 .d-add")).backgroundColor`), text(`getComputedStyle(document.querySelector("#pv-1-0 .d-del")).backgroundColor`)
	g.Expect(add).NotTo(Equal(del))
	g.Expect(add).NotTo(Equal("rgba(0, 0, 0, 0)"))
	g.Expect(eval[int](ctx, `document.querySelectorAll("#preview script, #preview img").length`)).To(BeZero())
	g.Expect(eval[bool](ctx, `window.pwned === true`)).To(BeFalse())
	g.Expect(text(`document.querySelector("#pv-1-0 pre span:last-child").textContent`)).To(Equal(scriptLine + "\n"))

	click(t, ctx, "#pv-1-values summary")
	g.Eventually(func() (string, error) {
		return eval[string](ctx, `document.querySelector("#pv-1-values pre").innerText`)
	}, 5*time.Second, 20*time.Millisecond).
		Should(And(ContainSubstring("+  tag: 2.2.0"), ContainSubstring("password: <redacted>")))
	g.Expect(eval[[]string](ctx, auditJS)).To(BeEmpty())
	screenshot(t, ctx, "dashboard-preview")

	// The hub marks the preview stale; the page says so, live, and the
	// diff the approver opened stays open.
	g.Expect(eval[bool](ctx, `window.notReloaded = true`)).To(BeTrue())
	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(hubc.Get(context.Background(), key(f.NS, f.Waiting), pr)).To(Succeed())
	orig := pr.DeepCopy()
	pr.Status.Preview.Phase = tugboatv1alpha1.PreviewStale
	pr.Status.Preview.Reason = "prod-1/apps/web moved from revision 7 to 8"
	g.Expect(hubc.Status().Patch(context.Background(), pr, client.MergeFrom(orig))).To(Succeed())
	g.Eventually(func() (string, error) {
		return eval[string](ctx, `(document.getElementById("preview-stale") || {}).innerText || ""`)
	}, 5*time.Second, 20*time.Millisecond).Should(And(ContainSubstring("Stale"), ContainSubstring("revision 7 to 8")))
	g.Expect(text(`document.querySelector("[data-preview-phase]").dataset.previewPhase`)).To(Equal("Stale"))
	g.Expect(eval[bool](ctx, `window.notReloaded === true && document.getElementById("pv-1-0").open`)).To(BeTrue())
}

// A user whose RBAC does not let them read PromotionPreviews sees the
// summary (it is in the Promotion's status) and why the diffs are missing.
func TestPromotionPage_previewWithoutRightsShowsTheSummaryOnly(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	seedPreview(t, f.NS, f.Waiting, tugboatv1alpha1.PreviewReady, "")
	// alice's role (grantView, identity.Grant) has no promotionpreviews.
	d := serve(t, f.NS, "alice", false)
	b := newBrowser(t, d)
	status, body := b.get("/promotions/" + f.Waiting)
	g.Expect(status).To(Equal(200))
	g.Expect(body).To(ContainSubstring("Ready: 5 objects and 9 lines change (2 targets previewed)"))
	g.Expect(body).To(ContainSubstring(`id="preview-unread"`))
	g.Expect(body).To(ContainSubstring("You may not read the PromotionPreview " + f.Waiting))
	g.Expect(body).NotTo(ContainSubstring("tolerations"))
	g.Expect(body).NotTo(ContainSubstring(`id="pv-1"`))
}

// A Promotion without a preview has no preview section; a failed preview
// shows its reason and no objects.
func TestPromotionPage_noPreviewAndFailedPreview(t *testing.T) {
	g := NewWithT(t)
	f := seed(t)
	d := serve(t, f.NS, "alice", false)
	b := newBrowser(t, d)
	_, body := b.get("/promotions/" + f.Waiting)
	g.Expect(body).NotTo(ContainSubstring(`id="preview"`))

	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(hubc.Get(context.Background(), key(f.NS, f.Done), pr)).To(Succeed())
	orig := pr.DeepCopy()
	pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewFailed, Reason: "no agent answered within 1m0s <b>bold</b>"}
	g.Expect(hubc.Status().Patch(context.Background(), pr, client.MergeFrom(orig))).To(Succeed())
	_, body = b.get("/promotions/" + f.Done)
	g.Expect(body).To(ContainSubstring(`data-preview-phase="Failed"`))
	g.Expect(body).To(ContainSubstring("Failed: no agent answered within 1m0s &lt;b&gt;bold&lt;/b&gt;"))
	g.Expect(body).NotTo(ContainSubstring("<b>bold</b>"))
	g.Expect(body).NotTo(ContainSubstring(`class="pv-group"`))
}
