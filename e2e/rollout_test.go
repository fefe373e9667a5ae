package e2e_test

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/agent"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/deliver"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
)

// rolloutTarget is one target's progress in a Promotion, as the rollout
// tests read it.
type rolloutTarget struct {
	Namespace string
	// Wave is the index of the wave that acted on the target, -1 when
	// none did.
	Wave int32
	// Action is the upgrade (helm strategy), Rollback the rollback; nil
	// when there is none.
	Action, Rollback *tugboatv1alpha1.TargetAction
}

// rolloutTargets returns the per-target progress of pr by spoke. It is the
// one place the rollout tests read it from (its PromotionTargets): a
// target no wave acted on has none.
func (f *fleet) rolloutTargets(g Gomega, pr *tugboatv1alpha1.Promotion) map[string]rolloutTarget {
	out := map[string]rolloutTarget{}
	for _, ts := range f.targets(g, pr.Name) {
		rt := rolloutTarget{Namespace: ts.Namespace, Wave: -1, Action: ts.Action}
		if ts.Rollout != nil {
			rt.Wave, rt.Rollback = ts.Rollout.Wave, ts.Rollout.Rollback
		}
		out[ts.Spoke] = rt
	}
	return out
}

// rolloutSpoke is a production spoke of the rollout tests: the cluster it
// runs on and the namespace of its release.
type rolloutSpoke struct {
	name, namespace string
	cluster         *harness.Cluster
}

// fourSpokes places the rollout tests' four production spokes on two
// spoke clusters, because each cluster is a whole control plane and the
// machine running e2e has two cores: the canary prod-a alone on the first
// (its node can be tainted without touching another spoke), prod-b, prod-c
// and prod-d on the second, each in a namespace of its own. Each spoke has
// its own Spoke, key and agent, which watches only its namespace
// (--watch-namespaces) and may act only there (the helm strategy's
// namespace limit): to the hub they are four spokes.
func fourSpokes(clusters []*harness.Cluster) []rolloutSpoke {
	return []rolloutSpoke{
		{"prod-a", "apps", clusters[0]},
		{"prod-b", "apps-b", clusters[1]},
		{"prod-c", "apps-c", clusters[1]},
		{"prod-d", "apps-d", clusters[1]},
	}
}

// messageCounter counts the messages agents log, by spoke and message.
type messageCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *messageCounter) add(spoke, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[spoke+": "+msg]++
}

// count is how many times spoke's agent logged msg.
func (c *messageCounter) count(spoke, msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[spoke+": "+msg]
}

// countingSink is a log sink that counts the messages of one spoke's agent
// in c before passing them on.
type countingSink struct {
	logr.LogSink
	spoke string
	c     *messageCounter
}

func (s countingSink) Info(level int, msg string, kv ...any) {
	s.GetCallStackHelper()()
	s.c.add(s.spoke, msg)
	s.LogSink.Info(level, msg, kv...)
}

// GetCallStackHelper passes on testr's t.Helper, so that the test log
// names the line that logged, not this sink.
func (s countingSink) GetCallStackHelper() func() {
	if h, ok := s.LogSink.(logr.CallStackHelperLogSink); ok {
		return h.GetCallStackHelper()
	}
	return func() {}
}

func (s countingSink) WithValues(kv ...any) logr.LogSink {
	return countingSink{s.LogSink.WithValues(kv...), s.spoke, s.c}
}

func (s countingSink) WithName(name string) logr.LogSink {
	return countingSink{s.LogSink.WithName(name), s.spoke, s.c}
}

// startRolloutAgents registers each spoke on the hub, starts its agent
// (in-process, as the agent chart's ServiceAccount, its helm strategy
// limited to its namespace and to repo), installs demo 1.0.0 in its
// namespace with the helm CLI, and waits until the hub records each
// release deployed and healthy. The agents' messages are counted in logs
// (when not nil).
func (f *fleet) startRolloutAgents(spokes []rolloutSpoke, repo *devenv.ChartRepo, helmCLI string, logs *messageCounter) {
	t := f.t
	t.Helper()
	g := NewWithT(t)
	if logs == nil {
		logs = &messageCounter{}
	}
	for _, s := range spokes {
		keyFile := filepath.Join(t.TempDir(), s.name+".key")
		g.Expect(os.WriteFile(keyFile, f.registerSpoke(s.name), 0o600)).To(Succeed())
		base := testr.NewWithOptions(t, testr.Options{Verbosity: 0}).WithName(s.name)
		log := logr.New(countingSink{base.GetSink(), s.name, logs})
		f.agentWith(s.name, f.agentConfig(s.cluster, s.namespace), keyFile, log, func(o *agent.Options) {
			o.WatchNamespaces = []string{s.namespace}
			o.Actions.Limits.Namespaces = []string{s.namespace}
			o.Actions.Limits.ChartSources = []string{repo.URL}
		})
		out, err := exec.Command(helmCLI, "--kubeconfig", s.cluster.KubeconfigPath, "install", "demo", repo.ChartURL("1.0.0"),
			"-n", s.namespace, "--create-namespace").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
	}
	for _, s := range spokes {
		g.Eventually(f.current(s.name, s.namespace, "demo")).WithTimeout(60*time.Second).Should(Equal(
			current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}), s.name)
	}
}

