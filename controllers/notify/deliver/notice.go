package deliver

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// promotionNotice builds the notice of event e about pr for notifier spec.
func (r *deliverer) promotionNotice(ctx context.Context, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment,
	pr *tugboatv1alpha1.Promotion, spec *tugboatv1alpha1.Notifier, e tugboatv1alpha1.NotifyEvent) notify.Notice {
	s := &pr.Status
	info := &notify.Promotion{
		Name: pr.Name, From: pr.Spec.From, To: pr.Spec.To, Version: pr.Spec.Version, Phase: s.Phase,
		Strategy: pr.StrategyType(), RequestedBy: pr.Spec.RequestedBy, Requester: pr.Spec.Requester,
		Votes: shownVotes(s.Approvals), Created: pr.CreationTimestamp.Time,
	}
	if c := apimeta.FindStatusCondition(s.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
		info.Message = c.Message
	}
	if s.StrategyResult != nil {
		info.URL = s.StrategyResult.URL
	}
	if s.Preview != nil {
		info.Preview = s.Preview.Line() + " (tugboat diff " + pr.Name + ")"
		if e == tugboatv1alpha1.EventPromotionPreviewChanged && s.Preview.ApprovedDigest != "" {
			info.Preview = s.Preview.Line() + ", not the change approved (digest " + clip.String(s.Preview.ApprovedDigest, 15) + ") (tugboat diff " + pr.Name + ")"
		}
		if e == tugboatv1alpha1.EventPromotionPreviewChanged && s.Preview.ApprovalsReset > 0 {
			info.Preview += "; approval asked again (reapproveOnChange): the earlier votes no longer count"
		}
	}
	info.DashboardURL = r.opts.promotionPage(pr)
	if s.Approval != nil {
		info.ApprovedBy, info.RejectedBy = s.Approval.ApprovedBy, s.Approval.RejectedBy
	}
	if env != nil && env.Gates.RequireApproval {
		info.ApprovalsRequired = 1
		if env.Gates.Approvals != nil {
			info.ApprovalsRequired = int(*env.Gates.Approvals)
		}
	}
	if s.StartedAt != nil {
		t := s.StartedAt.Time
		info.Started = &t
	}
	if s.CompletedAt != nil {
		t := s.CompletedAt.Time
		info.Done = &t
	}
	n := notify.Notice{
		Event: e, Time: eventTime(pr, e), Namespace: p.Namespace, Pipeline: p.Name, Release: p.Spec.Release,
		Promotion: info, Summary: modeOf(spec) == tugboatv1alpha1.NotifySummary,
	}
	// The destination's targets, spokeSelectors expanded: for a Promotion
	// that has not started, and for the HelmRelease of a selected spoke.
	var resolved []pipeline.ResolvedTarget
	if env != nil {
		if res, err := pipeline.ResolveTargets(ctx, r.client, p, env); err == nil {
			resolved = res.Targets
		}
	}
	helmRelease := func(spoke, namespace, release string) *tugboatv1alpha1.ObjectReference {
		for i := range resolved {
			t := &resolved[i]
			if t.Spoke == spoke && t.Namespace == namespace && pipeline.ReleaseOf(p, &t.Target) == release && t.HelmRelease != nil {
				hr := *t.HelmRelease
				if hr.Namespace == "" {
					hr.Namespace = t.Namespace
				}
				return &hr
			}
		}
		return helmReleaseOf(p, spoke, namespace, release)
	}
	for _, t := range r.promotionTargets(ctx, pr) {
		n.Targets = append(n.Targets, notify.Target{
			Environment: pr.Spec.To, Spoke: t.Spoke, Namespace: t.Namespace, Release: t.Release,
			Version: t.Version, Revision: t.Revision, Health: t.Health, Done: t.Done, Message: t.Message,
			HelmRelease: helmRelease(t.Spoke, t.Namespace, t.Release),
		})
	}
	if len(n.Targets) == 0 && env != nil {
		for i := range resolved {
			t := &resolved[i]
			rel := pipeline.ReleaseOf(p, &t.Target)
			n.Targets = append(n.Targets, notify.Target{Environment: env.Name, Spoke: t.Spoke, Namespace: t.Namespace, Release: rel,
				HelmRelease: helmRelease(t.Spoke, t.Namespace, rel)})
		}
	}
	// The approval asked again because the preview changed
	// (reapproveOnChange): the notice of the change asks for the decision.
	asks := e == tugboatv1alpha1.EventPromotionWaitingApproval ||
		e == tugboatv1alpha1.EventPromotionPreviewChanged && s.Preview != nil && s.Preview.ApprovalsReset > 0
	if asks && s.Phase == tugboatv1alpha1.PromotionWaitingApproval &&
		env != nil && env.Gates.Approvers != nil && len(env.Gates.Approvers.SlackUsers) > 0 {
		n.Approval = &notify.ApprovalRequest{Namespace: pr.Namespace, Pipeline: pr.Spec.Pipeline, Promotion: pr.Name, Notifier: spec.Name}
	}
	if n.Summary {
		n.Timeline = r.promotionTimeline(ctx, p, env, pr)
	}
	return n
}

