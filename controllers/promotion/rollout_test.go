package promotion_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/identity"
)

// rolloutFixture runs the hub in-process as its ServiceAccount, with
// Pipeline web whose production (prod-a, prod-b, prod-c, release apps/web)
// rolls out canary prod-a first, then the rest in a final wave. The
// strategy records the targets of each call and changes nothing: the test
// writes the ReleaseHistories as the hub's recorder would from what the
// agents report.
type rolloutFixture struct {
	t   *testing.T
	ns  string
	p   *tugboatv1alpha1.Pipeline
	typ tugboatv1alpha1.StrategyType

	// name is the Promotion the test steers (steer_test.go).
	name string
	// stopHub stops the hub; startHub starts another (a restart).
	stopHub, startHub func()

	mu       sync.Mutex
	calls    [][]string
	at       []time.Time
	versions []string
}

var rolloutSpokes = []string{"prod-a", "prod-b", "prod-c"}

func newRolloutFixture(t *testing.T, typ tugboatv1alpha1.StrategyType, with ...func(*tugboatv1alpha1.Rollout)) *rolloutFixture {
	t.Helper()
	return newRolloutFixtureEnv(t, typ, nil, with...)
}

// newRolloutFixtureEnv is newRolloutFixture whose production environment
// env changes (its steps, say) before the Pipeline is created.
func newRolloutFixtureEnv(t *testing.T, typ tugboatv1alpha1.StrategyType, env func(*tugboatv1alpha1.Environment), with ...func(*tugboatv1alpha1.Rollout)) *rolloutFixture {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rollout-"}}
	if err := cluster.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var prod []tugboatv1alpha1.Target
	for _, s := range rolloutSpokes {
		prod = append(prod, tugboatv1alpha1.Target{Spoke: s, Namespace: "apps"})
	}
	promotion := tugboatv1alpha1.PromotionStrategy{Type: typ}
	switch typ {
	case tugboatv1alpha1.StrategyHelm:
		promotion.Helm = &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"}
	case tugboatv1alpha1.StrategyPullRequest:
		promotion.PullRequest = &tugboatv1alpha1.PullRequestStrategy{URL: "https://git.example.com/org/fleet.git",
			Provider: tugboatv1alpha1.GitProviderGitea, SecretRef: tugboatv1alpha1.LocalSecretReference{Name: "git"}}
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: promotion,
			Environments: []tugboatv1alpha1.Environment{
				{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "staging-1", Namespace: "apps"}}},
				{Name: "production", Targets: prod, Rollout: &tugboatv1alpha1.Rollout{
					Canary:      &tugboatv1alpha1.CanaryWave{Spokes: []string{"prod-a"}},
					MaxFailures: ptr.To(intstr.FromInt32(1)),
				}},
			},
		},
	}
	for _, w := range with {
		w(p.Spec.Environments[1].Rollout)
	}
	if env != nil {
		env(&p.Spec.Environments[1])
	}
	if err := cluster.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	f := &rolloutFixture{t: t, ns: ns.Name, p: p, typ: typ}
	for _, s := range rolloutSpokes {
		rh := &tugboatv1alpha1.ReleaseHistory{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: tugboatv1alpha1.ReleaseHistoryName(s, "apps", "web")},
			Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: s, Namespace: "apps", Release: "web"},
		}
		if err := cluster.Client.Create(ctx, rh); err != nil {
			t.Fatal(err)
		}
		f.report(s, 3, "1.3.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	}
	// Once this test ends, its Promotion is another test's leftover: the
	// Pipeline goes (after the hub stopped: cleanups run last first), so
	// a later hub aborts the Promotion instead of acting on it.
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), p) })
	record := strategy.Func(func(_ context.Context, req strategy.Request) (strategy.Result, error) {
		if req.Promotion.Namespace != f.ns {
			// Another test's leftover: not this test's call.
			return strategy.Result{Message: "not recorded"}, nil
		}
		var got []string
		for _, t := range req.Targets {
			got = append(got, t.SpokeName+"/"+t.Namespace+"/"+t.Release)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		version := req.Version
		if req.RollbackFrom != "" {
			version += " (rollback from " + req.RollbackFrom + ")"
		}
		f.calls, f.at, f.versions = append(f.calls, got), append(f.at, time.Now()), append(f.versions, version)
		return strategy.Result{Message: "acted on " + strings.Join(got, ", ")}, nil
	})
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{typ: record}
	_, f.stopHub = hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts)
	f.startHub = func() { _, f.stopHub = hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts) }
	return f
}

