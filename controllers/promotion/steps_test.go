package promotion_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/lifecycle"
	"tugboat.dev/tugboat/controllers/promotion"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/identity"
)

// stepsFixture is a namespace of its own with Pipeline web whose
// production (prod-1, release apps/web) has the given steps, the Lifecycle
// db-migrate, and a step controller: the ServiceAccount migrator of the
// namespace, bound to the chart's ClusterRole tugboat-step-controller. The
// strategy changes nothing and counts its calls; the test reports what
// prod-1's agent would (report).
type stepsFixture struct {
	t        *testing.T
	ns       string
	p        *tugboatv1alpha1.Pipeline
	migrator string // the step controller's user name

	mu    sync.Mutex
	calls int
	hub   *hub.Hub // the hub started last
}

func newStepsFixture(t *testing.T, steps *tugboatv1alpha1.Steps, with ...func(*tugboatv1alpha1.Environment)) *stepsFixture {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns, p := stagingProduction(g, "steps", nil)
	f := &stepsFixture{t: t, ns: ns.Name, p: p, migrator: "system:serviceaccount:" + ns.Name + ":migrator"}
	orig := p.DeepCopy()
	p.Spec.Environments[1].Steps = steps
	for _, w := range with {
		w(&p.Spec.Environments[1])
	}
	g.Expect(cluster.Client.Patch(ctx, p, client.MergeFrom(orig))).To(Succeed())
	// Once this test ends, its Promotion is another test's leftover: the
	// Pipeline goes, so a later hub aborts it instead of acting on it.
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), p) })
	g.Expect(cluster.Client.Create(ctx, &tugboatv1alpha1.Lifecycle{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "db-migrate"},
		Spec:       tugboatv1alpha1.LifecycleSpec{EventKey: "db-migrate", Description: "migrates the schema"},
	})).To(Succeed())
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: tugboatv1alpha1.ReleaseHistoryName("prod-1", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "prod-1", Namespace: "apps", Release: "web"},
	}
	g.Expect(cluster.Client.Create(ctx, rh)).To(Succeed())
	f.report("1.0.0", 1)

	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "migrator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tugboat-step-controller"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.ns, Name: "migrator"}},
	}
	g.Expect(cluster.Client.Create(ctx, binding)).To(Succeed())
	g.Eventually(func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: f.migrator, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: f.ns, Verb: "patch", Group: "tugboat.dev", Resource: "lifecycleevents", Subresource: "status"},
		}}
		g.Expect(cluster.Client.Create(ctx, sar)).To(Succeed())
		return sar.Status.Allowed
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the step controller's RBAC is in effect")
	return f
}

// startHub runs the hub as its ServiceAccount with a strategy that counts
// this namespace's calls.
func (f *stepsFixture) startHub(mutate ...func(*hub.Options)) func() {
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1alpha1.StrategyNotification: strategy.Func(func(_ context.Context, req strategy.Request) (strategy.Result, error) {
		if req.Promotion.Namespace == f.ns {
			f.mu.Lock()
			f.calls++
			f.mu.Unlock()
		}
		return strategy.Result{Message: "notified"}, nil
	})}
	for _, m := range mutate {
		m(&opts)
	}
	h, stop := hubtest.Start(f.t, identity.HubConfig(cluster.RESTConfig), opts)
	f.mu.Lock()
	f.hub = h
	f.mu.Unlock()
	return stop
}

func (f *stepsFixture) strategyCalls() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

// report writes what prod-1's agent reports of apps/web, as the hub's
// recorder does: version at revision, deployed and healthy.
func (f *stepsFixture) report(version string, revision int32) {
	f.t.Helper()
	ctx := context.Background()
	rh := &tugboatv1alpha1.ReleaseHistory{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: tugboatv1alpha1.ReleaseHistoryName("prod-1", "apps", "web")}, rh); err != nil {
		f.t.Fatal(err)
	}
	now := metav1.Now()
	cur := tugboatv1alpha1.RevisionSummary{Revision: revision, Chart: "web", ChartVersion: version,
		Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: tugboatv1alpha1.HealthCurrent, LastDeployed: &now}
	rh.Status.Current = &cur
	rh.Status.Revisions = append([]tugboatv1alpha1.Revision{{RevisionSummary: cur}}, rh.Status.Revisions...)
	if err := cluster.Client.Status().Update(ctx, rh); err != nil {
		f.t.Fatal(err)
	}
}

