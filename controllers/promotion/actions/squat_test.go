package actions_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// TestActions_aSquatterDoesNotBlockTheRealSpokesActions is issue 23 Medium
// 8 on the real hub: a Spoke of the same name in another namespace (with
// its own generated key, reporting) does not block the real spoke's
// actions channel. Its poll is answered 200 with its action, signed for the
// request with its own key, and its outcome is recorded. Before, the hub
// looked the answer's signing keys up again by name, found two Spokes and
// answered every poll 503.
func TestActions_aSquatterDoesNotBlockTheRealSpokesActions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "squat-real")
	dev, staging := registerSpoke(t, ns, "dev-q"), registerSpoke(t, ns, "staging-q")
	dev.report(g, release("apps", "web", "1.0.0", 1))
	staging.report(g, release("apps", "web", "0.9.0", 1))
	squatter := registerSpoke(t, newNamespace(t, "squat-squatter"), "staging-q")
	squatter.report(g, release("apps", "web", "6.6.6", 1)) // served too, by its own key

	p := helmPipeline(ns, "dev-q", &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"},
		tugboatv1alpha1.Target{Spoke: "staging-q", Namespace: "apps"})
	g.Expect(cluster.Client.Create(ctx, p)).To(Succeed())
	name := pipeline.PromotionName("web", "staging", "1.0.0")
	g.Eventually(actionPhases(ns, name)).WithTimeout(30 * time.Second).Should(Equal(map[string]tugboatv1alpha1.ActionPhase{"apps": tugboatv1alpha1.ActionPending}))

	// A signed poll, as the agent sends it (with a nonce): answered at
	// once with the action, signed for this request with the real key.
	req, err := http.NewRequest(http.MethodGet, hubURL+wire.ActionsPath(staging.name), nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set(wire.HeaderNonce, wire.NewNonce())
	wire.SignRequest(req, staging.key, nil, time.Now())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	g.Expect(wire.VerifyResponse(staging.key, req, resp.StatusCode, resp.Header.Get(wire.HeaderResponseSignature), body)).To(Succeed())
	var list wire.ActionList
	g.Expect(json.Unmarshal(body, &list)).To(Succeed())
	g.Expect(list.Actions).To(HaveLen(1))
	g.Expect(list.Actions[0].Promotion).To(Equal(ns + "/" + name))

	g.Expect(staging.outcome(g, list.Actions[0].ID, wire.ActionSucceeded, "upgraded to 1.0.0", 2)).To(Equal(http.StatusOK))
	g.Eventually(actionPhases(ns, name)).WithTimeout(10 * time.Second).Should(Equal(map[string]tugboatv1alpha1.ActionPhase{"apps": tugboatv1alpha1.ActionSucceeded}))

	// Each Spoke's heartbeat went to it, with the id of its own key.
	for _, a := range []struct {
		ns    string
		agent *fakeAgent
	}{{ns, staging}, {"squat-squatter", squatter}} {
		g.Eventually(func() string {
			sp := &tugboatv1alpha1.Spoke{}
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: "staging-q"}, sp)).To(Succeed())
			return sp.Status.SigningKeyID
		}).WithTimeout(10 * time.Second).Should(Equal(wire.KeyID(a.agent.key)))
	}
}
