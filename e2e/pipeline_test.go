package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/harness"
)

// actor is a promotion strategy standing in for an external system (CI,
// helm-controller): it runs a real Helm SDK upgrade of every target to the
// version on the target's spoke. It is idempotent like every strategy, and
// counts the upgrades it made.
type actor struct {
	t      *testing.T
	spokes map[string]*harness.Cluster

	mu       sync.Mutex
	upgrades map[string]int // promotion name → upgrades made
}

func (a *actor) Promote(ctx context.Context, req strategy.Request) (strategy.Result, error) {
	for _, t := range req.Targets {
		c := a.spokes[t.SpokeName]
		if c == nil {
			return strategy.Result{}, strategy.Terminal(fmt.Errorf("no cluster for spoke %s", t.SpokeName))
		}
		h := newHelm(a.t, c, t.Namespace)
		rel, err := h.get(t.Release)
		if err != nil {
			return strategy.Result{}, err
		}
		if rel.Chart.Metadata.Version == req.Version {
			continue // already there: idempotent
		}
		h.upgrade(t.Release, req.Version, nil)
		a.mu.Lock()
		a.upgrades[req.Promotion.Name]++
		a.mu.Unlock()
	}
	return strategy.Result{Message: "upgraded by the test actor"}, nil
}

func (a *actor) count(promotion string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.upgrades[promotion]
}

func webPipeline(ns string, strategyType tugboatv1alpha1.StrategyType) *tugboatv1alpha1.Pipeline {
	env := func(name, spoke string) tugboatv1alpha1.Environment {
		return tugboatv1alpha1.Environment{Name: name, Targets: []tugboatv1alpha1.Target{{Spoke: spoke, Namespace: "apps"}}}
	}
	return &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:      "web",
			Environments: []tugboatv1alpha1.Environment{env("dev", "dev"), env("staging", "staging"), env("production", "production")},
			Promotion:    tugboatv1alpha1.PromotionStrategy{Type: strategyType},
			Timeout:      &metav1.Duration{Duration: 2 * time.Minute},
		},
	}
}

func (f *fleet) promotion(g Gomega, name string) *tugboatv1alpha1.Promotion {
	pr := &tugboatv1alpha1.Promotion{}
	if err := f.hub.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, pr); err != nil {
		return nil
	}
	return pr
}

// target is one PromotionTarget, flattened: which release on which
// Spoke, and its status.
type target struct {
	Spoke, Namespace, Release string
	tugboatv1alpha1.PromotionTargetStatus
}

// targets reads the PromotionTargets of Promotion name, sorted by target.
func (f *fleet) targets(g Gomega, name string) []target {
	var list tugboatv1alpha1.PromotionTargetList
	g.Expect(f.hub.Client.List(context.Background(), &list, client.InNamespace(f.ns),
		client.MatchingLabels{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(name)})).To(Succeed())
	out := make([]target, 0, len(list.Items))
	for _, pt := range list.Items {
		out = append(out, target{Spoke: pt.Spec.Spoke, Namespace: pt.Spec.Namespace, Release: pt.Spec.Release, PromotionTargetStatus: pt.Status})
	}
	slices.SortFunc(out, func(a, b target) int {
		return strings.Compare(a.Spoke+"/"+a.Namespace+"/"+a.Release, b.Spoke+"/"+b.Namespace+"/"+b.Release)
	})
	return out
}

func (f *fleet) phase(name string) func() tugboatv1alpha1.PromotionPhase {
	return func() tugboatv1alpha1.PromotionPhase {
		if pr := f.promotion(nil, name); pr != nil {
			return pr.Status.Phase
		}
		return ""
	}
}

func (f *fleet) setApproval(g Gomega, name string, approve bool, who string) {
	pr := f.promotion(g, name)
	g.Expect(pr).NotTo(BeNil())
	orig := pr.DeepCopy()
	a := &tugboatv1alpha1.Approval{Time: metav1.Now(), Message: "from the test"}
	if approve {
		a.ApprovedBy = who
	} else {
		a.RejectedBy = who
	}
	pr.Status.Approval = a
	g.Expect(f.hub.Client.Status().Patch(context.Background(), pr, client.MergeFrom(orig))).To(Succeed())
}