func (f *stepsFixture) promote(version string) string {
	f.t.Helper()
	pr, err := request.Create(context.Background(), hubc, f.p, "production", version, tugboatv1alpha1.RequestedByCI, "ci")
	if err != nil {
		f.t.Fatal(err)
	}
	return pr.Name
}

func (f *stepsFixture) get(name string) *tugboatv1alpha1.Promotion {
	pr := &tugboatv1alpha1.Promotion{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, pr); err != nil {
		f.t.Fatal(err)
	}
	return pr
}

// state is the phase, the Ready condition's reason and its message.
func (f *stepsFixture) state(name string) func() string {
	return func() string {
		pr := f.get(name)
		if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
			return string(pr.Status.Phase) + " " + c.Reason + ": " + c.Message
		}
		return string(pr.Status.Phase)
	}
}

// steps is each step of the Promotion as "name phase attempts: message".
func (f *stepsFixture) steps(name string) func() []string {
	return func() []string {
		var out []string
		for _, s := range f.get(name).Status.Steps {
			out = append(out, fmt.Sprintf("%s %s %d: %s", s.Name, s.Phase, s.Attempts, s.Message))
		}
		return out
	}
}

// event returns the LifecycleEvent the hub published, once it exists.
func (f *stepsFixture) event(g Gomega, name string) *tugboatv1alpha1.LifecycleEvent {
	ev := &tugboatv1alpha1.LifecycleEvent{}
	g.Eventually(func() error {
		return cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, ev)
	}).WithTimeout(30*time.Second).Should(Succeed(), "the hub publishes LifecycleEvent %s", name)
	return ev
}

func (f *stepsFixture) as(user string, groups ...string) client.Client {
	c, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), user, groups...)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *stepsFixture) migratorClient() client.Client {
	return f.as(f.migrator, "system:serviceaccounts", "system:serviceaccounts:"+f.ns)
}

func externalStep(name string, timeout time.Duration, retries int32) tugboatv1alpha1.Step {
	s := tugboatv1alpha1.Step{Name: name, Type: tugboatv1alpha1.StepExternal, Retries: retries,
		External: &tugboatv1alpha1.ExternalStep{Lifecycle: "db-migrate"}}
	if timeout > 0 {
		s.Timeout = &metav1.Duration{Duration: timeout}
	}
	return s
}

