package actions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// fakeAgent speaks the agent's side of the wire protocol for one spoke,
// signing like the real agent: enough to drive the hub without a spoke
// cluster.
type fakeAgent struct {
	t    *testing.T
	name string
	key  []byte
}

// registerSpoke creates a Spoke in ns and waits for the key the hub
// generates for it.
func registerSpoke(t *testing.T, ns, name string) *fakeAgent {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(cluster.Client.Create(ctx, &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
	})).To(Succeed())
	var key corev1.Secret
	g.Eventually(func() error {
		return cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-key"}, &key)
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return &fakeAgent{t: t, name: name, key: key.Data[tugboatv1alpha1.SpokeKeySecretKey]}
}

// do sends a signed request; it may run on any goroutine.
func (a *fakeAgent) do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, hubURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	wire.SignRequest(req, a.key, body, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// report posts the spoke's state: these releases, deployed and healthy.
func (a *fakeAgent) report(g Gomega, releases ...wire.ReleaseState) {
	body, err := json.Marshal(wire.StateSnapshot{Spoke: a.name, AgentVersion: "test", TakenAt: time.Now(), Releases: releases})
	g.Expect(err).NotTo(HaveOccurred())
	code, resp, err := a.do(http.MethodPost, wire.StatePath(a.name), body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusAccepted), string(resp))
}

// poll long-polls for the spoke's actions.
func (a *fakeAgent) poll(g Gomega) []wire.Action {
	acts, err := a.tryPoll()
	g.Expect(err).NotTo(HaveOccurred())
	return acts
}

// tryPoll is poll for any goroutine.
func (a *fakeAgent) tryPoll() ([]wire.Action, error) {
	code, body, err := a.do(http.MethodGet, wire.ActionsPath(a.name), nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("poll: %d %s", code, body)
	}
	var list wire.ActionList
	err = json.Unmarshal(body, &list)
	return list.Actions, err
}

// outcome reports an action's outcome and returns the status code.
func (a *fakeAgent) outcome(g Gomega, id, result, message string, revision int) int {
	body, err := json.Marshal(wire.ActionOutcome{ID: id, Result: result, Message: message, Revision: revision, Time: time.Now()})
	g.Expect(err).NotTo(HaveOccurred())
	code, _, err := a.do(http.MethodPost, wire.ActionPath(a.name, id), body)
	g.Expect(err).NotTo(HaveOccurred())
	return code
}

func release(ns, name, version string, revision int) wire.ReleaseState {
	return wire.ReleaseState{
		Namespace: ns, Release: name, Chart: "web", ChartVersion: version, Revision: revision,
		Status: wire.StatusDeployed, Health: wire.HealthCurrent,
	}
}

func newNamespace(t *testing.T, name string) string {
	t.Helper()
	if err := cluster.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// helmPipeline promotes release web from dev (one target on devSpoke) to
// staging (the given targets) with the helm strategy.
func helmPipeline(ns, devSpoke string, cfg *tugboatv1alpha1.HelmStrategy, staging ...tugboatv1alpha1.Target) *tugboatv1alpha1.Pipeline {
	return &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: "web",
			Environments: []tugboatv1alpha1.Environment{
				{Name: "dev", Targets: []tugboatv1alpha1.Target{{Spoke: devSpoke, Namespace: "apps"}}},
				{Name: "staging", Targets: staging},
			},
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: cfg},
			Timeout:   &metav1.Duration{Duration: 2 * time.Minute},
		},
	}
}

func getPromotion(g Gomega, ns, name string) *tugboatv1alpha1.Promotion {
	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pr)).To(Succeed())
	return pr
}

// target is a PromotionTarget, flattened.
type target struct {
	Spoke, Namespace, Release string
	tugboatv1alpha1.PromotionTargetStatus
}

