package promotion_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

var (
	// cluster is a real API server with tugboat's CRDs and the approval
	// policy of the hub chart.
	cluster *harness.Cluster
	// hubc acts as the hub's ServiceAccount.
	hubc client.Client
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		if err := identity.Install(context.Background(), c.Client); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var err error
		if hubc, err = client.New(identity.HubConfig(c.RESTConfig), client.Options{Scheme: c.Client.Scheme()}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}))
}

// approvalFixture runs the hub in-process as its ServiceAccount (so the
// policy treats it as in production) with a strategy that does nothing,
// and creates Pipeline web whose production needs two approvals; alice and
// bob may approve it.
type approvalFixture struct {
	t  *testing.T
	ns string
	p  *tugboatv1alpha1.Pipeline
}

func newApprovalFixture(t *testing.T) *approvalFixture {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "approvals-"}}
	if err := cluster.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	target := func(spoke string) []tugboatv1alpha1.Target {
		return []tugboatv1alpha1.Target{{Spoke: spoke, Namespace: "apps"}}
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "staging", Targets: target("staging-1")},
				{Name: "production", Targets: target("prod-1"), Gates: tugboatv1alpha1.Gates{RequireApproval: true, Approvals: ptr.To[int32](2)}},
			},
		},
	}
	if err := cluster.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob"} {
		if err := identity.Grant(ctx, cluster.Client, ns.Name, user, "web/production"); err != nil {
			t.Fatal(err)
		}
	}
	noop := strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
		return strategy.Result{Message: "no-op"}, nil
	})
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1alpha1.StrategyNotification: noop}
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts)
	return &approvalFixture{t: t, ns: ns.Name, p: p}
}

// request asks, as CI through the hub, for a promotion of version into
// production.
func (f *approvalFixture) request(version string) string {
	f.t.Helper()
	pr, err := request.Create(context.Background(), hubc, f.p, "production", version, tugboatv1alpha1.RequestedByCI, "ci")
	if err != nil {
		f.t.Fatal(err)
	}
	return pr.Name
}

func (f *approvalFixture) get(name string) *tugboatv1alpha1.Promotion {
	f.t.Helper()
	pr := &tugboatv1alpha1.Promotion{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, pr); err != nil {
		f.t.Fatal(err)
	}
	return pr
}

// state is the phase and the Ready condition's message.
func (f *approvalFixture) state(name string) func() string {
	return func() string {
		pr := f.get(name)
		msg := ""
		if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
			msg = c.Message
		}
		return string(pr.Status.Phase) + ": " + msg
	}
}

// vote records user's decision through request.Decide, as user.
func (f *approvalFixture) vote(name, user string, d tugboatv1alpha1.Decision, message string) {
	f.t.Helper()
	c, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), user)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := request.Decide(context.Background(), c, f.ns, name, tugboatv1alpha1.ApprovalVote{
		Decision: d, User: user, Source: tugboatv1alpha1.ApprovalSourceKubernetes, Message: message}); err != nil {
		f.t.Fatal(err)
	}
}

func TestReconciler_startsAfterTwoDistinctApprovals(t *testing.T) {
	g := NewWithT(t)
	f := newApprovalFixture(t)
	name := f.request("1.4.0")

	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(Equal(
		"WaitingApproval: promotion of 1.4.0 into production has 0 of 2 approvals; waiting for 2 more approvals (tugboat approve " + name + ")"))

	f.vote(name, "alice", tugboatv1alpha1.DecisionApprove, "canary fine")
	oneOfTwo := "WaitingApproval: promotion of 1.4.0 into production has 1 of 2 approvals (alice); " +
		"waiting for 1 more approval from someone other than alice (tugboat approve " + name + ")"
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(Equal(oneOfTwo))

	// alice again, around Decide (which would change nothing): the API
	// server takes a second vote naming her, and it does not count twice.
	alice, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "alice")
	g.Expect(err).NotTo(HaveOccurred())
	pr := f.get(name)
	orig := pr.DeepCopy()
	pr.Status.Approvals = append(pr.Status.Approvals, tugboatv1alpha1.ApprovalVote{
		Decision: tugboatv1alpha1.DecisionApprove, User: "alice", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: metav1.Now(), Message: "again"})
	g.Expect(alice.Status().Patch(context.Background(), pr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	g.Consistently(f.state(name), 2*time.Second, 100*time.Millisecond).Should(Equal(oneOfTwo))
	g.Expect(f.get(name).Status.Approval).To(BeNil())

	f.vote(name, "bob", tugboatv1alpha1.DecisionApprove, "")
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }, 30*time.Second, 50*time.Millisecond).
		Should(BeElementOf(tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.PromotionVerifying))
	pr = f.get(name)
	g.Expect(pr.Status.Approval).NotTo(BeNil())
	g.Expect(pr.Status.Approval.ApprovedBy).To(Equal("alice, bob"))
	g.Expect(pr.Status.Approval.RejectedBy).To(BeEmpty())
	g.Expect(pr.Status.StartedAt).NotTo(BeNil())
	g.Expect(pr.Status.Approvals).To(HaveLen(3), "every vote stays on record")
}

func TestReconciler_abortsOnARejection(t *testing.T) {
	g := NewWithT(t)
	f := newApprovalFixture(t)
	name := f.request("1.5.0")
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))

	f.vote(name, "alice", tugboatv1alpha1.DecisionApprove, "")
	f.vote(name, "bob", tugboatv1alpha1.DecisionReject, "not during the freeze")
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(Equal("Aborted: rejected by bob: not during the freeze"))
	pr := f.get(name)
	g.Expect(pr.Status.Approval).NotTo(BeNil())
	g.Expect(pr.Status.Approval.RejectedBy).To(Equal("bob"))
	g.Expect(pr.Status.Approval.Message).To(Equal("not during the freeze"))
	g.Expect(pr.Status.StartedAt).To(BeNil(), "it never started")
	g.Expect(pr.Status.CompletedAt).NotTo(BeNil())
}

