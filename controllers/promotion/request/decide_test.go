package request_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/identity"
)

// gatedPipeline creates Pipeline "web" in ns whose production needs two
// approvals, from Slack user U0ALICE and CI credential release-bot among
// others.
func gatedPipeline(t *testing.T, ns string) *tugboatv1alpha1.Pipeline {
	t.Helper()
	p := newPipeline(t, ns)
	p.Spec.Environments[2].Gates.Approvals = ptr.To[int32](2)
	p.Spec.Environments[2].Gates.Approvers = &tugboatv1alpha1.Approvers{SlackUsers: []string{"U0ALICE"}, CICredentials: []string{"release-bot"}}
	if err := hub.Client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func vote(d tugboatv1alpha1.Decision, source tugboatv1alpha1.ApprovalSource, user, message string) tugboatv1alpha1.ApprovalVote {
	return tugboatv1alpha1.ApprovalVote{Decision: d, Source: source, User: user, Message: message}
}

func getPromotion(t *testing.T, ns, name string) *tugboatv1alpha1.Promotion {
	t.Helper()
	pr := &tugboatv1alpha1.Promotion{}
	if err := hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pr); err != nil {
		t.Fatal(err)
	}
	return pr
}

func TestDecide_recordsVotesOnlyWhileWaiting(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := gatedPipeline(t, ns)
	create := func(env, version string) *tugboatv1alpha1.Promotion {
		pr, err := request.Create(ctx, hubc, p, env, version, tugboatv1alpha1.RequestedByCI, "ci-job-1")
		g.Expect(err).NotTo(HaveOccurred())
		return pr
	}
	approve, reject := tugboatv1alpha1.DecisionApprove, tugboatv1alpha1.DecisionReject
	ci, slack := tugboatv1alpha1.ApprovalSourceCI, tugboatv1alpha1.ApprovalSourceSlack

	waiting := create("production", "1.4.0")
	setPhase(t, waiting, tugboatv1alpha1.PromotionWaitingApproval)
	before := time.Now().Add(-time.Second)
	got, err := request.Decide(ctx, hubc, ns, waiting.Name, vote(approve, ci, "release-bot", "gate passed"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Status.Approvals).To(HaveLen(1))
	votes := getPromotion(t, ns, waiting.Name).Status.Approvals
	g.Expect(votes).To(HaveLen(1))
	g.Expect(votes[0].User).To(Equal("release-bot"))
	g.Expect(votes[0].Source).To(Equal(ci))
	g.Expect(votes[0].Decision).To(Equal(approve))
	g.Expect(votes[0].Message).To(Equal("gate passed"))
	g.Expect(votes[0].Time.Time).To(BeTemporally(">=", before))
	g.Expect(getPromotion(t, ns, waiting.Name).Status.Approval).To(BeNil(), "the outcome is the controller's to write")

	rv := getPromotion(t, ns, waiting.Name).ResourceVersion
	_, err = request.Decide(ctx, hubc, ns, waiting.Name, vote(approve, ci, "release-bot", "again"))
	g.Expect(err).NotTo(HaveOccurred(), "the same vote twice is harmless")
	g.Expect(getPromotion(t, ns, waiting.Name).ResourceVersion).To(Equal(rv), "and changes nothing")

	_, err = request.Decide(ctx, hubc, ns, waiting.Name, vote(reject, ci, "release-bot", ""))
	g.Expect(err).To(MatchError(request.ErrNotWaiting))
	g.Expect(err).To(MatchError("promotion " + waiting.Name + " was already approved by release-bot: a decision cannot be changed"))

	_, err = request.Decide(ctx, hubc, ns, waiting.Name, vote(approve, ci, "deploy-bot", ""))
	g.Expect(err).To(MatchError(request.ErrNotAllowed))
	g.Expect(err).To(MatchError(ContainSubstring("CI identity deploy-bot is not an approver of production")))
	_, err = request.Decide(ctx, hubc, ns, waiting.Name, vote(approve, slack, "U0MALLORY", ""))
	g.Expect(err).To(MatchError(request.ErrNotAllowed))

	slackVote := vote(approve, slack, "U0ALICE", "")
	slackVote.DisplayName = "alice"
	_, err = request.Decide(ctx, hubc, ns, waiting.Name, slackVote)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getPromotion(t, ns, waiting.Name).Status.Approvals).To(HaveLen(2))
	g.Expect(getPromotion(t, ns, waiting.Name).Status.Approvals[1].DisplayName).To(Equal("alice"))

	pendingGated := create("production", "1.5.0") // not reconciled yet: phase ""
	_, err = request.Decide(ctx, hubc, ns, pendingGated.Name, vote(reject, ci, "release-bot", "not today"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getPromotion(t, ns, pendingGated.Name).Status.Approvals[0].Decision).To(Equal(reject))

	running := create("production", "1.6.0")
	setPhase(t, running, tugboatv1alpha1.PromotionRunning)
	_, err = request.Decide(ctx, hubc, ns, running.Name, vote(approve, ci, "release-bot", ""))
	g.Expect(err).To(MatchError(request.ErrNotWaiting))
	g.Expect(err).To(MatchError("promotion " + running.Name + " is Running, not waiting for approval"))
	g.Expect(getPromotion(t, ns, running.Name).Status.Approvals).To(BeEmpty())

	decided := create("production", "1.7.0")
	orig := decided.DeepCopy()
	decided.Status.Phase = tugboatv1alpha1.PromotionWaitingApproval
	decided.Status.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "bob, carol", Time: metav1.Now()}
	g.Expect(hubc.Status().Patch(ctx, decided, client.MergeFrom(orig))).To(Succeed())
	_, err = request.Decide(ctx, hubc, ns, decided.Name, vote(approve, ci, "release-bot", ""))
	g.Expect(err).To(MatchError("promotion " + decided.Name + " was already approved by bob, carol"))

	ungated := create("staging", "1.4.0")
	_, err = request.Decide(ctx, hubc, ns, ungated.Name, vote(approve, ci, "release-bot", ""))
	g.Expect(err).To(MatchError(request.ErrNotAllowed), "release-bot approves production only")
	_, err = request.Decide(ctx, hubc, ns, ungated.Name, kubeVote(approve, "alice"))
	g.Expect(err).To(MatchError("promotion " + ungated.Name + " is Pending, not waiting for approval"))
	g.Expect(getPromotion(t, ns, ungated.Name).Status.Approvals).To(BeEmpty())

	_, err = request.Decide(ctx, hubc, ns, "web-production-9.9.9", vote(approve, ci, "release-bot", ""))
	g.Expect(err).To(MatchError(request.ErrNotFound))
	g.Expect(err).To(MatchError("promotion " + ns + "/web-production-9.9.9 not found"))

	fresh := create("production", "1.8.0")
	for _, tc := range []struct {
		vote  tugboatv1alpha1.ApprovalVote
		field string
	}{
		{vote("Maybe", ci, "release-bot", ""), "decision"},
		{vote(approve, "GitHub", "release-bot", ""), "source"},
		{vote(approve, ci, "", ""), "user"},
		{vote(approve, ci, strings.Repeat("b", 257), ""), "user"},
		{vote(approve, ci, "release-bot", strings.Repeat("m", 1025)), "message"},
	} {
		_, err = request.Decide(ctx, hubc, ns, fresh.Name, tc.vote)
		var inv *request.InvalidError
		g.Expect(errors.As(err, &inv)).To(BeTrue(), "%v", err)
		g.Expect(inv.Field).To(Equal(tc.field))
	}
	g.Expect(getPromotion(t, ns, fresh.Name).Status.Approvals).To(BeEmpty())
}