// actionsSucceeded waits, with a bound, until every target of Promotion
// name has its upgrade action recorded Succeeded at revision, and returns
// the Promotion as read then. A Promotion succeeds on what its targets'
// ReleaseHistories report; an agent's own report of the outcome may come
// later (it retries one the hub did not take, 5 s after a 503).
func (f *fleet) actionsSucceeded(g Gomega, name string, revision int32) *tugboatv1alpha1.Promotion {
	var pr *tugboatv1alpha1.Promotion
	g.Eventually(func(g Gomega) {
		pr = f.promotion(g, name)
		g.Expect(pr).NotTo(BeNil())
		targets := f.rolloutTargets(g, pr)
		g.Expect(targets).NotTo(BeEmpty())
		for spoke, rt := range targets {
			g.Expect(rt.Action).NotTo(BeNil(), spoke)
			g.Expect([]any{rt.Action.Phase, rt.Action.Revision}).To(Equal([]any{tugboatv1alpha1.ActionSucceeded, revision}), "%s: %s", spoke, rt.Action.Message)
		}
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "every agent's outcome is recorded")
	return pr
}

// rolloutPipeline is Pipeline demo in ns: one environment, production,
// whose targets are spokes, reached in the waves of ro with the helm
// strategy from repo.
func rolloutPipeline(ns string, repo *devenv.ChartRepo, spokes []rolloutSpoke, ro *tugboatv1alpha1.Rollout) *tugboatv1alpha1.Pipeline {
	targets := make([]tugboatv1alpha1.Target, 0, len(spokes))
	for _, s := range spokes {
		targets = append(targets, tugboatv1alpha1.Target{Spoke: s.name, Namespace: s.namespace})
	}
	return &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "demo",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm,
				Helm: &tugboatv1alpha1.HelmStrategy{Repository: repo.URL, Chart: "demo"}},
			Environments: []tugboatv1alpha1.Environment{{Name: "production", Targets: targets, Rollout: ro}},
		},
	}
}

// helmHistory is `helm history demo` of spoke s: its revisions by number.
func helmHistory(g Gomega, t *testing.T, s rolloutSpoke) map[int]*release.Release {
	h, err := newHelm(t, s.cluster, s.namespace).cfg.Releases.History("demo")
	g.Expect(err).NotTo(HaveOccurred())
	out := map[int]*release.Release{}
	for _, r := range h {
		out[r.Version] = r
	}
	return out
}

// describe is a revision as `helm history` shows it: chart version,
// status, description.
func describe(r *release.Release) string {
	return r.Chart.Metadata.Version + " " + string(r.Info.Status) + " " + r.Info.Description
}

// rolloutCordonTaint keeps new pods off a node: no version of the demo
// chart tolerates it (unlike devenv.DemoTaintKey, which only 1.1.0 does
// not). Pods already running stay (NoSchedule).
const rolloutCordonTaint = "tugboat.dev/e2e-cordoned"