// TestSteps_externalStepsDoneByAStepControllerWithTheRBAC: the pre step's
// LifecycleEvent is published (owned by the Promotion, labeled with the
// event key) and the strategy waits for it; the step controller, a
// ServiceAccount bound to tugboat-step-controller, marks it Done in its
// own name; the strategy runs, the target verifies, the post step's event
// is published and marked Done, and the Promotion succeeds, every step's
// status and Events saying who finished it. Before that, the API server
// refuses a user without the RBAC, a finishedBy naming someone else, a
// TimedOut written by anyone but the hub, and a LifecycleEvent created by
// anyone but the hub.
func TestSteps_externalStepsDoneByAStepControllerWithTheRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{
		Pre:  []tugboatv1alpha1.Step{externalStep("migrate", 0, 0)},
		Post: []tugboatv1alpha1.Step{externalStep("smoke", 0, 0)},
	})
	f.startHub()
	name := f.promote("2.0.0")
	pre := f.event(g, promotion.EventName(name, "migrate", 1))
	g.Expect(pre.Labels).To(HaveKeyWithValue(tugboatv1alpha1.LabelEventKey, "db-migrate"))
	g.Expect(pre.OwnerReferences).To(ConsistOf(HaveField("Name", name)))
	g.Expect(pre.Spec.Targets).To(Equal([]tugboatv1alpha1.EventTarget{{Spoke: "prod-1", Namespace: "apps", Release: "web"}}))
	g.Expect(pre.Spec.Stage).To(Equal(tugboatv1alpha1.StepStagePre))
	g.Expect(pre.Spec.Deadline.Sub(pre.CreationTimestamp.Time)).To(BeNumerically("~", 10*time.Minute, 3*time.Second), "the default timeout")
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(MatchRegexp(
		`^Running StepRunning: pre step migrate \(external, attempt 1 of 1\): waiting for the controller of lifecycle db-migrate \(event key db-migrate\) to finish LifecycleEvent ` + pre.Name))
	g.Expect(f.strategyCalls()).To(BeZero(), "the strategy waits for the pre step")

	// Refused by the API server.
	_, err := lifecycle.Finish(ctx, f.as("mallory"), f.ns, pre.Name, tugboatv1alpha1.EventDone, "")
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "no RBAC: %v", err)
	forged := pre.DeepCopy()
	now := metav1.Now()
	forged.Status = tugboatv1alpha1.LifecycleEventStatus{Phase: tugboatv1alpha1.EventDone, FinishedBy: "alice", FinishedAt: &now}
	err = f.migratorClient().Status().Patch(ctx, forged, client.MergeFrom(pre))
	g.Expect(err).To(MatchError(ContainSubstring("status.finishedBy must name you (user " + f.migrator + ")")))
	forged.Status = tugboatv1alpha1.LifecycleEventStatus{Phase: tugboatv1alpha1.EventTimedOut, FinishedAt: &now}
	err = f.migratorClient().Status().Patch(ctx, forged, client.MergeFrom(pre))
	g.Expect(err).To(MatchError(ContainSubstring("only the tugboat hub marks an event TimedOut")))
	fake := &tugboatv1alpha1.LifecycleEvent{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "fake"}, Spec: pre.Spec}
	err = cluster.Client.Create(ctx, fake)
	g.Expect(err).To(MatchError(ContainSubstring("only the tugboat hub publishes LifecycleEvents")))

	done, err := lifecycle.Finish(ctx, f.migratorClient(), f.ns, pre.Name, tugboatv1alpha1.EventDone, "schema v42")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done.Status.FinishedBy).To(Equal(f.migrator))
	g.Eventually(f.strategyCalls).WithTimeout(30*time.Second).Should(Equal(1), "the pre step done, the strategy runs")
	// Finished, the event cannot be changed, even by the one who finished it.
	_, err = lifecycle.Finish(ctx, f.migratorClient(), f.ns, pre.Name, tugboatv1alpha1.EventError, "changed my mind")
	g.Expect(err).To(MatchError(lifecycle.ErrFinished))
	got := &tugboatv1alpha1.LifecycleEvent{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(pre), got)).To(Succeed())
	changed := got.DeepCopy()
	changed.Status.Message = "changed"
	err = f.migratorClient().Status().Patch(ctx, changed, client.MergeFrom(got))
	g.Expect(err).To(MatchError(ContainSubstring("lifecycleevent " + pre.Name + " is already finished (Done): a finished event cannot be changed")))

	f.report("2.0.0", 2)
	post := f.event(g, promotion.EventName(name, "smoke", 1))
	g.Expect(post.Spec.Stage).To(Equal(tugboatv1alpha1.StepStagePost))
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(HavePrefix("Verifying StepRunning: post step smoke (external, attempt 1 of 1)"))
	_, err = lifecycle.Finish(ctx, f.migratorClient(), f.ns, post.Name, tugboatv1alpha1.EventDone, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(Equal("Succeeded Succeeded: every target of production runs 2.0.0, healthy"))
	g.Expect(f.steps(name)()).To(Equal([]string{
		"migrate Succeeded 1: LifecycleEvent " + pre.Name + " done by " + f.migrator + ": schema v42",
		"smoke Succeeded 1: LifecycleEvent " + post.Name + " done by " + f.migrator,
	}))
	g.Eventually(func() []string { return promotionEvents(g, f.ns, name) }).WithTimeout(30 * time.Second).Should(ContainElements(
		"Normal StepStarted: pre step migrate (external) started attempt 1 (LifecycleEvent "+pre.Name+")",
		"Normal StepSucceeded: pre step migrate (external) succeeded: LifecycleEvent "+pre.Name+" done by "+f.migrator+": schema v42",
		"Normal StepSucceeded: post step smoke (external) succeeded: LifecycleEvent "+post.Name+" done by "+f.migrator,
	))
}