// rolloutNotice completes n, a notice of recurring event e about pr's
// rollout, for its occurrence-th occurrence: the wave that qualified, who
// paused or resumed, and the rollout's progress. Its time is the wave's
// completion, or the request's.
func rolloutNotice(n *notify.Notice, pr *tugboatv1alpha1.Promotion, e tugboatv1alpha1.NotifyEvent, occurrence int32) {
	st, info := pr.Status.Rollout, n.Promotion
	info.Rollout = st.Progress()
	req := pr.Status.RolloutRequest
	switch e {
	case tugboatv1alpha1.EventPromotionWaveCompleted:
		if i := int(occurrence) - 1; i >= 0 && i < len(st.Waves) {
			w := st.Waves[i]
			info.Wave = fmt.Sprintf("%s (%d of %d)", w.Name, i+1, len(st.Waves))
			info.Message = fmt.Sprintf("wave %s qualified: %d of %d targets succeeded, %d failed", w.Name, w.Succeeded, w.Targets, w.Failed)
			if w.CompletedAt != nil {
				n.Time = w.CompletedAt.Time
			}
		}
	case tugboatv1alpha1.EventPromotionPaused:
		if pr.Status.Phase != tugboatv1alpha1.PromotionPaused || occurrence < st.Pauses {
			// Resumed since: the Ready message no longer says why.
			info.Message = fmt.Sprintf("the rollout of %s into %s was paused (pause %d); it has been resumed since", pr.Spec.Version, pr.Spec.To, occurrence)
		}
		if req != nil && req.Action == tugboatv1alpha1.RolloutActionPause && st.PausedBy == req.User && occurrence == st.Pauses {
			n.Time = req.Time.Time
		}
	case tugboatv1alpha1.EventPromotionResumed:
		info.Message = fmt.Sprintf("the rollout of %s into %s was resumed", pr.Spec.Version, pr.Spec.To)
		if req != nil && req.Action == tugboatv1alpha1.RolloutActionResume && occurrence == st.Resumes {
			info.Message = fmt.Sprintf("the rollout of %s into %s was resumed by %s", pr.Spec.Version, pr.Spec.To, req.User)
			if req.Message != "" {
				info.Message += ": " + req.Message
			}
			n.Time = req.Time.Time
		}
	}
}

// helmReleaseOf returns the Flux HelmRelease the Pipeline names for a
// target, with its namespace defaulted, or nil.
func helmReleaseOf(p *tugboatv1alpha1.Pipeline, spoke, namespace, release string) *tugboatv1alpha1.ObjectReference {
	for _, env := range p.Spec.Environments {
		for i := range env.Targets {
			t := &env.Targets[i]
			if t.Spoke == spoke && t.Namespace == namespace && pipeline.ReleaseOf(p, t) == release && t.HelmRelease != nil {
				hr := *t.HelmRelease
				if hr.Namespace == "" {
					hr.Namespace = t.Namespace
				}
				return &hr
			}
		}
	}
	return nil
}

// eventTime is when e happened, as far as pr's status tells.
func eventTime(pr *tugboatv1alpha1.Promotion, e tugboatv1alpha1.NotifyEvent) time.Time {
	s := &pr.Status
	switch {
	case e == tugboatv1alpha1.EventPromotionCreated:
		return pr.CreationTimestamp.Time
	case e == tugboatv1alpha1.EventPromotionPreviewChanged && s.Preview != nil && s.Preview.ComputedAt != nil:
		return s.Preview.ComputedAt.Time
	case e == tugboatv1alpha1.EventPromotionRunning && s.StartedAt != nil:
		return s.StartedAt.Time
	case e == tugboatv1alpha1.EventPromotionRollingBack && s.Rollout != nil && s.Rollout.RollbackStartedAt != nil:
		return s.Rollout.RollbackStartedAt.Time
	case s.CompletedAt != nil && (e == tugboatv1alpha1.EventPromotionSucceeded || e == tugboatv1alpha1.EventPromotionFailed || e == tugboatv1alpha1.EventPromotionAborted):
		return s.CompletedAt.Time
	}
	if c := apimeta.FindStatusCondition(s.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
		return c.LastTransitionTime.Time
	}
	return pr.CreationTimestamp.Time
}