// getTargets reads the PromotionTargets of Promotion name in ns, sorted
// by target.
func getTargets(g Gomega, ns, name string) []target {
	var list tugboatv1alpha1.PromotionTargetList
	g.Expect(cluster.Client.List(context.Background(), &list, client.InNamespace(ns),
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

// actionPhases returns the phase of each target's action, by release
// namespace.
func actionPhases(ns, name string) func(g Gomega) map[string]tugboatv1alpha1.ActionPhase {
	return func(g Gomega) map[string]tugboatv1alpha1.ActionPhase {
		out := map[string]tugboatv1alpha1.ActionPhase{}
		for _, t := range getTargets(g, ns, name) {
			if t.Action != nil {
				out[t.Namespace] = t.Action.Phase
			}
		}
		return out
	}
}

func phase(ns, name string) func(g Gomega) tugboatv1alpha1.PromotionPhase {
	return func(g Gomega) tugboatv1alpha1.PromotionPhase {
		pr := &tugboatv1alpha1.Promotion{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pr); err != nil {
			return ""
		}
		return pr.Status.Phase
	}
}

func readyMessage(g Gomega, ns, name string) string {
	for _, c := range getPromotion(g, ns, name).Status.Conditions {
		if c.Type == tugboatv1alpha1.ReadyCondition.String() {
			return c.Message
		}
	}
	return ""
}

// TestActions_agentsPromoteThroughTheHub walks a helm Promotion through the
// real hub: it queues an action per target, hands a spoke only its own
// actions (marking them Delivered, and again to an agent that asks again),
// records the outcomes, and succeeds once the targets report the version.
// A Promotion in another namespace that names the same spoke is never
// offered to it, and times out saying the agent never fetched its action.
func TestActions_agentsPromoteThroughTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "promote")
	dev, staging := registerSpoke(t, ns, "dev-a"), registerSpoke(t, ns, "staging-a")
	dev.report(g, release("apps", "web", "1.0.0", 1))
	staging.report(g, release("apps", "web", "0.9.0", 1), release("flux", "web", "0.9.0", 3))

	// Another tenant's Promotion names staging-a, which is no Spoke of its
	// namespace.
	other := newNamespace(t, "tenant-b")
	op := helmPipeline(other, "dev-a", &tugboatv1alpha1.HelmStrategy{Repository: "https://evil.example.com", Chart: "miner"},
		tugboatv1alpha1.Target{Spoke: "staging-a", Namespace: "apps"})
	op.Spec.Suspend = true
	op.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Second}
	g.Expect(cluster.Client.Create(ctx, op)).To(Succeed())
	g.Expect(cluster.Client.Create(ctx, &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "web-staging-6.6.6"},
		Spec: tugboatv1alpha1.PromotionSpec{
			Pipeline: "web", From: "dev", To: "staging", Version: "6.6.6",
			RequestedBy: tugboatv1alpha1.RequestedByUser,
		},
	})).To(Succeed())
	g.Eventually(actionPhases(other, "web-staging-6.6.6")).WithTimeout(30 * time.Second).
		Should(Equal(map[string]tugboatv1alpha1.ActionPhase{"apps": tugboatv1alpha1.ActionPending}))

	p := helmPipeline(ns, "dev-a",
		&tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web", ValuesPolicy: tugboatv1alpha1.ValuesPolicyResetThenReuse},
		tugboatv1alpha1.Target{Spoke: "staging-a", Namespace: "apps"},
		tugboatv1alpha1.Target{Spoke: "staging-a", Namespace: "flux", HelmRelease: &tugboatv1alpha1.ObjectReference{Name: "web-hr"}})
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.0.0")
	g.Eventually(actionPhases(ns, name)).WithTimeout(30 * time.Second).Should(Equal(map[string]tugboatv1alpha1.ActionPhase{
		"apps": tugboatv1alpha1.ActionPending, "flux": tugboatv1alpha1.ActionPending,
	}))
	// The targets are written before the Promotion's status.
	g.Eventually(phase(ns, name)).WithTimeout(10 * time.Second).Should(Equal(tugboatv1alpha1.PromotionVerifying))
	pr := getPromotion(g, ns, name)
	g.Expect(pr.Status.StrategyResult.Message).To(Equal("queued an action for 2 targets"))
	g.Expect(getTargets(g, ns, name)[0].Message).To(HavePrefix("action not fetched by the agent (is it running?)"))
	ids := map[string]string{}
	for _, tg := range getTargets(g, ns, name) {
		ids[tg.Namespace] = wire.NewActionID(string(pr.UID), "staging-a", tg.Namespace, "web")
		g.Expect(tg.Action.ID).To(Equal(ids[tg.Namespace]))
	}

	// The poll answers at once, with this namespace's actions only.
	acts := staging.poll(g)
	g.Expect(acts).To(HaveLen(2))
	for _, a := range acts {
		g.Expect(a.ID).To(Equal(ids[a.Namespace]))
		g.Expect(a.Promotion).To(Equal(ns + "/" + name))
		g.Expect(a.Release).To(Equal("web"))
		g.Expect(a.Version).To(Equal("1.0.0"))
		g.Expect(a.Chart).To(Equal(wire.ChartSource{Repository: "https://charts.example.com", Name: "web"}))
		g.Expect(a.ValuesPolicy).To(Equal(wire.ValuesResetThenReuse))
		g.Expect(a.Created).NotTo(BeZero())
		if a.Namespace == "flux" {
			g.Expect(a.HelmRelease).To(Equal(&wire.HelmReleaseRef{Namespace: "flux", Name: "web-hr"}))
		} else {
			g.Expect(a.HelmRelease).To(BeNil())
		}
	}
	for _, tg := range getTargets(g, ns, name) {
		g.Expect(tg.Action.Phase).To(Equal(tugboatv1alpha1.ActionDelivered))
		g.Expect(tg.Action.Deliveries).To(BeEquivalentTo(1))
	}
	// Asked again (an agent that restarted), it gets them again.
	g.Expect(staging.poll(g)).To(HaveLen(2))
	g.Expect(getTargets(g, ns, name)[0].Action.Deliveries).To(BeEquivalentTo(2))

	// dev-a cannot report staging-a's action.
	g.Expect(dev.outcome(g, ids["apps"], wire.ActionSucceeded, "", 2)).To(Equal(http.StatusNotFound))
	g.Expect(actionPhases(ns, name)(g)).To(HaveKeyWithValue("apps", tugboatv1alpha1.ActionDelivered))

	for _, id := range ids {
		for range 2 { // a repeated report changes nothing
			g.Expect(staging.outcome(g, id, wire.ActionSucceeded, "upgraded to 1.0.0", 2)).To(Equal(http.StatusOK))
		}
	}
	g.Expect(staging.outcome(g, ids["apps"], wire.ActionFailed, "changed its mind", 0)).To(Equal(http.StatusConflict))
	g.Eventually(actionPhases(ns, name)).WithTimeout(10 * time.Second).Should(Equal(map[string]tugboatv1alpha1.ActionPhase{
		"apps": tugboatv1alpha1.ActionSucceeded, "flux": tugboatv1alpha1.ActionSucceeded,
	}))
	g.Consistently(phase(ns, name)).WithTimeout(time.Second).Should(Equal(tugboatv1alpha1.PromotionVerifying),
		"success needs the targets to report the version")

	staging.report(g, release("apps", "web", "1.0.0", 2), release("flux", "web", "1.0.0", 4))
	g.Eventually(phase(ns, name)).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.PromotionSucceeded))
	for _, tg := range getTargets(g, ns, name) {
		g.Expect(tg.Action.Phase).To(Equal(tugboatv1alpha1.ActionSucceeded))
		g.Expect(tg.Action.Revision).To(BeEquivalentTo(2))
		g.Expect(tg.Action.Message).To(Equal("upgraded to 1.0.0"))
	}

	// The other tenant's action was never handed out.
	g.Eventually(phase(other, "web-staging-6.6.6")).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.PromotionFailed))
	g.Expect(readyMessage(g, other, "web-staging-6.6.6")).To(ContainSubstring("staging-a/apps/web action not fetched by the agent (is it running?)"))
	g.Expect(actionPhases(other, "web-staging-6.6.6")(g)).To(Equal(map[string]tugboatv1alpha1.ActionPhase{"apps": tugboatv1alpha1.ActionPending}))
}