// report writes what spoke's agent reports of release apps/web: its
// current revision, as the hub's recorder does.
func (f *rolloutFixture) report(spoke string, revision int32, version string, status tugboatv1alpha1.ReleaseStatus, health tugboatv1alpha1.Health) {
	f.t.Helper()
	ctx := context.Background()
	rh := &tugboatv1alpha1.ReleaseHistory{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", "web")}, rh); err != nil {
		f.t.Fatal(err)
	}
	now := metav1.Now()
	cur := tugboatv1alpha1.RevisionSummary{Revision: revision, Chart: "web", ChartVersion: version, Status: status, Health: health, LastDeployed: &now}
	rh.Status.Current = &cur
	revs := []tugboatv1alpha1.Revision{{RevisionSummary: cur}}
	for _, r := range rh.Status.Revisions {
		if r.Revision != revision {
			revs = append(revs, r)
		}
	}
	rh.Status.Revisions = revs
	if err := cluster.Client.Status().Update(ctx, rh); err != nil {
		f.t.Fatal(err)
	}
}

// touch rewrites spoke's ReleaseHistory with a new event and nothing else
// changed: the agent said something that moves no target.
func (f *rolloutFixture) touch(spoke string) {
	f.t.Helper()
	ctx := context.Background()
	rh := &tugboatv1alpha1.ReleaseHistory{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", "web")}, rh); err != nil {
		f.t.Fatal(err)
	}
	ev := tugboatv1alpha1.ReleaseEvent{ID: strings.Repeat("a", 16), Time: metav1.Now(), Type: tugboatv1alpha1.EventTypeNormal, Reason: "Resync", Message: "nothing new"}
	rh.Status.Revisions[0].Events = append(rh.Status.Revisions[0].Events, ev)
	if err := cluster.Client.Status().Update(ctx, rh); err != nil {
		f.t.Fatal(err)
	}
}

func (f *rolloutFixture) promote(version string) string {
	f.t.Helper()
	pr, err := request.Create(context.Background(), hubc, f.p, "production", version, tugboatv1alpha1.RequestedByCI, "ci")
	if err != nil {
		f.t.Fatal(err)
	}
	return pr.Name
}

func (f *rolloutFixture) get(name string) *tugboatv1alpha1.Promotion {
	f.t.Helper()
	pr := &tugboatv1alpha1.Promotion{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, pr); err != nil {
		f.t.Fatal(err)
	}
	return pr
}

// acted returns the targets of each strategy call so far.
func (f *rolloutFixture) acted() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *rolloutFixture) actedAt(i int) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at[i]
}