// TestPipeline_promotesThroughEnvironments runs a hub and three spokes
// (dev, staging, production) with real agents and real Helm releases, and
// walks a chart through automatic promotion, an approval gate (approve and
// reject), a rollback hold and a timeout.
func TestPipeline_promotesThroughEnvironments(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster, clusters := startClusters(t, 3)
	names := []string{"dev", "staging", "production"}
	a := &actor{t: t, spokes: map[string]*harness.Cluster{}, upgrades: map[string]int{}}
	for i, n := range names {
		a.spokes[n] = clusters[i]
	}
	registry := strategy.Registry{
		tugboatv1alpha1.StrategyWebhook: a,
		// A strategy that never acts: its promotions can only time out.
		tugboatv1alpha1.StrategyNotification: strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
			return strategy.Result{Message: "asked someone who never answers"}, nil
		}),
	}
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Strategies = registry })
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	for i, n := range names {
		f.addSpoke(n, clusters[i], log.WithName(n))
	}
	// staging and production start at 0.9.0; dev gets 1.0.0.
	for i := 1; i < 3; i++ {
		newHelm(t, clusters[i], "apps").install("web", "0.9.0")
	}
	p := webPipeline(f.ns, tugboatv1alpha1.StrategyWebhook)
	p.Spec.Promotion.Webhook = &tugboatv1alpha1.WebhookStrategy{URL: "https://ci.example/promote"}
	g.Expect(hubCluster.Client.Create(ctx, p)).To(Succeed())
	newHelm(t, clusters[0], "apps").install("web", "1.0.0")

	t.Run("automatic promotion dev → staging → production", func(t *testing.T) {
		g := NewWithT(t)
		for _, env := range []string{"staging", "production"} {
			name := pipeline.PromotionName("web", env, "1.0.0")
			g.Eventually(f.phase(name)).WithTimeout(90*time.Second).WithPolling(200*time.Millisecond).
				Should(Equal(tugboatv1alpha1.PromotionSucceeded), "promotion %s", name)
			pr := f.promotion(g, name)
			g.Expect(pr.Spec.RequestedBy).To(Equal(tugboatv1alpha1.RequestedByAuto))
			g.Expect(f.targets(g, name)).To(HaveLen(1))
			g.Expect(f.targets(g, name)[0].Done).To(BeTrue())
			g.Expect(f.targets(g, name)[0].Version).To(Equal("1.0.0"))
			g.Expect(a.count(name)).To(Equal(1), "exactly one upgrade by the strategy")
		}
		g.Eventually(f.current("production", "apps", "web")).WithTimeout(30 * time.Second).
			Should(Equal(current{2, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
		var got tugboatv1alpha1.Pipeline
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		g.Expect(got.Status.Environments).To(HaveLen(3))
		for _, es := range got.Status.Environments {
			g.Expect(es.Versions).To(Equal([]string{"1.0.0"}), "environment %s", es.Name)
		}
		var promos tugboatv1alpha1.PromotionList
		g.Expect(hubCluster.Client.List(ctx, &promos, client.InNamespace(f.ns))).To(Succeed())
		g.Expect(promos.Items).To(HaveLen(2), "one per (environment, version), never a second")
	})

	t.Run("approval gate: approve, then reject", func(t *testing.T) {
		g := NewWithT(t)
		var got tugboatv1alpha1.Pipeline
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Environments[2].Gates.RequireApproval = true
		g.Expect(hubCluster.Client.Patch(ctx, &got, patch)).To(Succeed())

		newHelm(t, clusters[0], "apps").upgrade("web", "1.1.0", nil)
		prod := pipeline.PromotionName("web", "production", "1.1.0")
		g.Eventually(f.phase(prod)).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
		g.Consistently(f.phase(prod)).WithTimeout(2 * time.Second).Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
		g.Expect(a.count(prod)).To(BeZero(), "nothing happens before approval")
		f.setApproval(g, prod, true, "alice")
		g.Eventually(f.phase(prod)).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionSucceeded))

		newHelm(t, clusters[0], "apps").upgrade("web", "1.2.0", nil)
		prod = pipeline.PromotionName("web", "production", "1.2.0")
		g.Eventually(f.phase(prod)).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))
		f.setApproval(g, prod, false, "bob")
		g.Eventually(f.phase(prod)).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.PromotionAborted))
		g.Expect(a.count(prod)).To(BeZero())
		g.Expect(f.current("production", "apps", "web")(g).Version).To(Equal("1.1.0"))
	})

	t.Run("rollback hold", func(t *testing.T) {
		g := NewWithT(t)
		// staging runs 1.2.0; a person rolls it back to 1.1.0.
		g.Eventually(func(g Gomega) string { return f.current("staging", "apps", "web")(g).Version }).
			WithTimeout(30 * time.Second).Should(Equal("1.2.0"))
		h := newHelm(t, clusters[1], "apps")
		rel, err := h.get("web")
		g.Expect(err).NotTo(HaveOccurred())
		h.rollback("web", rel.Version-1)
		g.Eventually(func(g Gomega) []string {
			var got tugboatv1alpha1.Pipeline
			g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
			var held []string
			for _, he := range got.Status.HeldEnvironments {
				held = append(held, he.Name)
			}
			return held
		}).WithTimeout(30 * time.Second).Should(Equal([]string{"staging"}))

		// A new version in dev is not promoted into the held staging.
		newHelm(t, clusters[0], "apps").upgrade("web", "1.3.0", nil)
		staging := pipeline.PromotionName("web", "staging", "1.3.0")
		g.Eventually(func(g Gomega) string { return f.current("dev", "apps", "web")(g).Version }).
			WithTimeout(30 * time.Second).Should(Equal("1.3.0"))
		g.Consistently(f.phase(staging)).WithTimeout(3 * time.Second).Should(BeEmpty())

		// Resume: the promotion goes ahead.
		var got tugboatv1alpha1.Pipeline
		g.Expect(hubCluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		patch := client.MergeFrom(got.DeepCopy())
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[pipeline.ResumeAnnotationPrefix+"staging"] = time.Now().Add(time.Second).UTC().Format(time.RFC3339)
		g.Expect(hubCluster.Client.Patch(ctx, &got, patch)).To(Succeed())
		g.Eventually(f.phase(staging)).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionSucceeded))

		// kubectl events shows both, on the Pipeline (issue 29).
		g.Eventually(func(g Gomega) []string {
			var list eventsv1.EventList
			g.Expect(hubCluster.Client.List(ctx, &list, client.InNamespace(p.Namespace))).To(Succeed())
			var out []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "Pipeline" && e.Regarding.Name == p.Name {
					out = append(out, e.Type+" "+e.Reason+": "+e.Note)
				}
			}
			return out
		}).WithTimeout(30 * time.Second).Should(ContainElements(
			And(HavePrefix("Warning HoldSet: automatic promotion into and out of staging is held (Rollback: "), HaveSuffix("resume with `tugboat resume web --env staging`")),
			HavePrefix("Normal HoldLifted: the hold on staging (Rollback of 1.1.0) is lifted"),
		))
	})

	t.Run("a promotion nobody carries out times out naming the laggard", func(t *testing.T) {
		g := NewWithT(t)
		idle := webPipeline(f.ns, tugboatv1alpha1.StrategyNotification)
		idle.Name = "idle"
		idle.Spec.Environments = idle.Spec.Environments[:2]
		idle.Spec.Environments[1].Targets[0].Release = "api"
		idle.Spec.Environments[0].Targets[0].Release = "api"
		idle.Spec.Timeout = &metav1.Duration{Duration: 3 * time.Second}
		idle.Spec.HistoryLimit = ptr.To(int32(5))
		newHelm(t, clusters[1], "apps").install("api", "0.1.0")
		g.Expect(hubCluster.Client.Create(ctx, idle)).To(Succeed())
		newHelm(t, clusters[0], "apps").install("api", "0.2.0")
		name := pipeline.PromotionName("idle", "staging", "0.2.0")
		g.Eventually(f.phase(name)).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).
			Should(Equal(tugboatv1alpha1.PromotionFailed))
		pr := f.promotion(g, name)
		var msg string
		for _, c := range pr.Status.Conditions {
			if c.Type == "Ready" {
				msg = c.Message
			}
		}
		g.Expect(msg).To(ContainSubstring("timed out"))
		g.Expect(msg).To(ContainSubstring("staging/apps/api at 0.1.0"))
	})
}
