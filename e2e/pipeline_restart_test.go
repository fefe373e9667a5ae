package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/harness"
)

// helmActions runs Helm SDK actions against one cluster and returns errors
// instead of failing the test: strategies run on the hub's goroutines.
func helmActions(c *harness.Cluster, ns string) (*action.Configuration, error) {
	settings := cli.New()
	settings.KubeConfig = c.KubeconfigPath
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		return nil, err
	}
	return cfg, nil
}

// revisionsAt returns how many Helm revisions of a release on c run
// version: each is one real apply.
func revisionsAt(g Gomega, c *harness.Cluster, ns, release, version string) int {
	cfg, err := helmActions(c, ns)
	g.Expect(err).NotTo(HaveOccurred())
	revs, err := action.NewHistory(cfg).Run(release)
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, r := range revs {
		if r.Chart.Metadata.Version == version {
			n++
		}
	}
	return n
}

// upgrader is an idempotent strategy standing in for the helm strategy: it
// checks each target's current chart version on the real spoke and runs a
// Helm SDK upgrade only when it differs. It counts its calls and its
// upgrades. When armed for a promotion, its first call for it upgrades,
// reports that on applied, and then blocks until the hub stops: the
// controller dies after the apply and before it recorded anything.
type upgrader struct {
	spokes map[string]*harness.Cluster

	mu       sync.Mutex
	calls    map[string]int
	upgrades map[string]int
	armed    map[string]chan struct{} // promotion → closed once applied, then blocks
}

func (u *upgrader) Promote(ctx context.Context, req strategy.Request) (strategy.Result, error) {
	if err := ctx.Err(); err != nil {
		// A stopping controller may still hand out a queued item with its
		// context canceled; a strategy does nothing then.
		return strategy.Result{}, err
	}
	name := req.Promotion.Name
	u.mu.Lock()
	u.calls[name]++
	applied := u.armed[name]
	delete(u.armed, name)
	u.mu.Unlock()
	for _, t := range req.Targets {
		c := u.spokes[t.SpokeName]
		if c == nil {
			return strategy.Result{}, strategy.Terminal(fmt.Errorf("no cluster for spoke %s", t.SpokeName))
		}
		cfg, err := helmActions(c, t.Namespace)
		if err != nil {
			return strategy.Result{}, err
		}
		rel, err := action.NewGet(cfg).Run(t.Release)
		if err != nil {
			return strategy.Result{}, err
		}
		if rel.Chart.Metadata.Version == req.Version {
			continue // already applied: idempotent
		}
		ch, err := loader.Load(webChart)
		if err != nil {
			return strategy.Result{}, strategy.Terminal(err)
		}
		ch.Metadata.Version, ch.Metadata.AppVersion = req.Version, req.Version
		up := action.NewUpgrade(cfg)
		up.Namespace, up.Timeout, up.ReuseValues = t.Namespace, 30*time.Second, true
		if _, err := up.RunWithContext(ctx, t.Release, ch, nil); err != nil {
			return strategy.Result{}, err
		}
		u.mu.Lock()
		u.upgrades[name]++
		u.mu.Unlock()
	}
	if applied != nil {
		close(applied)
		<-ctx.Done() // the hub is killed with the apply made and not recorded
		return strategy.Result{}, ctx.Err()
	}
	return strategy.Result{Message: "upgraded"}, nil
}

// arm makes the next call for promotion block after applying; the returned
// channel is closed once it applied.
func (u *upgrader) arm(promotion string) <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch := make(chan struct{})
	u.armed[promotion] = ch
	return ch
}

func (u *upgrader) counts(promotion string) (calls, upgrades int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[promotion], u.upgrades[promotion]
}