// TestSteps_anErroredEventFailsThePromotionWithItsMessage: the step
// controller marks the pre step's event Error: the Promotion fails, naming
// the step, the event, who and why, and the strategy never runs.
func TestSteps_anErroredEventFailsThePromotionWithItsMessage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{externalStep("migrate", 0, 0)}})
	f.startHub()
	name := f.promote("2.0.0")
	ev := f.event(g, promotion.EventName(name, "migrate", 1))
	_, err := lifecycle.Finish(ctx, f.migratorClient(), f.ns, ev.Name, tugboatv1alpha1.EventError, "lock held by another migration")
	g.Expect(err).NotTo(HaveOccurred())
	want := "pre step migrate (external) failed after 1 attempt(s): LifecycleEvent " + ev.Name + " errored, by " + f.migrator + ": lock held by another migration"
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(Equal("Failed StepFailed: " + want))
	g.Expect(f.strategyCalls()).To(BeZero(), "a failed pre step changes nothing")
	g.Eventually(func() []string { return promotionEvents(g, f.ns, name) }).WithTimeout(30 * time.Second).Should(ContainElements(
		"Warning StepFailed: "+want, "Warning Failed: "+want))
}

// TestSteps_anEventNoOneHandlesTimesOut: a pre step of 2s with one retry
// whose events no one finishes: the hub marks each TimedOut at its
// deadline (after which nobody may finish it), publishes the second
// attempt's event, and fails the step TimedOut and the Promotion.
func TestSteps_anEventNoOneHandlesTimesOut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{externalStep("migrate", 2*time.Second, 1)}})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.state(name)).WithTimeout(60 * time.Second).Should(HavePrefix("Failed StepFailed: pre step migrate (external) timed out after 2 attempt(s): LifecycleEvent " +
		promotion.EventName(name, "migrate", 2) + " timed out: no one finished it by "))
	for _, attempt := range []int32{1, 2} {
		ev := &tugboatv1alpha1.LifecycleEvent{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: promotion.EventName(name, "migrate", attempt)}, ev)).To(Succeed())
		g.Expect(ev.Status.Phase).To(Equal(tugboatv1alpha1.EventTimedOut))
		g.Expect(ev.Status.Message).To(ContainSubstring("no one finished the event by its deadline"))
		g.Expect(ev.Spec.Attempt).To(Equal(attempt))
		g.Expect(ev.Status.FinishedAt.Time).To(BeTemporally(">=", ev.Spec.Deadline.Time))
	}
	steps := f.get(name).Status.Steps
	g.Expect(steps).To(HaveLen(1))
	g.Expect(steps[0].Phase).To(Equal(tugboatv1alpha1.StepTimedOut))
	g.Expect(steps[0].Attempts).To(BeEquivalentTo(2))
	_, err := lifecycle.Finish(ctx, f.migratorClient(), f.ns, promotion.EventName(name, "migrate", 2), tugboatv1alpha1.EventDone, "late")
	g.Expect(err).To(MatchError(lifecycle.ErrFinished))
	g.Expect(f.strategyCalls()).To(BeZero())
}

