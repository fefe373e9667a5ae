package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/identity"
)

// An abort request the API server admitted (alice, with the verb abort)
// moves a waiting Promotion to Aborted, naming her and why; carol (no
// verb) and a request naming someone else are refused by the policy; a
// finished Promotion takes none.
func TestReconciler_abortsOnAnAuthenticatedRequest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newApprovalFixture(t)
	g.Expect(identity.GrantAbort(ctx, cluster.Client, f.ns, "alice", "web/*")).To(Succeed())
	g.Expect(identity.GrantAbort(ctx, cluster.Client, f.ns, "carol")).To(Succeed())
	name := f.request("1.8.0")
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))

	as := func(user string) client.Client {
		c, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), user)
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	_, err := request.Abort(ctx, as("carol"), f.ns, name, tugboatv1alpha1.AbortRequest{User: "carol"})
	g.Expect(err).To(MatchError(ContainSubstring("user carol may not abort promotions into web/production")))
	g.Expect(err).To(MatchError(request.ErrNotAllowed))

	// A forged name: alice may abort, but not in bob's name.
	_, err = request.Abort(ctx, as("alice"), f.ns, name, tugboatv1alpha1.AbortRequest{User: "bob"})
	g.Expect(err).To(MatchError(ContainSubstring("status.abortRequest must name you (user alice)")))
	g.Expect(f.get(name).Status.AbortRequest).To(BeNil())

	pr, err := request.Abort(ctx, as("alice"), f.ns, name, tugboatv1alpha1.AbortRequest{User: "alice", Message: "wrong build"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Status.AbortRequest.User).To(Equal("alice"))
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(Equal("Aborted: aborted by alice: wrong build"))
	got := f.get(name)
	g.Expect(got.Status.CompletedAt).NotTo(BeNil())
	g.Expect(got.Status.StartedAt).To(BeNil(), "it never started")

	// Asking again changes nothing; the recorded request cannot be changed,
	// even around request.Abort.
	_, err = request.Abort(ctx, as("alice"), f.ns, name, tugboatv1alpha1.AbortRequest{User: "alice"})
	g.Expect(err).NotTo(HaveOccurred())
	orig := got.DeepCopy()
	got.Status.AbortRequest = &tugboatv1alpha1.AbortRequest{User: "alice", Time: metav1.Now(), Message: "changed"}
	err = as("alice").Status().Patch(ctx, got, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("alice already asked to abort this promotion; a recorded abort request cannot be changed or removed")))

	// A finished Promotion cannot be aborted, whether asked through
	// request.Abort or written directly.
	done := f.request("1.9.0")
	g.Eventually(f.state(done), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))
	f.vote(done, "bob", tugboatv1alpha1.DecisionReject, "no")
	g.Eventually(f.state(done), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("Aborted: rejected by bob"))
	_, err = request.Abort(ctx, as("alice"), f.ns, done, tugboatv1alpha1.AbortRequest{User: "alice"})
	g.Expect(err).To(MatchError("promotion " + done + " has already finished (Aborted): there is nothing to abort"))
	g.Expect(err).To(MatchError(request.ErrNotWaiting))
	finished := f.get(done)
	orig = finished.DeepCopy()
	finished.Status.AbortRequest = &tugboatv1alpha1.AbortRequest{User: "alice", Time: metav1.Now()}
	err = as("alice").Status().Patch(ctx, finished, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("the promotion has already finished (Aborted): there is nothing to abort")))

	_, err = request.Abort(ctx, as("alice"), f.ns, "web-production-0.0.1", tugboatv1alpha1.AbortRequest{User: "alice"})
	g.Expect(err).To(MatchError("promotion " + f.ns + "/web-production-0.0.1 not found"))
	_, err = request.Abort(ctx, as("alice"), f.ns, name, tugboatv1alpha1.AbortRequest{})
	g.Expect(err).To(MatchError("user: required: the authenticated identity"))
}