// TestPipelineRestart_onePromotionOneApplyAcrossHubRestarts runs a hub and
// two spokes (dev, staging) with real agents and Helm releases. The hub is
// killed in the middle of a promotion, after the strategy upgraded the
// release and before the hub recorded it: after the restart the promotion
// succeeds and the release was upgraded exactly once. The hub is killed
// again while a promotion waits for approval: it still waits after the
// restart, and the approval then carries it through.
func TestPipelineRestart_onePromotionOneApplyAcrossHubRestarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster, clusters := startClusters(t, 2)
	dev, staging := clusters[0], clusters[1]
	u := &upgrader{
		spokes: map[string]*harness.Cluster{"dev": dev, "staging": staging},
		calls:  map[string]int{}, upgrades: map[string]int{}, armed: map[string]chan struct{}{},
	}
	f := newFleetWith(t, hubCluster, func(o *hub.Options) {
		o.Strategies = strategy.Registry{tugboatv1alpha1.StrategyHelm: u}
	})
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	f.addSpoke("dev", dev, log.WithName("dev"))
	f.addSpoke("staging", staging, log.WithName("staging"))
	newHelm(t, staging, "apps").install("web", "0.9.0")

	p := webPipeline(f.ns, tugboatv1alpha1.StrategyHelm)
	p.Spec.Environments = p.Spec.Environments[:2]
	p.Spec.Timeout = &metav1.Duration{Duration: 3 * time.Minute}
	first := pipeline.PromotionName("web", "staging", "1.0.0")
	applied := u.arm(first)
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
	newHelm(t, dev, "apps").install("web", "1.0.0")

	promotionsTo := func(g Gomega, version string) []string {
		var list tugboatv1alpha1.PromotionList
		g.Expect(hubCluster.Client.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{
			pipeline.LabelPipeline: "web", pipeline.LabelEnvironment: "staging", pipeline.LabelVersion: pipeline.LabelValue(version),
		})).To(Succeed())
		names := []string{}
		for _, pr := range list.Items {
			names = append(names, pr.Name)
		}
		return names
	}

	t.Run("a restart after the apply and before it is recorded applies once", func(t *testing.T) {
		g := NewWithT(t)
		select {
		case <-applied:
		case <-time.After(120 * time.Second):
			t.Fatalf("the strategy was not called for %s (phase %q)", first, f.phase(first)())
		}
		g.Expect(f.phase(first)()).To(Equal(tugboatv1alpha1.PromotionRunning))
		f.killHub()
		calls, upgrades := u.counts(first)
		g.Expect([]int{calls, upgrades}).To(Equal([]int{1, 1}))
		g.Expect(f.phase(first)()).To(Equal(tugboatv1alpha1.PromotionRunning), "the dead hub recorded nothing")

		f.startHub()
		g.Eventually(f.phase(first)).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionSucceeded))
		calls, upgrades = u.counts(first)
		g.Expect(calls).To(Equal(2), "the restarted hub ran the strategy again")
		g.Expect(upgrades).To(Equal(1), "and it did not apply again")
		g.Expect(revisionsAt(g, staging, "apps", "web", "1.0.0")).To(Equal(1), "one Helm revision at 1.0.0 on staging")
		g.Expect(promotionsTo(g, "1.0.0")).To(Equal([]string{first}))
		g.Expect(f.targets(g, first)).To(HaveLen(1))
		g.Expect(f.targets(g, first)[0].Done).To(BeTrue())
		g.Expect(f.targets(g, first)[0].Revision).To(Equal(int32(2)))
	})

	t.Run("a restart while waiting for approval keeps waiting; approval then proceeds", func(t *testing.T) {
		g := NewWithT(t)
		got := getPipeline(g, hubCluster.Client, f.ns, "web")
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Environments[1].Gates.RequireApproval = true
		g.Expect(hubCluster.Client.Patch(ctx, got, patch)).To(Succeed())
		newHelm(t, dev, "apps").upgrade("web", "1.1.0", nil)
		second := pipeline.PromotionName("web", "staging", "1.1.0")
		g.Eventually(f.phase(second)).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))

		f.killHub()
		restarted := time.Now()
		f.startHub()
		// The new hub is up once it records the agents' heartbeats again.
		g.Eventually(func(g Gomega) {
			for _, name := range []string{"dev", "staging"} {
				var sp tugboatv1alpha1.Spoke
				g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &sp)).To(Succeed())
				g.Expect(sp.Status.LastSeen).NotTo(BeNil())
				g.Expect(sp.Status.LastSeen.Time).To(BeTemporally(">", restarted.Truncate(time.Second)))
			}
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		g.Consistently(f.phase(second)).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
		calls, _ := u.counts(second)
		g.Expect(calls).To(BeZero(), "nothing is applied before approval")
		g.Expect(promotionsTo(g, "1.1.0")).To(Equal([]string{second}))

		f.setApproval(g, second, true, "alice")
		g.Eventually(f.phase(second)).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionSucceeded))
		_, upgrades := u.counts(second)
		g.Expect(upgrades).To(Equal(1))
		g.Expect(revisionsAt(g, staging, "apps", "web", "1.1.0")).To(Equal(1), "one Helm revision at 1.1.0 on staging")
		g.Expect(f.promotion(g, second).Status.Approval.ApprovedBy).To(Equal("alice"))
	})
}