func TestMayApprove_listsSlackUsersAndCICredentialsPerEnvironment(t *testing.T) {
	p := &tugboatv1alpha1.Pipeline{Spec: tugboatv1alpha1.PipelineSpec{Environments: []tugboatv1alpha1.Environment{
		{Name: "staging"},
		{Name: "production", Gates: tugboatv1alpha1.Gates{RequireApproval: true, Approvers: &tugboatv1alpha1.Approvers{
			SlackUsers: []string{"U0ALICE"}, CICredentials: []string{"release-bot"}}}},
		{Name: "dr", Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
	}}}
	slack, ci, kube := tugboatv1alpha1.ApprovalSourceSlack, tugboatv1alpha1.ApprovalSourceCI, tugboatv1alpha1.ApprovalSourceKubernetes
	for _, tc := range []struct {
		env    string
		source tugboatv1alpha1.ApprovalSource
		user   string
		want   bool
	}{
		{"production", slack, "U0ALICE", true},
		{"production", ci, "release-bot", true},
		{"production", slack, "release-bot", false},
		{"production", ci, "U0ALICE", false},
		{"production", slack, "U0BOB", false},
		{"production", ci, "", false},
		{"production", kube, "U0ALICE", false},
		{"staging", slack, "U0ALICE", false},
		{"dr", ci, "release-bot", false},
		{"qa", ci, "release-bot", false},
	} {
		if got := request.MayApprove(p, tc.env, tc.source, tc.user); got != tc.want {
			t.Errorf("MayApprove(%s, %s, %q) = %v, want %v", tc.env, tc.source, tc.user, got, tc.want)
		}
	}
	if request.MayApprove(nil, "production", ci, "release-bot") {
		t.Error("MayApprove(nil pipeline) = true")
	}
}

func TestCount_countsDistinctApproversAndNotTheRequester(t *testing.T) {
	g := NewWithT(t)
	p := &tugboatv1alpha1.Pipeline{Spec: tugboatv1alpha1.PipelineSpec{Environments: []tugboatv1alpha1.Environment{
		{Name: "production", Gates: tugboatv1alpha1.Gates{RequireApproval: true, Approvals: ptr.To[int32](2),
			Approvers: &tugboatv1alpha1.Approvers{SlackUsers: []string{"U0ALICE"}}}},
	}}}
	pr := &tugboatv1alpha1.Promotion{Spec: tugboatv1alpha1.PromotionSpec{To: "production", RequestedBy: tugboatv1alpha1.RequestedByUser, Requester: "bob"}}
	k := tugboatv1alpha1.ApprovalSourceKubernetes
	approve := tugboatv1alpha1.DecisionApprove
	pr.Status.Approvals = []tugboatv1alpha1.ApprovalVote{
		vote(approve, k, "bob", ""), vote(approve, k, "carol", ""), vote(approve, k, "carol", ""),
		vote(approve, tugboatv1alpha1.ApprovalSourceSlack, "U0MALLORY", ""),
	}
	tally := request.Count(p, pr)
	g.Expect(tally.Required).To(Equal(2))
	g.Expect(tally.Approved()).To(BeFalse())
	g.Expect(tally.ApprovedBy()).To(Equal("carol"))
	g.Expect(tally.Summary()).To(Equal("1 of 2 approvals (carol); not counted: bob requested it, so their approval does not count; U0MALLORY (Slack) is not an approver of production"))
	g.Expect(tally.Missing()).To(Equal("1 more approval from someone other than carol"))

	alice := vote(approve, tugboatv1alpha1.ApprovalSourceSlack, "U0ALICE", "")
	alice.DisplayName = "alice"
	pr.Status.Approvals = append(pr.Status.Approvals, alice)
	tally = request.Count(p, pr)
	g.Expect(tally.Approved()).To(BeTrue())
	g.Expect(tally.ApprovedBy()).To(Equal("carol, alice (U0ALICE)"))
	g.Expect(tally.Missing()).To(BeEmpty())

	pr.Status.Approvals = append(pr.Status.Approvals, vote(tugboatv1alpha1.DecisionReject, k, "dave", "no"))
	tally = request.Count(p, pr)
	g.Expect(tally.Approved()).To(BeFalse(), "a rejection decides")
	g.Expect(tally.Rejection.User).To(Equal("dave"))
}

// The identity tests below act as people on the real API server with the
// policy tugboat-approvals installed: alice may approve production of web,
// dave every environment of web (web/*), carol may write promotions/status
// but not approve.
func grantApprovers(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	for user, envs := range map[string][]string{"alice": {"web/production"}, "dave": {"web/*"}, "carol": nil, "erin": {"web/staging"}} {
		if err := identity.Grant(ctx, hub.Client, ns, user, envs...); err != nil {
			t.Fatal(err)
		}
	}
}

func kubeVote(d tugboatv1alpha1.Decision, user string) tugboatv1alpha1.ApprovalVote {
	return vote(d, tugboatv1alpha1.ApprovalSourceKubernetes, user, "")
}

func TestPolicy_recordsTheAuthenticatedUserWithTheApprovePermission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	grantApprovers(t, ns)
	pr, err := request.Create(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(t, pr, tugboatv1alpha1.PromotionWaitingApproval)
	approve := tugboatv1alpha1.DecisionApprove

	_, err = request.Decide(ctx, as(t, "alice"), ns, pr.Name, kubeVote(approve, "alice"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = request.Decide(ctx, as(t, "dave"), ns, pr.Name, kubeVote(approve, "dave"))
	g.Expect(err).NotTo(HaveOccurred(), "web/* allows every environment of web")
	votes := getPromotion(t, ns, pr.Name).Status.Approvals
	g.Expect(votes).To(HaveLen(2))
	g.Expect([]string{votes[0].User, votes[1].User}).To(Equal([]string{"alice", "dave"}))

	// Forging: mallory-as-alice writes "bob".
	_, err = request.Decide(ctx, as(t, "alice"), ns, pr.Name, kubeVote(approve, "bob"))
	g.Expect(err).To(MatchError(request.ErrNotAllowed))
	g.Expect(err).To(MatchError(ContainSubstring("a new decision must name you (user alice, source Kubernetes)")))
	// Claiming another source is forging too.
	forged := kubeVote(approve, "alice")
	forged.Source, forged.Time = tugboatv1alpha1.ApprovalSourceSlack, metav1.Now()
	cur := getPromotion(t, ns, pr.Name)
	orig := cur.DeepCopy()
	cur.Status.Approvals = append(cur.Status.Approvals, forged)
	err = as(t, "alice").Status().Patch(ctx, cur, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("a new decision must name you")))
	g.Expect(getPromotion(t, ns, pr.Name).Status.Approvals).To(HaveLen(2), "nothing recorded")
}

func TestPolicy_refusesAUserWithoutTheApprovePermission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	grantApprovers(t, ns)
	pr, err := request.Create(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(t, pr, tugboatv1alpha1.PromotionWaitingApproval)

	for _, user := range []string{"carol", "erin"} { // no approve; approve on staging only
		for _, d := range []tugboatv1alpha1.Decision{tugboatv1alpha1.DecisionApprove, tugboatv1alpha1.DecisionReject} {
			_, err = request.Decide(ctx, as(t, user), ns, pr.Name, kubeVote(d, user))
			g.Expect(err).To(MatchError(request.ErrNotAllowed), "%s %s", user, d)
			g.Expect(err).To(MatchError(ContainSubstring("user " + user + " may not approve promotions into web/production: RBAC must allow the verb approve")))
		}
	}
	// Someone with no RBAC on promotions/status at all.
	_, err = request.Decide(ctx, as(t, "frank"), ns, pr.Name, kubeVote(tugboatv1alpha1.DecisionApprove, "frank"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(getPromotion(t, ns, pr.Name).Status.Approvals).To(BeEmpty())
}

func TestPolicy_theRequesterCannotApproveTheirOwnPromotion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	grantApprovers(t, ns)
	alice := as(t, "alice")

	// A person creates a Promotion only as themselves.
	for _, tc := range []struct {
		by        tugboatv1alpha1.Requester
		requester string
	}{{tugboatv1alpha1.RequestedByUser, "bob"}, {tugboatv1alpha1.RequestedByCI, "alice"}, {tugboatv1alpha1.RequestedByUser, ""}} {
		_, err := request.Create(ctx, alice, p, "production", "1.4.0", tc.by, tc.requester)
		g.Expect(err).To(MatchError(ContainSubstring("must record you as its requester: spec.requestedBy user and spec.requester alice")), "%+v", tc)
	}
	pr, err := request.Create(ctx, alice, p, "production", "1.4.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Spec.Requester).To(Equal("alice"))
	setPhase(t, pr, tugboatv1alpha1.PromotionWaitingApproval)

	_, err = request.Decide(ctx, alice, ns, pr.Name, kubeVote(tugboatv1alpha1.DecisionApprove, "alice"))
	g.Expect(err).To(MatchError(request.ErrNotAllowed))
	g.Expect(err).To(MatchError(ContainSubstring("alice requested this promotion: another person must approve it")))
	// Around Decide, straight to the API server: refused there too.
	cur := getPromotion(t, ns, pr.Name)
	orig := cur.DeepCopy()
	cur.Status.Approvals = append(cur.Status.Approvals, kubeVote(tugboatv1alpha1.DecisionApprove, "alice"))
	cur.Status.Approvals[0].Time = metav1.Now()
	err = alice.Status().Patch(ctx, cur, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("user alice requested this promotion: another person must approve it")))
	g.Expect(getPromotion(t, ns, pr.Name).Status.Approvals).To(BeEmpty())

	_, err = request.Decide(ctx, as(t, "dave"), ns, pr.Name, kubeVote(tugboatv1alpha1.DecisionApprove, "dave"))
	g.Expect(err).NotTo(HaveOccurred(), "someone else may")
	_, err = request.Decide(ctx, alice, ns, pr.Name, kubeVote(tugboatv1alpha1.DecisionReject, "alice"))
	g.Expect(err).NotTo(HaveOccurred(), "the requester may withdraw it")
}

func TestPolicy_onlyTheHubWritesTheOutcomeAndOtherStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	grantApprovers(t, ns)
	pr, err := request.Create(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(t, pr, tugboatv1alpha1.PromotionWaitingApproval)
	_, err = request.Decide(ctx, as(t, "dave"), ns, pr.Name, kubeVote(tugboatv1alpha1.DecisionApprove, "dave"))
	g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name   string
		change func(*tugboatv1alpha1.PromotionStatus)
		error  string
	}{
		{"the outcome", func(s *tugboatv1alpha1.PromotionStatus) {
			s.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "alice", Time: metav1.Now()}
		}, "only the tugboat hub writes"},
		{"the phase", func(s *tugboatv1alpha1.PromotionStatus) { s.Phase = tugboatv1alpha1.PromotionRunning }, "only the tugboat hub writes"},
		{"startedAt", func(s *tugboatv1alpha1.PromotionStatus) { now := metav1.Now(); s.StartedAt = &now }, "only the tugboat hub writes"},
		{"the strategy result", func(s *tugboatv1alpha1.PromotionStatus) {
			s.StrategyResult = &tugboatv1alpha1.StrategyResult{URL: "https://example.com/pr/1"}
		}, "only the tugboat hub writes"},
		{"the targets", func(s *tugboatv1alpha1.PromotionStatus) {
			s.Targets = []tugboatv1alpha1.PromotionTargetStatus{{Spoke: "prod-1", Namespace: "apps", Release: "web", Done: true}}
		}, "only the tugboat hub writes"},
		{"the rollout", func(s *tugboatv1alpha1.PromotionStatus) {
			s.Rollout = &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutProgressing, CurrentWave: 3}
		}, "only the tugboat hub writes"},
		{"another's vote, removed", func(s *tugboatv1alpha1.PromotionStatus) { s.Approvals = nil }, "a recorded decision cannot be changed or removed"},
		{"another's vote, changed", func(s *tugboatv1alpha1.PromotionStatus) {
			s.Approvals[0].Decision = tugboatv1alpha1.DecisionReject
		}, "a recorded decision cannot be changed or removed"},
		{"another's vote, copied", func(s *tugboatv1alpha1.PromotionStatus) {
			s.Approvals = append(s.Approvals, s.Approvals[0])
		}, "a new decision must name you"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cur := getPromotion(t, ns, pr.Name)
			orig := cur.DeepCopy()
			tc.change(&cur.Status)
			err := as(t, "alice").Status().Patch(ctx, cur, client.MergeFrom(orig))
			g.Expect(err).To(MatchError(ContainSubstring(tc.error)))
			g.Expect(getPromotion(t, ns, pr.Name).ResourceVersion).To(Equal(orig.ResourceVersion), "nothing changed")
		})
	}

	// The hub decides; no vote is taken after that, even around Decide.
	cur := getPromotion(t, ns, pr.Name)
	orig := cur.DeepCopy()
	cur.Status.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "dave", Time: metav1.Now()}
	g.Expect(hubc.Status().Patch(ctx, cur, client.MergeFrom(orig))).To(Succeed())
	cur = getPromotion(t, ns, pr.Name)
	orig = cur.DeepCopy()
	cur.Status.Approvals = append(cur.Status.Approvals, tugboatv1alpha1.ApprovalVote{
		Decision: tugboatv1alpha1.DecisionReject, User: "alice", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: metav1.Now()})
	err = as(t, "alice").Status().Patch(ctx, cur, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("no longer waiting for approval")))

	// Nor on a paused rollout, written around Decide.
	paused, err := request.Create(ctx, hubc, p, "production", "1.5.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(t, paused, tugboatv1alpha1.PromotionPaused)
	cur = getPromotion(t, ns, paused.Name)
	orig = cur.DeepCopy()
	cur.Status.Approvals = append(cur.Status.Approvals, tugboatv1alpha1.ApprovalVote{
		Decision: tugboatv1alpha1.DecisionApprove, User: "dave", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: metav1.Now()})
	err = as(t, "dave").Status().Patch(ctx, cur, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("no longer waiting for approval")))
}
