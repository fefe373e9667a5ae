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
		{"unverifiedVotes", func(s *tugboatv1alpha1.PromotionStatus) { s.UnverifiedVotes = 1 }, "only the tugboat hub writes"},
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

	// Nor on a rollout rolling back.
	rolling, err := request.Create(ctx, hubc, p, "production", "1.5.1", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(t, rolling, tugboatv1alpha1.PromotionRollingBack)
	cur = getPromotion(t, ns, rolling.Name)
	orig = cur.DeepCopy()
	cur.Status.Approvals = append(cur.Status.Approvals, tugboatv1alpha1.ApprovalVote{
		Decision: tugboatv1alpha1.DecisionApprove, User: "dave", Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: metav1.Now()})
	err = as(t, "dave").Status().Patch(ctx, cur, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("no longer waiting for approval")))
}

// peoplePipeline is Pipeline web of newPipeline whose production needs two
// approvals, with Slack users and CI credentials declared to be the
// Kubernetes users bob and carol (gates.approvers.people), and one Slack
// user (U0ERIN) declared to be nobody.
func peoplePipeline(t *testing.T, ns string) *tugboatv1alpha1.Pipeline {
	t.Helper()
	p := newPipeline(t, ns)
	p.Spec.Environments[2].Gates.Approvals = ptr.To[int32](2)
	p.Spec.Environments[2].Gates.Approvers = &tugboatv1alpha1.Approvers{
		SlackUsers:    []string{"U0BOB", "U0CAROL", "U0ERIN"},
		CICredentials: []string{"bob-ci", "carol-ci"},
		People: []tugboatv1alpha1.ApproverIdentity{
			{User: "bob", SlackUsers: []string{"U0BOB"}, CICredentials: []string{"bob-ci"}},
			{User: "carol", SlackUsers: []string{"U0CAROL"}, CICredentials: []string{"carol-ci"}},
		},
	}
	if err := hub.Client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 23, Medium 2: votes are counted per person, and the requester's
// approval counts through none of their identities.
func TestCount_countsPeopleNotIdentities(t *testing.T) {
	g := NewWithT(t)
	approve, reject := tugboatv1alpha1.DecisionApprove, tugboatv1alpha1.DecisionReject
	k, slack, ci := tugboatv1alpha1.ApprovalSourceKubernetes, tugboatv1alpha1.ApprovalSourceSlack, tugboatv1alpha1.ApprovalSourceCI
	p := &tugboatv1alpha1.Pipeline{Spec: tugboatv1alpha1.PipelineSpec{Environments: []tugboatv1alpha1.Environment{
		{Name: "production", Gates: tugboatv1alpha1.Gates{RequireApproval: true, Approvals: ptr.To[int32](2),
			Approvers: &tugboatv1alpha1.Approvers{
				SlackUsers: []string{"U0BOB", "U0CAROL", "U0ERIN"}, CICredentials: []string{"bob-ci", "carol-ci"},
				People: []tugboatv1alpha1.ApproverIdentity{
					{User: "bob", SlackUsers: []string{"U0BOB"}, CICredentials: []string{"bob-ci"}},
					{User: "carol", SlackUsers: []string{"U0CAROL"}, CICredentials: []string{"carol-ci"}},
				}}}},
	}}}
	pr := &tugboatv1alpha1.Promotion{Spec: tugboatv1alpha1.PromotionSpec{To: "production", RequestedBy: tugboatv1alpha1.RequestedByUser, Requester: "bob"}}
	pr.Status.Approvals = []tugboatv1alpha1.ApprovalVote{
		vote(approve, slack, "U0BOB", ""),   // the requester, through Slack
		vote(approve, ci, "bob-ci", ""),     // and through CI
		vote(approve, k, "carol", ""),       // carol
		vote(approve, slack, "U0CAROL", ""), // carol again, through Slack
		vote(approve, ci, "carol-ci", ""),   // and through CI
	}
	tally := request.Count(p, pr)
	g.Expect(tally.Approved()).To(BeFalse(), "one person other than the requester approved, three identities of it")
	g.Expect(tally.ApprovedBy()).To(Equal("carol"))
	g.Expect(tally.Ignored).To(Equal([]string{
		"bob (Slack U0BOB) requested it, so their approval does not count",
		"bob (CI bob-ci) requested it, so their approval does not count",
		"carol (Slack U0CAROL) already voted as carol, and one person counts once",
		"carol (CI carol-ci) already voted as carol, and one person counts once",
	}))
	g.Expect(tally.Missing()).To(Equal("1 more approval from someone other than carol"))

	// A Slack user declared to be nobody is a person of their own.
	pr.Status.Approvals = append(pr.Status.Approvals, vote(approve, slack, "U0ERIN", ""))
	tally = request.Count(p, pr)
	g.Expect(tally.Approved()).To(BeTrue())
	g.Expect(tally.ApprovedBy()).To(Equal("carol, U0ERIN"))

	// The requester may reject through any identity; a rejection by a
	// person who already approved does not count (the first vote stands).
	pr.Status.Approvals = append(pr.Status.Approvals, vote(reject, slack, "U0CAROL", "changed my mind"))
	g.Expect(request.Count(p, pr).Rejection).To(BeNil())
	pr.Status.Approvals = []tugboatv1alpha1.ApprovalVote{vote(reject, ci, "bob-ci", "withdrawn")}
	tally = request.Count(p, pr)
	g.Expect(tally.Rejection).NotTo(BeNil())
	g.Expect(tally.RejectedBy()).To(Equal("bob (CI bob-ci)"))
}

// The hub refuses the requester's approval through Slack and CI when
// those identities are declared to be them, and takes one person's vote
// once, on a real API server as the hub's ServiceAccount.
func TestDecide_refusesTheRequesterThroughEveryIdentity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := peoplePipeline(t, ns)
	grantApprovers(t, ns)
	if err := identity.Grant(ctx, hub.Client, ns, "bob"); err != nil {
		t.Fatal(err)
	}
	// bob asks for the promotion himself: the API server records him.
	pr, err := request.Create(ctx, as(t, "bob"), p, "production", "1.4.0", tugboatv1alpha1.RequestedByUser, "bob")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(t, pr, tugboatv1alpha1.PromotionWaitingApproval)
	approve, reject := tugboatv1alpha1.DecisionApprove, tugboatv1alpha1.DecisionReject
	slack, ci := tugboatv1alpha1.ApprovalSourceSlack, tugboatv1alpha1.ApprovalSourceCI

	for _, v := range []tugboatv1alpha1.ApprovalVote{vote(approve, slack, "U0BOB", ""), vote(approve, ci, "bob-ci", "")} {
		_, err = request.Decide(ctx, hubc, ns, pr.Name, v)
		g.Expect(err).To(MatchError(request.ErrNotAllowed), "%s %s", v.Source, v.User)
		g.Expect(err).To(MatchError(ContainSubstring("bob (" + string(v.Source) + " " + v.User + ") requested this promotion: another person must approve it")))
	}
	g.Expect(getPromotion(t, ns, pr.Name).Status.Approvals).To(BeEmpty())

	_, err = request.Decide(ctx, hubc, ns, pr.Name, vote(approve, slack, "U0CAROL", ""))
	g.Expect(err).NotTo(HaveOccurred())
	rv := getPromotion(t, ns, pr.Name).ResourceVersion
	_, err = request.Decide(ctx, hubc, ns, pr.Name, vote(approve, ci, "carol-ci", ""))
	g.Expect(err).NotTo(HaveOccurred(), "carol's approval again, through CI: the first stands")
	g.Expect(getPromotion(t, ns, pr.Name).ResourceVersion).To(Equal(rv), "nothing written")
	_, err = request.Decide(ctx, hubc, ns, pr.Name, vote(reject, ci, "carol-ci", ""))
	g.Expect(err).To(MatchError(request.ErrNotWaiting))
	g.Expect(err).To(MatchError(ContainSubstring("was already approved by carol (Slack U0CAROL): a decision cannot be changed")))

	_, err = request.Decide(ctx, hubc, ns, pr.Name, vote(reject, ci, "bob-ci", "withdrawn"))
	g.Expect(err).NotTo(HaveOccurred(), "the requester may withdraw it, through any identity")
	g.Expect(getPromotion(t, ns, pr.Name).Status.Approvals).To(HaveLen(2))
}

