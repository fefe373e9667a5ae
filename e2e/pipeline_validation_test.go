package e2e_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/harness"
)

// noopStrategies is a registry whose every strategy reports success and
// does nothing: promotions run and then wait for targets that never move.
func noopStrategies() strategy.Registry {
	noop := strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
		return strategy.Result{Message: "no-op"}, nil
	})
	return strategy.Registry{
		tugboatv1alpha1.StrategyPullRequest: noop, tugboatv1alpha1.StrategyKubernetes: noop,
		tugboatv1alpha1.StrategyHelm: noop, tugboatv1alpha1.StrategyWebhook: noop,
		tugboatv1alpha1.StrategyNotification: noop,
	}
}

// deployed is the summary of a deployed revision with the given health.
func deployed(revision int32, version string, health tugboatv1alpha1.Health) tugboatv1alpha1.RevisionSummary {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	return tugboatv1alpha1.RevisionSummary{
		Revision: revision, Chart: "web", ChartVersion: version, AppVersion: version,
		Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: health, FirstDeployed: &now, LastDeployed: &now,
	}
}

// writeHistory records cur as the current revision of a release's
// ReleaseHistory the way the hub's recorder does: the object (labeled,
// spec set) is created when missing, and the status is written through the
// status subresource, newest revision first, the one before superseded.
func writeHistory(ctx context.Context, c client.Client, ns, spoke, namespace, release string, cur tugboatv1alpha1.RevisionSummary) error {
	key := client.ObjectKey{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, namespace, release)}
	rh := &tugboatv1alpha1.ReleaseHistory{}
	err := c.Get(ctx, key, rh)
	if apierrors.IsNotFound(err) {
		rh = &tugboatv1alpha1.ReleaseHistory{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name, Labels: map[string]string{
				tugboatv1alpha1.LabelSpoke: spoke, tugboatv1alpha1.LabelRelease: release, tugboatv1alpha1.LabelReleaseNamespace: namespace,
			}},
			Spec: tugboatv1alpha1.ReleaseHistorySpec{Spoke: spoke, Namespace: namespace, Release: release},
		}
		err = c.Create(ctx, rh)
	}
	if err != nil {
		return err
	}
	revs := rh.Status.Revisions
	if len(revs) > 0 && revs[0].Revision == cur.Revision {
		revs[0].RevisionSummary = cur
	} else {
		if len(revs) > 0 && revs[0].Status == tugboatv1alpha1.ReleaseStatusDeployed {
			revs[0].Status = tugboatv1alpha1.ReleaseStatusSuperseded
		}
		revs = append([]tugboatv1alpha1.Revision{{RevisionSummary: cur}}, revs...)
		if len(revs) > 10 {
			revs = revs[:10]
		}
	}
	rh.Status.Revisions = revs
	rh.Status.Current = &cur
	return c.Status().Update(ctx, rh)
}

func getPipeline(g Gomega, c client.Client, ns, name string) *tugboatv1alpha1.Pipeline {
	p := &tugboatv1alpha1.Pipeline{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

// promotionsOf lists the names of a Pipeline's Promotions.
func promotionsOf(g Gomega, c client.Client, ns, name string) []string {
	var list tugboatv1alpha1.PromotionList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelPipeline: name})).To(Succeed())
	names := []string{}
	for _, pr := range list.Items {
		names = append(names, pr.Name)
	}
	return names
}