// TestRollout_fourSpokesCanaryFirstAndAFailedCanaryRolledBack: four
// production spokes with real agents (helm strategy; fourSpokes shares
// two spoke control planes among them), rolled out canary prod-a
// (soaking 5s) first, then the other three in one wave, onFailure
// Rollback, with a notifier.
//
// 1.1.0: the canary's agent upgrades it; the other three get no action
// until the canary's new revision, made by its action, is deployed,
// Current and soaked: their `helm history` shows the upgrade starting at
// least the soak after the canary's and after the canary became healthy.
// The Promotion succeeds with both waves counted, and the notifier is told
// of each wave.
//
// 1.2.0: the canary's node now takes no new pod, so its new revision never
// becomes healthy and past the progress deadline the canary fails. The
// rollout stops before any other spoke is touched (their `helm history`
// holds no new revision), and prod-a's agent rolls it back with a real
// Helm rollback ("Rollback to 2" in its `helm history`), within the
// spoke's limits (which allow no downgrade: a rollback returns to what the
// spoke ran). The Promotion fails (RolloutFailed, rollout RolledBack),
// production is held (RolloutFailed), and Events and notices tell it.
func TestRollout_fourSpokesCanaryFirstAndAFailedCanaryRolledBack(t *testing.T) {
	began := time.Now()
	g := NewWithT(t)
	ctx := context.Background()
	root, err := bins.FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	helmCLI, err := bins.EnsureHelm(ctx, root, nil)
	g.Expect(err).NotTo(HaveOccurred())
	repo, err := devenv.StartChartRepo(t.TempDir(), "1.0.0", "1.1.0", "1.2.0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(repo.Stop)

	notices := &noticeRecorder{}
	hubCluster, clusters := startClusters(t, 2)
	f := newFleetWith(t, hubCluster, func(o *hub.Options) {
		o.Receiver.ActionPollTimeout = 2 * time.Second
		o.NotifyBuilder = deliver.BuilderFunc(func(context.Context, *tugboatv1alpha1.Pipeline, *tugboatv1alpha1.Notifier) (notify.Notifier, error) {
			return notices, nil
		})
	})
	spokes := fourSpokes(clusters)
	canary, rest := spokes[0], spokes[1:]
	logs := &messageCounter{}
	f.startRolloutAgents(spokes, repo, helmCLI, logs)
	t.Logf("four spokes up in %s", time.Since(began).Round(100*time.Millisecond))

	const soak = 5 * time.Second
	p := rolloutPipeline(f.ns, repo, spokes, &tugboatv1alpha1.Rollout{
		Canary:           &tugboatv1alpha1.CanaryWave{Spokes: []string{canary.name}, SoakTime: &metav1.Duration{Duration: soak}},
		ProgressDeadline: &metav1.Duration{Duration: 15 * time.Second},
		OnFailure:        tugboatv1alpha1.RolloutRollback,
	})
	p.Spec.Notify = []tugboatv1alpha1.Notifier{{Name: "hook", Type: tugboatv1alpha1.NotifierWebhook,
		Webhook: &tugboatv1alpha1.WebhookNotifier{URL: "https://hooks.example/tugboat", SecretRef: &tugboatv1alpha1.LocalSecretReference{Name: "hook"}}}}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())

	// 1.1.0, canary first.
	pr, err := request.Create(ctx, hubCluster.Client, p, "production", "1.1.0", tugboatv1alpha1.RequestedByUser, "test")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.current(canary.name, canary.namespace, "demo")).WithTimeout(120 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(
		current{2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	// No other spoke is touched while the canary soaks.
	g.Consistently(func(g Gomega) []current {
		var out []current
		for _, s := range rest {
			out = append(out, f.current(s.name, s.namespace, "demo")(g))
		}
		return out
	}).WithTimeout(3 * time.Second).Should(HaveEach(
		current{1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))

	g.Eventually(f.phase(pr.Name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	got := f.promotion(g, pr.Name)
	st := got.Status.Rollout
	g.Expect(st).NotTo(BeNil())
	g.Expect(st.Phase).To(Equal(tugboatv1alpha1.RolloutCompleted))
	g.Expect(st.Waves).To(HaveLen(2))
	g.Expect([]any{st.Waves[0].Name, st.Waves[0].Targets, st.Waves[0].Succeeded}).To(Equal([]any{"canary", int32(1), int32(1)}))
	g.Expect([]any{st.Waves[1].Targets, st.Waves[1].Succeeded}).To(Equal([]any{int32(3), int32(3)}), "wave %s", st.Waves[1].Name)
	g.Expect(st.Waves[1].StartedAt.Time).NotTo(BeTemporally("<", st.Waves[0].CompletedAt.Time), "the second wave started after the canary qualified")
	got = f.actionsSucceeded(g, pr.Name, 2)
	for name, rt := range f.rolloutTargets(g, got) {
		wantWave := int32(1)
		if name == canary.name {
			wantWave = 0
		}
		g.Expect(rt.Wave).To(Equal(wantWave), name)
		g.Expect(logs.count(name, "Upgrading release")).To(Equal(1), "%s's agent carried out one upgrade", name)
	}

	// helm history on the spokes: the others' upgrades started only once the
	// canary's revision 2, made by its agent, was healthy and soaked.
	canaryRev := helmHistory(g, t, canary)[2]
	g.Expect(canaryRev).NotTo(BeNil())
	g.Expect(describe(canaryRev)).To(HavePrefix("1.1.0 deployed Upgrade by tugboat action"))
	rh := f.history(g, canary.name, canary.namespace, "demo")
	g.Expect(rh).NotTo(BeNil())
	rev2 := revisionOf(rh, 2)
	g.Expect(rev2).NotTo(BeNil())
	healthy := eventWith(rev2, "RolloutComplete")
	g.Expect(healthy).NotTo(BeNil(), "the canary's revision 2 became healthy: %v", reasons(rev2))
	for _, s := range rest {
		h := helmHistory(g, t, s)
		g.Expect(h).To(HaveLen(2), s.name)
		g.Expect(describe(h[2])).To(HavePrefix("1.1.0 deployed Upgrade by tugboat action"), s.name)
		started := h[2].Info.LastDeployed.Time
		g.Expect(started).To(BeTemporally(">=", canaryRev.Info.LastDeployed.Time.Add(soak)), "%s upgraded the soak after the canary", s.name)
		// Event times are kept to the second: truncated, never later.
		g.Expect(started).To(BeTemporally(">=", healthy.Time.Add(soak)), "%s upgraded once the canary was healthy for the soak", s.name)
		g.Expect(started).To(BeTemporally(">=", st.Waves[0].CompletedAt.Time), s.name)
		t.Logf("%s upgraded %s after the canary's upgrade, %s after it became healthy", s.name,
			started.Sub(canaryRev.Info.LastDeployed.Time).Round(time.Millisecond), started.Sub(healthy.Time.Time).Round(time.Millisecond))
	}
	// One notice per wave, in order, then the success.
	g.Eventually(func() []tugboatv1alpha1.NotifyEvent { return notices.events(pr.Name) }).WithTimeout(30 * time.Second).Should(
		ContainElements(tugboatv1alpha1.EventPromotionWaveCompleted, tugboatv1alpha1.EventPromotionSucceeded))
	var waveNotices []string
	for _, n := range notices.all(pr.Name) {
		if n.Event == tugboatv1alpha1.EventPromotionWaveCompleted {
			waveNotices = append(waveNotices, n.Promotion.Wave+": "+n.Promotion.Rollout)
		}
	}
	g.Expect(waveNotices).To(HaveExactElements(
		HavePrefix("canary (1 of 2): wave 2/2 ("+st.Waves[1].Name+"), 1/4 succeeded"),
		HavePrefix(st.Waves[1].Name+" (2 of 2): Completed: waves 2/2 done, 4/4 succeeded")))
	t.Logf("1.1.0 rolled out in %s", got.Status.CompletedAt.Sub(got.CreationTimestamp.Time))

	// 1.2.0 on a canary whose node takes no new pod.
	var node corev1.Node
	g.Expect(canary.cluster.Client.Get(ctx, client.ObjectKey{Name: canary.cluster.NodeName}, &node)).To(Succeed())
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: rolloutCordonTaint, Value: canary.name, Effect: corev1.TaintEffectNoSchedule})
	g.Expect(canary.cluster.Client.Patch(ctx, &node, patch)).To(Succeed())
	bad, err := request.Create(ctx, hubCluster.Client, p, "production", "1.2.0", tugboatv1alpha1.RequestedByUser, "test")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.current(canary.name, canary.namespace, "demo")).WithTimeout(120 * time.Second).WithPolling(100 * time.Millisecond).Should(
		HaveField("Version", "1.2.0"))
	// Past the deadline the rollout stops and the canary is rolled back.
	g.Eventually(f.phase(bad.Name)).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).
		Should(Equal(tugboatv1alpha1.PromotionFailed))
	got = f.promotion(g, bad.Name)
	st = got.Status.Rollout
	g.Expect(st.Phase).To(Equal(tugboatv1alpha1.RolloutRolledBack))
	g.Expect(st.FailedTargets).To(HaveLen(1))
	g.Expect([]any{st.FailedTargets[0].Spoke, st.FailedTargets[0].Reason}).To(Equal(
		[]any{canary.name, tugboatv1alpha1.TargetProgressDeadlineExceeded}))
	g.Expect(st.Waves).To(HaveLen(2))
	g.Expect(st.Waves[1].StartedAt).To(BeNil(), "the second wave never started")
	ready := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Reason).To(Equal(tugboatv1alpha1.RolloutFailedReason.String()))
	g.Expect(ready.Message).To(ContainSubstring("rolled back 1 target(s) to the revision they ran before: prod-a/apps/demo"))
	// Only the canary was acted on: the others have no PromotionTarget.
	acted := f.rolloutTargets(g, got)
	g.Expect(slices.Sorted(maps.Keys(acted))).To(Equal([]string{canary.name}), "only the canary was acted on")
	rb := acted[canary.name].Rollback
	g.Expect(rb).NotTo(BeNil())
	g.Expect([]any{rb.Phase, rb.Revision}).To(Equal([]any{tugboatv1alpha1.ActionSucceeded, int32(4)}))

	// helm history on the canary: the upgrade, then Helm's rollback to 2.
	h := helmHistory(g, t, canary)
	g.Expect(h).To(HaveLen(4))
	g.Expect(describe(h[3])).To(HavePrefix("1.2.0 superseded Upgrade by tugboat action"))
	g.Expect(describe(h[4])).To(Equal("1.1.0 deployed Rollback to 2"))
	g.Expect(logs.count(canary.name, "Rolling back release")).To(Equal(1))
	// The other three: untouched since 1.1.0.
	for _, s := range rest {
		h := helmHistory(g, t, s)
		g.Expect(slices.Sorted(maps.Keys(h))).To(Equal([]int{1, 2}), "%s has no new revision", s.name)
		g.Expect(describe(h[2])).To(HavePrefix("1.1.0 deployed "), s.name)
		g.Expect(logs.count(s.name, "Upgrading release")).To(Equal(1), "%s's agent got no action since 1.1.0", s.name)
	}
	g.Eventually(f.current(canary.name, canary.namespace, "demo")).WithTimeout(60*time.Second).Should(Equal(
		current{4, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}), "1.1.0 runs again, healthy")

	// production is held, with the reason; Events and notices tell it.
	g.Eventually(func(g Gomega) []tugboatv1alpha1.HoldReason {
		var pl tugboatv1alpha1.Pipeline
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &pl)).To(Succeed())
		var reasons []tugboatv1alpha1.HoldReason
		for _, h := range pl.Status.HeldEnvironments {
			reasons = append(reasons, h.Reason)
		}
		return reasons
	}).WithTimeout(30 * time.Second).Should(Equal([]tugboatv1alpha1.HoldReason{tugboatv1alpha1.HoldRolloutFailed}))
	g.Eventually(func(g Gomega) []string { return eventsAbout(g, hubCluster.Client, f.ns, "Promotion", bad.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElements(
		HavePrefix("Warning RollingBack: rollout of 1.2.0 into production stopped in wave canary"),
		HavePrefix("Warning RolledBack: rollout of 1.2.0 into production stopped in wave canary"),
	))
	g.Eventually(func(g Gomega) []string { return eventsAbout(g, hubCluster.Client, f.ns, "Pipeline", p.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElement(
		HavePrefix("Warning HoldSet: automatic promotion into and out of production is held (RolloutFailed: ")))
	g.Eventually(func() []tugboatv1alpha1.NotifyEvent { return notices.events(bad.Name) }).WithTimeout(30 * time.Second).Should(
		ContainElements(tugboatv1alpha1.EventPromotionRollingBack, tugboatv1alpha1.EventPromotionFailed))
	g.Expect(notices.events(bad.Name)).NotTo(ContainElement(tugboatv1alpha1.EventPromotionWaveCompleted), "no wave completed")
	failed := notices.notice(bad.Name, tugboatv1alpha1.EventPromotionFailed)
	g.Expect(failed.Promotion.Message).To(ContainSubstring("rolled back 1 target(s) to the revision they ran before: prod-a/apps/demo"))
	g.Eventually(func() []tugboatv1alpha1.NotifyEvent { return notices.pipelineEvents(p.Name) }).WithTimeout(30 * time.Second).Should(
		ContainElement(tugboatv1alpha1.EventHoldStarted))
	t.Logf("test took %s", time.Since(began).Round(100*time.Millisecond))
}

// all returns the notices about promotion, in the order they came.
func (r *noticeRecorder) all(promotion string) []notify.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notify.Notice
	for _, n := range r.got {
		if n.Promotion != nil && n.Promotion.Name == promotion {
			out = append(out, n)
		}
	}
	return out
}

// pipelineEvents returns the events of the notices about Pipeline
// pipeline that concern no promotion (holds, deployments).
func (r *noticeRecorder) pipelineEvents(pipeline string) []tugboatv1alpha1.NotifyEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []tugboatv1alpha1.NotifyEvent
	for _, n := range r.got {
		if n.Pipeline == pipeline && n.Promotion == nil {
			out = append(out, n.Event)
		}
	}
	return out
}