// gates.approvers.people is validated by the API server, for the person
// who writes the Pipeline (here pat, who may create Pipelines), with
// messages that say what to fix.
func TestPipeline_approverPeopleAreValidated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(identity.Grant(ctx, hub.Client, ns, "pat")).To(Succeed())
	pat := as(t, "pat")
	base := func(name string, a *tugboatv1alpha1.Approvers) *tugboatv1alpha1.Pipeline {
		return &tugboatv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: tugboatv1alpha1.PipelineSpec{
				Release: "web", Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
				Environments: []tugboatv1alpha1.Environment{
					{Name: "production", Targets: []tugboatv1alpha1.Target{{Spoke: "prod-1", Namespace: "apps"}},
						Gates: tugboatv1alpha1.Gates{RequireApproval: true, Approvers: a}},
				},
			},
		}
	}
	for _, tc := range []struct {
		name string
		a    *tugboatv1alpha1.Approvers
		says string
	}{
		{"a mapped Slack user who may not approve", &tugboatv1alpha1.Approvers{
			People: []tugboatv1alpha1.ApproverIdentity{{User: "alice", SlackUsers: []string{"U0ALICE"}}}},
			"people[].slackUsers must also be listed in slackUsers"},
		{"a mapped CI credential that may not approve", &tugboatv1alpha1.Approvers{CICredentials: []string{"other"},
			People: []tugboatv1alpha1.ApproverIdentity{{User: "alice", CICredentials: []string{"alice-ci"}}}},
			"people[].ciCredentials must also be listed in ciCredentials"},
		{"one Slack user, two people", &tugboatv1alpha1.Approvers{SlackUsers: []string{"U0ALICE"},
			People: []tugboatv1alpha1.ApproverIdentity{{User: "alice", SlackUsers: []string{"U0ALICE"}}, {User: "bob", SlackUsers: []string{"U0ALICE"}}}},
			"a Slack user belongs to one person"},
		{"one CI credential, two people", &tugboatv1alpha1.Approvers{CICredentials: []string{"ci"},
			People: []tugboatv1alpha1.ApproverIdentity{{User: "alice", CICredentials: []string{"ci"}}, {User: "bob", CICredentials: []string{"ci"}}}},
			"a CI credential belongs to one person"},
		{"a person with no identity", &tugboatv1alpha1.Approvers{SlackUsers: []string{"U0ALICE"},
			People: []tugboatv1alpha1.ApproverIdentity{{User: "alice"}}},
			"a person needs at least one entry in slackUsers or ciCredentials"},
		{"a person listed twice", &tugboatv1alpha1.Approvers{SlackUsers: []string{"U0ALICE", "U0BOB"},
			People: []tugboatv1alpha1.ApproverIdentity{{User: "alice", SlackUsers: []string{"U0ALICE"}}, {User: "alice", SlackUsers: []string{"U0BOB"}}}},
			"Duplicate value"},
		{"no user", &tugboatv1alpha1.Approvers{SlackUsers: []string{"U0ALICE"},
			People: []tugboatv1alpha1.ApproverIdentity{{SlackUsers: []string{"U0ALICE"}}}},
			"people[0].user"},
	} {
		err := pat.Create(ctx, base("bad", tc.a))
		g.Expect(err).To(MatchError(ContainSubstring(tc.says)), tc.name)
	}
	good := base("good", &tugboatv1alpha1.Approvers{SlackUsers: []string{"U0ALICE", "U0ERIN"}, CICredentials: []string{"alice-ci"},
		People: []tugboatv1alpha1.ApproverIdentity{{User: "alice@example.com", SlackUsers: []string{"U0ALICE"}, CICredentials: []string{"alice-ci"}}}})
	g.Expect(pat.Create(ctx, good)).To(Succeed())
	got := &tugboatv1alpha1.Pipeline{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(good), got)).To(Succeed())
	g.Expect(got.Spec.Environments[0].Gates.Approvers.People).To(Equal(good.Spec.Environments[0].Gates.Approvers.People))
}