// expectStalled waits until the Pipeline reports Stalled=True with reason
// for its current generation, with Ready=False, and returns the message.
func expectStalled(g Gomega, c client.Client, ns, name string, reason tugboatv1alpha1.ConditionReason) string {
	var msg string
	g.Eventually(func(g Gomega) {
		p := getPipeline(g, c, ns, name)
		stalled := apimeta.FindStatusCondition(p.Status.Conditions, tugboatv1alpha1.StalledCondition.String())
		g.Expect(stalled).NotTo(BeNil(), "Stalled condition")
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(reason.String()))
		g.Expect(stalled.ObservedGeneration).To(Equal(p.Generation))
		ready := apimeta.FindStatusCondition(p.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		g.Expect(ready).NotTo(BeNil(), "Ready condition")
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(reason.String()))
		g.Expect(ready.Message).To(Equal(stalled.Message))
		msg = stalled.Message
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return msg
}

// expectNotStalled waits until the Pipeline has no Stalled condition and
// Ready is no longer the stall's.
func expectNotStalled(g Gomega, c client.Client, ns, name string, timeout time.Duration) {
	g.Eventually(func(g Gomega) {
		p := getPipeline(g, c, ns, name)
		g.Expect(apimeta.FindStatusCondition(p.Status.Conditions, tugboatv1alpha1.StalledCondition.String())).To(BeNil())
		ready := apimeta.FindStatusCondition(p.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).NotTo(BeElementOf(tugboatv1alpha1.SecretNotFoundReason.String(), tugboatv1alpha1.InvalidSpecReason.String()))
	}).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// TestPipelineValidation_rejectsOrStallsInvalidPipelines runs the hub
// in-process against a real hub API server. dev runs web 1.1.0 healthy and
// staging runs 1.0.0, so every valid Pipeline over them promotes at once:
// an invalid one is either rejected by the API server (CRD schema) or
// reported Stalled, Ready=False, naming the problem, and promotes nothing
// until it is fixed.
func TestPipelineValidation_rejectsOrStallsInvalidPipelines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster := harness.StartT(t, harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true})
	c := hubCluster.Client
	f := newFleetWith(t, hubCluster, func(o *hub.Options) { o.Strategies = noopStrategies() })
	ns := f.ns
	f.registerSpoke("dev")
	f.registerSpoke("staging")
	g.Expect(writeHistory(ctx, c, ns, "dev", "apps", "web", deployed(2, "1.1.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())
	g.Expect(writeHistory(ctx, c, ns, "staging", "apps", "web", deployed(1, "1.0.0", tugboatv1alpha1.HealthCurrent))).To(Succeed())

	newPipeline := func(name string, s tugboatv1alpha1.PromotionStrategy) *tugboatv1alpha1.Pipeline {
		return &tugboatv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: tugboatv1alpha1.PipelineSpec{
				Release: "web",
				Environments: []tugboatv1alpha1.Environment{
					{Name: "dev", Targets: []tugboatv1alpha1.Target{{Spoke: "dev", Namespace: "apps"}}},
					{Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "staging", Namespace: "apps"}}},
				},
				Promotion: s,
			},
		}
	}
	notification := tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification}
	noPromotion := func(g Gomega, name string) {
		g.Consistently(func(g Gomega) []string { return promotionsOf(g, c, ns, name) }).
			WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).Should(BeEmpty(), "a Stalled pipeline promotes nothing")
	}

	// The missing Secret goes first: its fix is seen at the next requeue
	// (a minute; Secrets are not watched), which the other cases overlap.
	const gitSecret = "git-credentials"
	t.Run("a missing secret stalls the pipeline, naming the secret", func(t *testing.T) {
		g := NewWithT(t)
		p := newPipeline("pr", tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyPullRequest, PullRequest: &tugboatv1alpha1.PullRequestStrategy{
			URL: "https://git.example/fleet/apps.git", Provider: tugboatv1alpha1.GitProviderGitea,
			SecretRef: tugboatv1alpha1.LocalSecretReference{Name: gitSecret},
		}})
		g.Expect(c.Create(ctx, p)).To(Succeed())
		msg := expectStalled(g, c, ns, "pr", tugboatv1alpha1.SecretNotFoundReason)
		g.Expect(msg).To(ContainSubstring(ns + "/" + gitSecret + " not found"))
		g.Expect(msg).To(ContainSubstring("pullRequest.secretRef"))
		g.Expect(msg).To(ContainSubstring("staging"))
		noPromotion(g, "pr")
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gitSecret}, StringData: map[string]string{"token": "t0ken"}}
		g.Expect(c.Create(ctx, sec)).To(Succeed())
	})

	t.Run("an unknown strategy type is rejected by the CRD, naming the field", func(t *testing.T) {
		g := NewWithT(t)
		err := c.Create(ctx, newPipeline("pigeon", tugboatv1alpha1.PromotionStrategy{Type: "carrierPigeon"}))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring(`spec.promotion.type: Unsupported value: "carrierPigeon"`))

		p := newPipeline("pigeon", notification)
		p.Spec.Environments[1].Promotion = &tugboatv1alpha1.PromotionStrategy{Type: "ftp"}
		err = c.Create(ctx, p)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring(`spec.environments[1].promotion.type: Unsupported value: "ftp"`))
		g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pigeon"}, &tugboatv1alpha1.Pipeline{}))).To(BeTrue())
	})

	t.Run("a duplicate environment is rejected by the CRD, naming the field", func(t *testing.T) {
		g := NewWithT(t)
		p := newPipeline("twice", notification)
		p.Spec.Environments = append(p.Spec.Environments, tugboatv1alpha1.Environment{
			Name: "staging", Targets: []tugboatv1alpha1.Target{{Spoke: "staging", Namespace: "other"}},
		})
		err := c.Create(ctx, p)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.environments[2]: Duplicate value"))
		g.Expect(err.Error()).To(ContainSubstring(`"staging"`))

		// An update cannot introduce one either.
		valid := newPipeline("twice", notification)
		valid.Spec.Suspend = true
		g.Expect(c.Create(ctx, valid)).To(Succeed())
		patch := client.MergeFrom(valid.DeepCopy())
		valid.Spec.Environments[1].Name = "dev"
		err = c.Patch(ctx, valid, patch)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.environments[1]: Duplicate value"))
	})

	t.Run("a target in two environments (a cycle) stalls the pipeline, naming both", func(t *testing.T) {
		g := NewWithT(t)
		p := newPipeline("cycle", notification)
		// dev's release again, spelled with an explicit release name.
		p.Spec.Environments = append(p.Spec.Environments, tugboatv1alpha1.Environment{
			Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "dev", Namespace: "apps", Release: "web"}},
		})
		g.Expect(c.Create(ctx, p)).To(Succeed())
		msg := expectStalled(g, c, ns, "cycle", tugboatv1alpha1.InvalidSpecReason)
		g.Expect(msg).To(ContainSubstring("dev/apps/web"))
		g.Expect(msg).To(ContainSubstring(`environments "dev" and "production"`))
		noPromotion(g, "cycle")
	})

	t.Run("the kubernetes strategy without helmRelease on a target stalls the pipeline", func(t *testing.T) {
		g := NewWithT(t)
		p := newPipeline("kube", tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyKubernetes})
		g.Expect(c.Create(ctx, p)).To(Succeed())
		msg := expectStalled(g, c, ns, "kube", tugboatv1alpha1.InvalidSpecReason)
		g.Expect(msg).To(ContainSubstring("helmRelease"))
		g.Expect(msg).To(ContainSubstring("staging/apps"))
		g.Expect(msg).To(ContainSubstring("environment staging"))
		noPromotion(g, "kube")

		// Fixing the spec clears the stall and the promotion goes ahead.
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.Environments[1].Targets[0].HelmRelease = &tugboatv1alpha1.ObjectReference{Name: "web"}
		g.Expect(c.Patch(ctx, p, patch)).To(Succeed())
		expectNotStalled(g, c, ns, "kube", 30*time.Second)
		g.Eventually(func(g Gomega) []string { return promotionsOf(g, c, ns, "kube") }).WithTimeout(30 * time.Second).
			Should(ConsistOf(pipeline.PromotionName("kube", "staging", "1.1.0")))
	})

	t.Run("once the missing secret exists the stall clears and the pipeline promotes", func(t *testing.T) {
		g := NewWithT(t)
		// The Stalled pipeline is looked at again within its one-minute
		// requeue, without any change to it.
		expectNotStalled(g, c, ns, "pr", 90*time.Second)
		g.Eventually(func(g Gomega) []string { return promotionsOf(g, c, ns, "pr") }).WithTimeout(30 * time.Second).
			Should(ConsistOf(pipeline.PromotionName("pr", "staging", "1.1.0")))
		p := getPipeline(g, c, ns, "pr")
		g.Expect(p.Status.Environments).To(HaveLen(2))
		g.Expect(p.Status.Environments[0].Versions).To(Equal([]string{"1.1.0"}))
	})
}