// waves is status.rollout's current wave and counts, as one line.
func waves(pr *tugboatv1alpha1.Promotion) string {
	st := pr.Status.Rollout
	if st == nil {
		return "no status.rollout"
	}
	var out []string
	for _, w := range st.Waves {
		out = append(out, strings.Join([]string{w.Name, itoa(w.Targets), itoa(w.Pending), itoa(w.InProgress), itoa(w.Succeeded), itoa(w.Failed)}, " "))
	}
	return string(st.Phase) + " current=" + itoa(st.CurrentWave) + " [" + strings.Join(out, "; ") + "] failed=" + itoa(st.Failed) + "/" + itoa(st.MaxFailures)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

const (
	webA = "prod-a/apps/web"
	webB = "prod-b/apps/web"
	webC = "prod-c/apps/web"
)

// TestReconciler_rollsOutWaveByWaveOnTheRevisionItProduced: the canary
// (prod-a) is acted on first, alone; a report of its old revision, or of
// the new one not yet Current, does not start the next wave, nor does it
// write the Promotion; once the canary's new revision is reported
// deployed and Current, the final wave (prod-b, prod-c) is acted on within
// a second, and once it qualifies too the Promotion succeeds.
func TestReconciler_rollsOutWaveByWaveOnTheRevisionItProduced(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyNotification)
	name := f.promote("1.4.0")

	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	g.Eventually(func() string { return waves(f.get(name)) }).WithTimeout(10 * time.Second).Should(Equal(
		"Progressing current=0 [canary 1 0 1 0 0; final 2 2 0 0 0] failed=0/1"))
	pr := f.get(name)
	g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionRunning))
	g.Expect(pr.Status.Rollout.Resolved).To(Equal(f.p.Spec.Environments[1].Rollout), "resolved when it started")
	g.Expect(pr.Status.Rollout.Waves[0].StartedAt).NotTo(BeNil())
	g.Expect(pr.Status.Rollout.Waves[1].StartedAt).To(BeNil())

	g.Consistently(f.acted).WithTimeout(1500*time.Millisecond).Should(HaveLen(1), "nothing more is acted on before the canary reports")

	// The canary's agent reports its old revision again: stale. Nothing
	// moves, and the Promotion is not written.
	rv := f.get(name).ResourceVersion
	f.touch("prod-a")
	g.Consistently(func() string { return f.get(name).ResourceVersion }).WithTimeout(2*time.Second).Should(Equal(rv),
		"a report that changes nothing the Promotion shows writes nothing")
	g.Expect(f.acted()).To(HaveLen(1))

	// The new revision, deployed but not Current yet.
	f.report("prod-a", 4, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthInProgress)
	g.Consistently(f.acted).WithTimeout(2*time.Second).Should(HaveLen(1), "the canary has not qualified")
	g.Expect(f.get(name).Status.Rollout.Message).To(Equal(
		"wave canary (1 of 2): 0 of 1 targets qualified; waiting for prod-a/apps/web: revision 4 is deployed, InProgress"))

	// Current: the final wave is acted on at once.
	f.report("prod-a", 4, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	qualified := time.Now()
	g.Eventually(f.acted).WithTimeout(10 * time.Second).Should(Equal([][]string{{webA}, {webB, webC}}))
	g.Expect(f.actedAt(1).Sub(qualified)).To(BeNumerically("<", time.Second), "the next wave starts within a second")
	g.Eventually(func() string { return waves(f.get(name)) }).WithTimeout(10 * time.Second).Should(Equal(
		"Progressing current=1 [canary 1 0 0 1 0; final 2 0 2 0 0] failed=0/1"))
	pr = f.get(name)
	g.Expect(pr.Status.Phase).To(Equal(tugboatv1alpha1.PromotionVerifying), "every wave was acted on")
	g.Expect(pr.Status.Rollout.Waves[0].CompletedAt).NotTo(BeNil())

	f.report("prod-b", 4, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	f.report("prod-c", 7, "1.4.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	g.Expect(waves(f.get(name))).To(Equal("Completed current=2 [canary 1 0 0 1 0; final 2 0 0 2 0] failed=0/1"))
	g.Expect(f.acted()).To(HaveLen(2), "each target was acted on once")
}

// TestReconciler_pausesARolloutWhoseCanaryFails: the canary's new revision
// fails; the rollout stops before any other target is touched (Paused,
// with the failing target and what to do in status), and stays stopped
// when the canary recovers.
func TestReconciler_pausesARolloutWhoseCanaryFails(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyNotification)
	name := f.promote("1.5.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))

	f.report("prod-a", 4, "1.5.0", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthInProgress)
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionPaused))
	pr := f.get(name)
	g.Expect(waves(pr)).To(Equal("Paused current=0 [canary 1 0 0 0 1; final 2 2 0 0 0] failed=1/1"),
		"one failure is within maxFailures, but the canary tolerates none")
	g.Expect(pr.Status.Rollout.FailedTargets).To(HaveLen(1))
	ft := pr.Status.Rollout.FailedTargets[0]
	g.Expect([]any{ft.Spoke, ft.Namespace, ft.Release, ft.Wave, ft.Reason, ft.Revision, ft.Message}).To(Equal(
		[]any{"prod-a", "apps", "web", "canary", tugboatv1alpha1.TargetReleaseFailed, int32(4), "revision 4 failed"}))
	g.Expect(ft.Since).NotTo(BeNil())
	ready := findCondition(pr, tugboatv1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RolloutPausedReason.String()))
	g.Expect(ready.Message).To(Equal("rollout of 1.5.0 into production paused in wave canary: the failure budget is spent " +
		"(a canary target failed, and the canary tolerates none): prod-a/apps/web (wave canary) ReleaseFailed: revision 4 failed. " +
		"Nothing more is acted on. To go on, resume it (tugboat rollout resume " + name + " -n " + f.ns + ": the failures seen are accepted, the budget is not refilled), " +
		"or abort it (tugboat rollout abort " + name + " -n " + f.ns + ") and promote a fixed version"))
	g.Expect(pr.Status.Rollout.Message).To(Equal(ready.Message))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReconcilingCondition)).To(BeNil())

	// The canary recovers: a paused rollout stays paused, and nothing else
	// is touched.
	f.report("prod-a", 5, "1.5.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Consistently(f.acted).WithTimeout(2*time.Second).Should(Equal([][]string{{webA}}), "no other target is touched")
	g.Expect(f.get(name).Status.Phase).To(Equal(tugboatv1alpha1.PromotionPaused))
}