// TestSteps_aHubRestartKeepsTheStepsEvent: the hub stops while the pre
// step waits; its event is finished meanwhile; a new hub finds the same
// event (one per attempt: nothing published twice) and goes on.
func TestSteps_aHubRestartKeepsTheStepsEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{externalStep("migrate", 0, 0)}})
	stop := f.startHub()
	name := f.promote("2.0.0")
	ev := f.event(g, promotion.EventName(name, "migrate", 1))
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(ConsistOf(HavePrefix("migrate Running 1: waiting for the controller")))
	stop()
	_, err := lifecycle.Finish(ctx, f.migratorClient(), f.ns, ev.Name, tugboatv1alpha1.EventDone, "while the hub was away")
	g.Expect(err).NotTo(HaveOccurred())
	f.startHub()
	// The strategy runs in the reconcile that saw the event done, before
	// that reconcile writes the step's status: wait for both.
	g.Eventually(f.strategyCalls).WithTimeout(30 * time.Second).Should(Equal(1))
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(Equal([]string{
		"migrate Succeeded 1: LifecycleEvent " + ev.Name + " done by " + f.migrator + ": while the hub was away"}))
	var list tugboatv1alpha1.LifecycleEventList
	g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "one event for the one attempt")
	g.Expect(list.Items[0].UID).To(Equal(ev.UID))
}

// newSecret creates Secret ns/name holding data.
func newSecret(g Gomega, ns, name string, data map[string][]byte) {
	g.Expect(cluster.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data,
	})).To(Succeed())
}

// TestSteps_runAroundARollout: with a rollout (a canary), the pre step
// still runs before the first wave is acted on, and the post step only
// once the last wave qualified; the Promotion succeeds after it.
func TestSteps_runAroundARollout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{
		Pre:  []tugboatv1alpha1.Step{externalStep("migrate", 0, 0)},
		Post: []tugboatv1alpha1.Step{externalStep("smoke", 0, 0)},
	}, func(env *tugboatv1alpha1.Environment) {
		env.Rollout = &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Spokes: []string{"prod-1"}}}
	})
	f.startHub()
	name := f.promote("2.0.0")
	pre := f.event(g, promotion.EventName(name, "migrate", 1))
	g.Consistently(f.strategyCalls).WithTimeout(time.Second).Should(BeZero(), "no wave is acted on before the pre step")
	_, err := lifecycle.Finish(ctx, f.migratorClient(), f.ns, pre.Name, tugboatv1alpha1.EventDone, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.strategyCalls).WithTimeout(30*time.Second).Should(Equal(1), "the canary is acted on")
	g.Eventually(func() *tugboatv1alpha1.RolloutStatus { return f.get(name).Status.Rollout }).WithTimeout(30 * time.Second).Should(
		HaveField("Waves", Not(BeEmpty())))
	g.Expect(f.steps(name)()).To(ContainElement(HavePrefix("smoke Pending 0")), "the post step waits for the last wave")

	f.report("2.0.0", 2)
	post := f.event(g, promotion.EventName(name, "smoke", 1))
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(HavePrefix("Verifying StepRunning: post step smoke (external, attempt 1 of 1)"))
	_, err = lifecycle.Finish(ctx, f.migratorClient(), f.ns, post.Name, tugboatv1alpha1.EventDone, "smoke passed")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(HavePrefix("Succeeded Succeeded: "))
	g.Expect(f.get(name).Status.Rollout.Phase).To(Equal(tugboatv1alpha1.RolloutCompleted))
	g.Expect(f.strategyCalls()).To(Equal(1))
}

// TestSteps_onlyTheHubWritesAPromotionsSteps: a person who may approve
// (and so write promotions/status) cannot mark a step Succeeded: the
// policy tugboat-approvals keeps status.steps the hub's.
func TestSteps_onlyTheHubWritesAPromotionsSteps(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{externalStep("migrate", 0, 0)}})
	g.Expect(identity.Grant(ctx, cluster.Client, f.ns, "alice", "web/production")).To(Succeed())
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(ConsistOf(HavePrefix("migrate Running 1: ")))
	pr := f.get(name)
	forged := pr.DeepCopy()
	forged.Status.Steps[0].Phase, forged.Status.Steps[0].Message = tugboatv1alpha1.StepSucceeded, "trust me"
	err := f.as("alice").Status().Patch(ctx, forged, client.MergeFrom(pr))
	g.Expect(err).To(MatchError(ContainSubstring("only the tugboat hub writes a Promotion's status")))
	g.Expect(f.strategyCalls()).To(BeZero())
}
