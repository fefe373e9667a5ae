package pipelineapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/webhook/pipelineapi"
)

// TestPipelineAPI_aCredentialVotesAsThePersonItIsDeclaredToBe: with
// deploy-bot declared to be the Kubernetes user alice
// (gates.approvers.people), its approval of alice's own promotion is 403,
// and its rejection of a promotion alice already rejected is answered
// "rejected" (her first vote stands; nothing is written).
func TestPipelineAPI_aCredentialVotesAsThePersonItIsDeclaredToBe(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "api-people")
	p := &tugboatv1alpha1.Pipeline{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "web"}, p)).To(Succeed())
	p.Spec.Environments[2].Gates.Approvers = &tugboatv1alpha1.Approvers{CICredentials: []string{"release-bot", "deploy-bot"},
		People: []tugboatv1alpha1.ApproverIdentity{{User: "alice", CICredentials: []string{"deploy-bot"}}}}
	g.Expect(cluster.Client.Update(ctx, p)).To(Succeed())
	decide := func(name string, approve bool) (int, string) {
		b, _ := json.Marshal(map[string]any{"promotion": name, "approve": approve})
		rec := f.do(call{path: f.path("web", "approvals"), body: b, auth: bearer(deployBotToken)})
		return rec.Code, rec.Body.String()
	}

	own, err := request.Create(ctx, cluster.Client, p, "production", "1.4.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	f.setPhase(own.Name, tugboatv1alpha1.PromotionWaitingApproval)
	code, body := decide(own.Name, true)
	g.Expect(code).To(Equal(http.StatusForbidden), body)
	g.Expect(body).To(ContainSubstring("alice (CI deploy-bot) requested this promotion: another person must approve it"))
	g.Expect(f.promotion(own.Name).Status.Approvals).To(BeEmpty())

	theirs, err := request.Create(ctx, cluster.Client, p, "production", "1.5.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	pr := f.promotion(theirs.Name)
	orig := pr.DeepCopy()
	pr.Status.Phase = tugboatv1alpha1.PromotionWaitingApproval
	pr.Status.Approvals = []tugboatv1alpha1.ApprovalVote{{Decision: tugboatv1alpha1.DecisionReject, User: "alice",
		Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: metav1.Now()}}
	g.Expect(cluster.Client.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(Succeed())
	code, body = decide(theirs.Name, false)
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(decode[pipelineapi.ApprovalResponse](g, []byte(body)).Decision).To(Equal("rejected"))
	g.Expect(f.promotion(theirs.Name).Status.Approvals).To(HaveLen(1), "alice's first vote stands")
	code, body = decide(theirs.Name, true)
	g.Expect(code).To(Equal(http.StatusConflict), body)
	g.Expect(body).To(ContainSubstring("was already rejected by alice: a decision cannot be changed"))
}