// The requester's own approval never counts, even when it reaches the
// status without the policy's check (here the hub's ServiceAccount writes
// it).
func TestReconciler_doesNotCountTheRequestersApproval(t *testing.T) {
	g := NewWithT(t)
	f := newApprovalFixture(t)
	ctx := context.Background()
	alice, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "alice")
	g.Expect(err).NotTo(HaveOccurred())
	pr, err := request.Create(ctx, alice, f.p, "production", "1.6.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.state(pr.Name), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))

	cur := f.get(pr.Name)
	orig := cur.DeepCopy()
	cur.Status.Approvals = append(cur.Status.Approvals, tugboatv1alpha1.ApprovalVote{
		Decision: tugboatv1alpha1.DecisionApprove, User: "alice", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: metav1.Now()})
	g.Expect(hubc.Status().Patch(ctx, cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	f.vote(pr.Name, "bob", tugboatv1alpha1.DecisionApprove, "")
	g.Eventually(f.state(pr.Name), 30*time.Second, 50*time.Millisecond).Should(Equal(
		"WaitingApproval: promotion of 1.6.0 into production has 1 of 2 approvals (bob); not counted: alice requested it, so their approval does not count; " +
			"waiting for 1 more approval from someone other than bob (tugboat approve " + pr.Name + ")"))
	g.Consistently(func() *tugboatv1alpha1.Approval { return f.get(pr.Name).Status.Approval }, time.Second, 100*time.Millisecond).Should(BeNil())
}

// Issue 23, Low 7: where the API server does not enforce the policy
// tugboat-approvals (not installed, or not bound), nothing checks who
// wrote a Kubernetes vote, so the hub counts none and says why; votes
// written meanwhile never count, even once the policy is back.
func TestReconciler_countsNoKubernetesVoteWithoutThePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newApprovalFixture(t)
	name := f.request("1.9.0")
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))

	g.Expect(identity.Uninstall(ctx, cluster.Client)).To(Succeed())
	t.Cleanup(func() {
		if err := identity.Install(context.Background(), cluster.Client); err != nil {
			t.Error(err)
		}
	})
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(HaveSuffix(
		"; Kubernetes votes do not count: the ValidatingAdmissionPolicy tugboat-approvals is not installed (hub chart value approvals.policy), so nothing checks who wrote them"))
	reason := func() string {
		c := apimeta.FindStatusCondition(f.get(name).Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		if c == nil {
			return ""
		}
		return c.Reason
	}
	g.Expect(reason()).To(Equal(tugboatv1alpha1.ApprovalPolicyNotEnforcedReason.String()))

	// alice votes, and, with nothing to stop her, writes a vote in bob's
	// name too: two approvals, as the gate needs, that must not count.
	f.vote(name, "alice", tugboatv1alpha1.DecisionApprove, "")
	alice, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "alice")
	g.Expect(err).NotTo(HaveOccurred())
	forge := func() error { // retried: the hub writes the status too
		pr := f.get(name)
		orig := pr.DeepCopy()
		pr.Status.Approvals = append(pr.Status.Approvals, tugboatv1alpha1.ApprovalVote{
			Decision: tugboatv1alpha1.DecisionApprove, User: "bob", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: metav1.Now()})
		return alice.Status().Patch(ctx, pr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	}
	g.Eventually(forge, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	notCounted := "has 0 of 2 approvals; not counted: alice (Kubernetes) was written while the API server did not enforce the policy tugboat-approvals; " +
		"bob (Kubernetes) was written while the API server did not enforce the policy tugboat-approvals"
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(ContainSubstring(notCounted))
	g.Consistently(func() *tugboatv1alpha1.Approval { return f.get(name).Status.Approval }, 2*time.Second, 100*time.Millisecond).Should(BeNil())
	g.Expect(f.get(name).Status.UnverifiedVotes).To(BeEquivalentTo(2))

	// A binding without Deny does not enforce it either.
	g.Expect(identity.Install(ctx, cluster.Client)).To(Succeed())
	g.Eventually(reason, 30*time.Second, 50*time.Millisecond).Should(Equal(tugboatv1alpha1.WaitingForApprovalReason.String()))
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: identity.PolicyName}, b)).To(Succeed())
	b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
	g.Expect(cluster.Client.Update(ctx, b)).To(Succeed())
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(HaveSuffix(
		"; Kubernetes votes do not count: no ValidatingAdmissionPolicyBinding binds the policy tugboat-approvals with validationActions [Deny], so nothing checks who wrote them"))

	// Back: the votes written without it still do not count, and do not
	// stand in the way of the people's own.
	g.Expect(identity.Install(ctx, cluster.Client)).To(Succeed())
	g.Eventually(reason, 30*time.Second, 50*time.Millisecond).Should(Equal(tugboatv1alpha1.WaitingForApprovalReason.String()))
	g.Expect(f.state(name)()).To(ContainSubstring(notCounted))
	g.Expect(f.get(name).Status.Approval).To(BeNil())
	f.vote(name, "alice", tugboatv1alpha1.DecisionApprove, "")
	f.vote(name, "bob", tugboatv1alpha1.DecisionApprove, "")
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }, 30*time.Second, 50*time.Millisecond).
		Should(BeElementOf(tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.PromotionVerifying))
	g.Expect(f.get(name).Status.Approval.ApprovedBy).To(Equal("alice, bob"))
	g.Expect(f.get(name).Status.Approvals).To(HaveLen(4), "every vote stays on record")
}
