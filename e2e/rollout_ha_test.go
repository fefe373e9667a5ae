package e2e_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	actionsagent "tugboat.dev/tugboat/agent/actions"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestRollout_aLeaderKilledMidRolloutLosesNoWaveAndRepeatsNoAction runs
// two `tugboat hub` processes with leader election (each its own
// identity, as the chart deploys replicas > 1) behind a balancer, and the
// four production spokes of fourSpokes with real agents, which reach the
// replicas through the balancer. A rollout of 1.1.0, canary prod-a
// (soaking 3s) then the other three: once the leader started the second
// wave (its actions queued, the agents about to or starting to upgrade),
// the leading replica is SIGKILLed (no hand-over: its Lease must expire)
// and the balancer sends everything to the survivor. The survivor takes
// the Lease and carries on: both waves complete and the Promotion
// succeeds; every agent carried out its action exactly once (one
// "Upgrading release" in its log, one new revision in `helm history`,
// labeled with the action), and no release has a third revision.
func TestRollout_aLeaderKilledMidRolloutLosesNoWaveAndRepeatsNoAction(t *testing.T) {
	began := time.Now()
	g := NewWithT(t)
	ctx := context.Background()
	bin := buildHubBinary(t)
	root, err := bins.FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	helmCLI, err := bins.EnsureHelm(ctx, root, nil)
	g.Expect(err).NotTo(HaveOccurred())
	repo, err := devenv.StartChartRepo(t.TempDir(), "1.0.0", "1.1.0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(repo.Stop)

	hubCluster, clusters := startClusters(t, 2)
	f := &fleet{t: t, hub: hubCluster, ns: "rollout-ha"}
	g.Expect(hubCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})).To(Succeed())
	installHubChart(t, hubCluster, f.ns)
	flags := []string{
		"--leader-elect=true", "--leader-election-namespace", hubReleaseNamespace,
		"--leader-election-lease-duration", haLeaseDuration.String(),
		"--leader-election-renew-deadline", haRenewDeadline.String(),
		"--leader-election-retry-period", haRetryPeriod.String(),
		"--receiver-action-poll-timeout", "2s",
		"--heartbeat-namespace", hubReleaseNamespace,
	}
	hubs := []*hubProcess{
		startHubProcess(t, bin, f.hubKubeconfig(), flags...),
		startHubProcess(t, bin, f.hubKubeconfig(), flags...),
	}
	lb := newBalancer(t, hubs[0].addr, hubs[1].addr)
	f.hubAddr = lb.Addr()
	// leader waits until exactly one replica of those alive leads.
	leader := func(alive ...int) int {
		idx := -1
		g.Eventually(func(g Gomega) {
			idx = -1
			for _, i := range alive {
				ok, err := leads(hubs[i])
				g.Expect(err).NotTo(HaveOccurred())
				if ok {
					g.Expect(idx).To(Equal(-1), "two replicas lead")
					idx = i
				}
			}
			g.Expect(idx).NotTo(Equal(-1), "no replica leads")
		}).WithTimeout(3 * haLeaseDuration).WithPolling(250 * time.Millisecond).Should(Succeed())
		return idx
	}
	leader(0, 1)

	spokes := fourSpokes(clusters)
	logs := &messageCounter{}
	f.startRolloutAgents(spokes, repo, helmCLI, logs)
	t.Logf("two hub replicas and four spokes up in %s", time.Since(began).Round(100*time.Millisecond))

	p := rolloutPipeline(f.ns, repo, spokes, &tugboatv1alpha1.Rollout{
		Canary: &tugboatv1alpha1.CanaryWave{Spokes: []string{spokes[0].name}, SoakTime: &metav1.Duration{Duration: 3 * time.Second}},
	})
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
	pr, err := request.Create(ctx, hubCluster.Client, p, "production", "1.1.0", tugboatv1alpha1.RequestedByUser, "test")
	g.Expect(err).NotTo(HaveOccurred())

	// The leader starts the second wave...
	g.Eventually(func(g Gomega) {
		got := f.promotion(g, pr.Name)
		g.Expect(got).NotTo(BeNil())
		g.Expect(got.Status.Rollout).NotTo(BeNil())
		g.Expect(got.Status.Rollout.Waves).To(HaveLen(2))
		g.Expect(got.Status.Rollout.Waves[1].StartedAt).NotTo(BeNil())
	}).WithTimeout(120 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	// ...and is killed.
	i := leader(0, 1)
	survivor := 1 - i
	pid := hubs[i].pid()
	g.Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	killed := time.Now()
	lb.set(hubs[survivor].addr)
	g.Eventually(func() bool { return harness.ProcessAlive(pid) }).WithTimeout(30 * time.Second).Should(BeFalse())
	atKill := f.promotion(g, pr.Name)
	g.Expect(atKill.Status.Phase).NotTo(Equal(tugboatv1alpha1.PromotionSucceeded), "killed mid-rollout")
	for name, rt := range f.rolloutTargets(g, atKill) {
		if rt.Action != nil {
			t.Logf("at the kill: %s wave %d action %s (%d deliveries)", name, rt.Wave, rt.Action.Phase, rt.Action.Deliveries)
		}
	}

	// The survivor takes the Lease and finishes the rollout.
	g.Expect(leader(survivor)).To(Equal(survivor))
	t.Logf("leader moved within %s of the kill (lease duration %s)", time.Since(killed).Round(100*time.Millisecond), haLeaseDuration)
	g.Eventually(f.phase(pr.Name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	got := f.promotion(g, pr.Name)
	st := got.Status.Rollout
	g.Expect(st.Phase).To(Equal(tugboatv1alpha1.RolloutCompleted))
	g.Expect(st.Waves).To(HaveLen(2))
	g.Expect([]any{st.Waves[0].Targets, st.Waves[0].Succeeded, st.Waves[1].Targets, st.Waves[1].Succeeded}).To(Equal(
		[]any{int32(1), int32(1), int32(3), int32(3)}), "no wave lost")
	g.Expect(st.Waves[1].StartedAt.Time).To(Equal(atKill.Status.Rollout.Waves[1].StartedAt.Time), "the second wave was not started again")
	targets := f.rolloutTargets(g, f.actionsSucceeded(g, pr.Name, 2))
	g.Expect(targets).To(HaveLen(len(spokes)))
	for _, s := range spokes {
		rt := targets[s.name]
		// The agent carried it out once...
		g.Expect(logs.count(s.name, "Upgrading release")).To(Equal(1), "%s's agent upgraded once", s.name)
		g.Expect(logs.count(s.name, "Action succeeded")).To(Equal(1), "%s's agent carried out one action", s.name)
		// ...and Helm's history holds one new revision, made by it.
		h := helmHistory(g, t, s)
		g.Expect(h).To(HaveLen(2), s.name)
		g.Expect(describe(h[2])).To(HavePrefix("1.1.0 deployed Upgrade by tugboat action "+rt.Action.ID+" "), s.name)
		g.Expect(h[2].Labels).To(HaveKeyWithValue(actionsagent.LabelAction, rt.Action.ID), s.name)
		g.Eventually(f.current(s.name, s.namespace, "demo")).WithTimeout(30*time.Second).Should(Equal(
			current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}), s.name)
		g.Expect(revisionOf(f.history(g, s.name, s.namespace, "demo"), 3)).To(BeNil(), "%s: no third revision", s.name)
		t.Logf("%s: wave %d, action offered %d time(s), carried out once", s.name, rt.Wave, rt.Action.Deliveries)
	}
	t.Logf("test took %s", time.Since(began).Round(100*time.Millisecond))
}