// promotionTimeline lists everything recorded about pr, oldest first: its
// creation, the votes, the strategy's start and result, the destination's
// release revisions of the version with the events the agents reported,
// the targets' health, and the end.
func (r *deliverer) promotionTimeline(ctx context.Context, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, pr *tugboatv1alpha1.Promotion) []notify.Step {
	s := &pr.Status
	var steps []notify.Step
	add := func(t time.Time, source, format string, args ...any) {
		steps = append(steps, notify.Step{Time: t, Source: source, Text: fmt.Sprintf(format, args...)})
	}
	by := string(pr.Spec.RequestedBy)
	if pr.Spec.Requester != "" {
		by += " (" + pr.Spec.Requester + ")"
	}
	from := pr.Spec.From
	if from == "" {
		from = "-"
	}
	add(pr.CreationTimestamp.Time, "hub", "promotion %s of %s from %s to %s created, requested by %s", pr.Name, pr.Spec.Version, from, pr.Spec.To, by)
	for _, v := range s.Approvals {
		who := v.User
		if v.DisplayName != "" && v.Source != tugboatv1alpha1.ApprovalSourceKubernetes {
			who += " (" + v.DisplayName + ")"
		}
		verb := "approved"
		if v.Decision == tugboatv1alpha1.DecisionReject {
			verb = "rejected"
		}
		msg := ""
		if v.Message != "" {
			msg = ": " + v.Message
		}
		add(v.Time.Time, "hub", "%s by %s via %s%s", verb, who, v.Source, msg)
	}
	if s.StartedAt != nil {
		add(s.StartedAt.Time, "hub", "strategy %s started", pr.StrategyType())
	}
	if sr := s.StrategyResult; sr != nil {
		t := pr.CreationTimestamp.Time
		if s.StartedAt != nil {
			t = s.StartedAt.Time
		}
		text := strings.TrimSpace(sr.Message)
		if sr.URL != "" {
			text = strings.TrimSpace(text + " " + sr.URL)
		}
		if text != "" {
			add(t, "hub", "strategy result: %s", text)
		}
	}
	for _, t := range r.promotionTargets(ctx, pr) {
		source := t.Spoke + "/" + t.Namespace + "/" + t.Release
		r.revisionSteps(ctx, p.Namespace, t.Spoke, t.Namespace, t.Release, pr.Spec.Version, pr.CreationTimestamp.Time, &steps)
		if t.LastTransitionTime != nil {
			state := "runs " + t.Version + ", " + string(t.Health)
			if !t.Done && t.Message != "" {
				state = t.Message
			}
			add(t.LastTransitionTime.Time, source, "%s", state)
		}
	}
	if st := s.Rollout; st != nil {
		for i, w := range st.Waves {
			if w.CompletedAt != nil {
				add(w.CompletedAt.Time, "hub", "wave %s (%d of %d) qualified: %d of %d targets succeeded, %d failed", w.Name, i+1, len(st.Waves), w.Succeeded, w.Targets, w.Failed)
			}
		}
	}
	if req := s.RolloutRequest; req != nil && s.Rollout != nil && req.Sequence <= s.Rollout.ObservedRequest {
		verb := "paused"
		if req.Action == tugboatv1alpha1.RolloutActionResume {
			verb = "resumed"
		}
		msg := ""
		if req.Message != "" {
			msg = ": " + req.Message
		}
		add(req.Time.Time, "hub", "rollout %s by %s%s", verb, req.User, msg) // the last request only: status keeps one
	}
	if s.CompletedAt != nil {
		msg := string(s.Phase)
		if c := apimeta.FindStatusCondition(s.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		add(s.CompletedAt.Time, "hub", "%s", msg)
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Time.Before(steps[j].Time) })
	return steps
}