// TestReconciler_advancesOnlyOnTheRevisionTheAgentsActionProduced: with
// the helm strategy, the canary's agent reports that its upgrade made
// revision 5; the canary then reporting revision 4 of the version (another
// upgrade, not this Promotion's) deployed and Current does not start the
// next wave; revision 5 does. Only the acted wave's targets get an agent
// action.
func TestReconciler_advancesOnlyOnTheRevisionTheAgentsActionProduced(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyHelm)
	name := f.promote("1.6.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	actions := func() []string {
		var out []string
		for _, pt := range promotionTargets(t, f.ns, name) {
			if a := pt.Status.Action; a != nil {
				out = append(out, pt.Spec.Spoke+" "+string(a.Phase))
			}
		}
		return out
	}
	g.Eventually(actions).WithTimeout(10*time.Second).Should(Equal([]string{"prod-a Pending"}), "only the canary's action is queued")

	// The agent reports its upgrade, as the hub's receiver records it.
	g.Eventually(func() error {
		return patchTarget(t, f.ns, name, "prod-a", func(t *tugboatv1alpha1.PromotionTargetStatus) {
			if a := t.Action; a != nil {
				a.Phase, a.Revision, a.Message = tugboatv1alpha1.ActionSucceeded, 5, "upgraded to 1.6.0 (revision 5)"
			}
		})
	}).WithTimeout(10 * time.Second).Should(Succeed())

	f.report("prod-a", 4, "1.6.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Consistently(f.acted).WithTimeout(2*time.Second).Should(HaveLen(1), "revision 4 is not the one the action produced")
	g.Expect(f.get(name).Status.Rollout.Message).To(Equal("wave canary (1 of 2): 0 of 1 targets qualified; " +
		"waiting for prod-a/apps/web: waiting for the revision the promotion produced; reports revision 4 (1.6.0)"))

	f.report("prod-a", 5, "1.6.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(f.acted).WithTimeout(10 * time.Second).Should(Equal([][]string{{webA}, {webB, webC}}))
	g.Eventually(actions).WithTimeout(10 * time.Second).Should(Equal([]string{"prod-a Succeeded", "prod-b Pending", "prod-c Pending"}))
}

// TestReconciler_dealsATargetThatJoinsToAWaveNotDoneYet: a target added to
// the environment while the canary rolls out is part of the rollout (not
// left to the next Promotion): it lands in the final wave and is acted on
// with it.
func TestReconciler_dealsATargetThatJoinsToAWaveNotDoneYet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyNotification)
	name := f.promote("1.7.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))

	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: tugboatv1alpha1.ReleaseHistoryName("prod-d", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "prod-d", Namespace: "apps", Release: "web"},
	}
	g.Expect(cluster.Client.Create(ctx, rh)).To(Succeed())
	f.report("prod-d", 2, "1.3.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	p := &tugboatv1alpha1.Pipeline{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(f.p), p)).To(Succeed())
	orig := p.DeepCopy()
	p.Spec.Environments[1].Targets = append(p.Spec.Environments[1].Targets, tugboatv1alpha1.Target{Spoke: "prod-d", Namespace: "apps"})
	g.Expect(cluster.Client.Patch(ctx, p, client.MergeFrom(orig))).To(Succeed())
	g.Eventually(func() string { return waves(f.get(name)) }).WithTimeout(10 * time.Second).Should(Equal(
		"Progressing current=0 [canary 1 0 1 0 0; final 3 3 0 0 0] failed=0/1"))

	f.report("prod-a", 4, "1.7.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(f.acted).WithTimeout(10 * time.Second).Should(Equal([][]string{{webA}, {webB, webC, "prod-d/apps/web"}}))
}

// TestReconciler_startsTheNextWaveOnceTheCanarySoaked: with a 3s canary
// soak, the final wave is acted on no sooner than 3s after the canary's
// new revision is reported Current, and without waiting for another
// report (the reconcile is requeued for the end of the soak; the API keeps
// times to the second, so up to a second later).
func TestReconciler_startsTheNextWaveOnceTheCanarySoaked(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyNotification, func(r *tugboatv1alpha1.Rollout) {
		r.Canary.SoakTime = &metav1.Duration{Duration: 3 * time.Second}
	})
	name := f.promote("1.8.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))

	f.report("prod-a", 4, "1.8.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	healthy := time.Now()
	g.Eventually(func() string { return f.get(name).Status.Rollout.Message }).WithTimeout(10 * time.Second).Should(
		HavePrefix("wave canary (1 of 2): 0 of 1 targets qualified; waiting for prod-a/apps/web: soaking until "))
	g.Eventually(f.acted).WithTimeout(10 * time.Second).Should(Equal([][]string{{webA}, {webB, webC}}))
	soaked := f.actedAt(1).Sub(healthy)
	g.Expect(soaked).To(BeNumerically(">=", 3*time.Second), "the canary soaked")
	g.Expect(soaked).To(BeNumerically("<", 5*time.Second), "the next wave started when the soak ended")
}

// TestReconciler_excusesAFailureWithinTheBudget: with maxFailures 1, a
// target of the final wave that fails does not stop the rollout; the
// Promotion succeeds once the others qualify, and says which target the
// budget excused.
func TestReconciler_excusesAFailureWithinTheBudget(t *testing.T) {
	g := NewWithT(t)
	f := newRolloutFixture(t, tugboatv1alpha1.StrategyNotification)
	name := f.promote("1.9.0")
	g.Eventually(f.acted).WithTimeout(30 * time.Second).Should(Equal([][]string{{webA}}))
	f.report("prod-a", 4, "1.9.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(f.acted).WithTimeout(10 * time.Second).Should(HaveLen(2))

	f.report("prod-b", 4, "1.9.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)
	f.report("prod-c", 4, "1.9.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(func() tugboatv1alpha1.PromotionPhase { return f.get(name).Status.Phase }).WithTimeout(10 * time.Second).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	pr := f.get(name)
	g.Expect(waves(pr)).To(Equal("Completed current=2 [canary 1 0 0 1 0; final 2 0 0 1 1] failed=1/1"))
	g.Expect(findCondition(pr, tugboatv1alpha1.ReadyCondition).Message).To(Equal(
		"2 waves of 1.9.0 into production qualified; 1 of 1 allowed failures, excused by the budget: prod-b/apps/web (HealthFailed: revision 4 is Failed)"))
	g.Expect(pr.Status.Rollout.FailedTargets).To(HaveLen(1))
	g.Expect(pr.Status.Rollout.FailedTargets[0].Spoke).To(Equal("prod-b"))
}