// TestActions_aRefusalFailsThePromotionNamingTheTargetAndTheReason holds an
// agent's poll while the Promotion waits for approval: the approval queues
// the action, which wakes the poll well before its timeout. The agent
// refuses, and the Promotion fails saying which target refused and why.
func TestActions_aRefusalFailsThePromotionNamingTheTargetAndTheReason(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "refuse")
	dev, staging := registerSpoke(t, ns, "dev-b"), registerSpoke(t, ns, "staging-b")
	dev.report(g, release("apps", "web", "1.0.0", 1))
	staging.report(g, release("apps", "web", "0.9.0", 1))
	p := helmPipeline(ns, "dev-b", &tugboatv1alpha1.HelmStrategy{Repository: "oci://registry.example.com/charts/web"},
		tugboatv1alpha1.Target{Spoke: "staging-b", Namespace: "apps"})
	p.Spec.Environments[1].Gates.RequireApproval = true
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.0.0")
	g.Eventually(phase(ns, name)).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.PromotionWaitingApproval))

	type answer struct {
		acts    []wire.Action
		err     error
		elapsed time.Duration
	}
	polled := make(chan answer, 1)
	start := time.Now()
	go func() {
		acts, err := staging.tryPoll()
		polled <- answer{acts, err, time.Since(start)}
	}()
	g.Consistently(polled).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "held: no action yet")

	pr := getPromotion(g, ns, name)
	patch := client.MergeFrom(pr.DeepCopy())
	pr.Status.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "test", Time: metav1.Now()}
	g.Expect(cluster.Client.Status().Patch(ctx, pr, patch)).To(Succeed())

	var ans answer
	g.Eventually(polled).WithTimeout(2 * pollTimeout).Should(Receive(&ans))
	g.Expect(ans.err).NotTo(HaveOccurred())
	g.Expect(ans.acts).To(HaveLen(1), "woken by the new action, not ended by the timeout")
	g.Expect(ans.elapsed).To(BeNumerically("<", pollTimeout-time.Second))
	a := ans.acts[0]
	g.Expect(a.Chart).To(Equal(wire.ChartSource{Repository: "oci://registry.example.com/charts", Name: "web"}))
	g.Expect(a.ValuesPolicy).To(Equal(wire.ValuesReuse))

	g.Expect(staging.outcome(g, a.ID, wire.ActionRefused, "namespace apps is not allowed on this spoke", 0)).To(Equal(http.StatusOK))
	g.Eventually(phase(ns, name)).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.PromotionFailed))
	g.Expect(readyMessage(g, ns, name)).To(Equal("staging-b/apps/web refused the action: namespace apps is not allowed on this spoke"))
	// Once reported, the outcome stands: repeating it is fine.
	g.Expect(staging.outcome(g, a.ID, wire.ActionRefused, "namespace apps is not allowed on this spoke", 0)).To(Equal(http.StatusOK))
}