// revisionSteps appends the revisions of version recorded in the target's
// ReleaseHistory since not before, with their events.
func (r *deliverer) revisionSteps(ctx context.Context, ns, spoke, namespace, release, version string, notBefore time.Time, steps *[]notify.Step) {
	rh := &tugboatv1alpha1.ReleaseHistory{}
	key := types.NamespacedName{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, namespace, release)}
	if err := r.client.Get(ctx, key, rh); err != nil {
		return
	}
	source := spoke + "/" + namespace + "/" + release
	for i := len(rh.Status.Revisions) - 1; i >= 0; i-- { // newest first in status
		rev := &rh.Status.Revisions[i]
		if rev.ChartVersion != version || (rev.LastDeployed != nil && rev.LastDeployed.Time.Before(notBefore.Add(-time.Minute))) {
			continue
		}
		*steps = append(*steps, revisionLines(source, rev)...)
	}
}

// revisionLines describes one revision and its events.
func revisionLines(source string, rev *tugboatv1alpha1.Revision) []notify.Step {
	var steps []notify.Step
	if rev.LastDeployed != nil {
		steps = append(steps, notify.Step{Time: rev.LastDeployed.Time, Source: source,
			Text: fmt.Sprintf("revision %d: chart %s %s %s", rev.Revision, rev.Chart, rev.ChartVersion, rev.Status)})
	}
	for _, ev := range rev.Events {
		text := ev.Reason
		if ev.Object != nil {
			text += " " + ev.Object.Kind + "/" + ev.Object.Name
		}
		if ev.Message != "" {
			text += ": " + ev.Message
		}
		if ev.Count > 1 {
			text += fmt.Sprintf(" (x%d)", ev.Count)
		}
		steps = append(steps, notify.Step{Time: ev.Time.Time, Source: source, Text: text})
	}
	return steps
}

func metavOK(gen int64) metav1.Condition {
	return metav1.Condition{Type: tugboatv1alpha1.NotifiedCondition.String(), Status: metav1.ConditionTrue,
		Reason: tugboatv1alpha1.NotificationsDeliveredReason.String(), Message: "notices are delivered", ObservedGeneration: gen}
}

func metavFailed(gen int64, msg string) metav1.Condition {
	return metav1.Condition{Type: tugboatv1alpha1.NotifiedCondition.String(), Status: metav1.ConditionFalse,
		Reason: tugboatv1alpha1.NotificationFailedReason.String(), Message: msg, ObservedGeneration: gen}
}

// shownVotes are votes as notices show them: a Kubernetes vote's
// displayName is the voter's own text, not something the API server
// authenticated, so it is left out.
func shownVotes(votes []tugboatv1alpha1.ApprovalVote) []tugboatv1alpha1.ApprovalVote {
	out := make([]tugboatv1alpha1.ApprovalVote, len(votes))
	for i, v := range votes {
		if v.Source == tugboatv1alpha1.ApprovalSourceKubernetes {
			v.DisplayName = ""
		}
		out[i] = v
	}
	return out
}

// maxNoticeTargets bounds the targets a notice lists; status.rollout
// counts them all.
const maxNoticeTargets = 100

// noticeTarget is one PromotionTarget as a notice shows it.
type noticeTarget struct {
	Spoke, Namespace, Release string
	tugboatv1alpha1.PromotionTargetStatus
}

// promotionTargets returns the targets pr acted on (its PromotionTargets,
// from the cache): those not done first, at most maxNoticeTargets; none
// when they cannot be read (the notice then lists the environment's).
func (r *deliverer) promotionTargets(ctx context.Context, pr *tugboatv1alpha1.Promotion) []noticeTarget {
	var list tugboatv1alpha1.PromotionTargetList
	if err := r.client.List(ctx, &list, client.InNamespace(pr.Namespace),
		client.MatchingLabels{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(pr.Name)}); err != nil {
		return nil
	}
	out := make([]noticeTarget, 0, len(list.Items))
	for i := range list.Items {
		pt := &list.Items[i]
		if pt.Of(pr) {
			out = append(out, noticeTarget{Spoke: pt.Spec.Spoke, Namespace: pt.Spec.Namespace, Release: pt.Spec.Release, PromotionTargetStatus: pt.Status})
		}
	}
	slices.SortStableFunc(out, func(a, b noticeTarget) int {
		if a.Done != b.Done {
			if a.Done {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Spoke+"/"+a.Namespace+"/"+a.Release, b.Spoke+"/"+b.Namespace+"/"+b.Release)
	})
	return out[:min(len(out), maxNoticeTargets)]
}