// Issue 23, Low 7: a Kubernetes voter cannot choose the name shown for
// them; the API server refuses a displayName other than their user name,
// and the hub never shows a Kubernetes vote's displayName.
func TestPolicy_refusesADisplayNameThatIsNotTheUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	grantApprovers(t, ns)
	pr, err := request.Create(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(t, pr, tugboatv1alpha1.PromotionWaitingApproval)

	v := kubeVote(tugboatv1alpha1.DecisionApprove, "alice")
	v.DisplayName = "Bob (release manager)"
	_, err = request.Decide(ctx, as(t, "alice"), ns, pr.Name, v)
	g.Expect(err).To(MatchError(request.ErrNotAllowed))
	g.Expect(err).To(MatchError(ContainSubstring("a new decision may not set displayName to anything but your user name (alice)")))
	g.Expect(getPromotion(t, ns, pr.Name).Status.Approvals).To(BeEmpty())

	v.DisplayName = "alice"
	_, err = request.Decide(ctx, as(t, "alice"), ns, pr.Name, v)
	g.Expect(err).NotTo(HaveOccurred(), "their own name is no lie")

	// A displayName that reached the status anyway (before the rule, or
	// written by the hub) is not shown for a Kubernetes vote.
	counted := &tugboatv1alpha1.Promotion{Spec: pr.Spec}
	forged := kubeVote(tugboatv1alpha1.DecisionApprove, "dave")
	forged.DisplayName = "Bob (release manager)"
	counted.Status.Approvals = []tugboatv1alpha1.ApprovalVote{forged}
	g.Expect(request.Count(p, counted).ApprovedBy()).To(Equal("dave"))
}
