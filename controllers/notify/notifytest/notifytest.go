// Package notifytest provides notices for the notifiers' tests: a promotion
// to production with two targets, votes, a pull request and a timeline.
package notifytest

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
)

// Now is the time the notices happen at.
var Now = time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)

// Promotion returns a notice about Promotion web-production-1.4.0 of
// Pipeline apps/web, for event e: two production targets (the first with a
// Flux HelmRelease), one approval of two, the pull request, and a timeline
// across the targets.
func Promotion(e tugboatv1alpha1.NotifyEvent) notify.Notice {
	started := Now.Add(-4 * time.Minute)
	phase := map[tugboatv1alpha1.NotifyEvent]tugboatv1alpha1.PromotionPhase{
		tugboatv1alpha1.EventPromotionCreated:         tugboatv1alpha1.PromotionPending,
		tugboatv1alpha1.EventPromotionWaitingApproval: tugboatv1alpha1.PromotionWaitingApproval,
		tugboatv1alpha1.EventPromotionRunning:         tugboatv1alpha1.PromotionRunning,
		tugboatv1alpha1.EventPromotionWaveCompleted:   tugboatv1alpha1.PromotionRunning,
		tugboatv1alpha1.EventPromotionPaused:          tugboatv1alpha1.PromotionPaused,
		tugboatv1alpha1.EventPromotionResumed:         tugboatv1alpha1.PromotionRunning,
		tugboatv1alpha1.EventPromotionRollingBack:     tugboatv1alpha1.PromotionRollingBack,
		tugboatv1alpha1.EventPromotionSucceeded:       tugboatv1alpha1.PromotionSucceeded,
		tugboatv1alpha1.EventPromotionFailed:          tugboatv1alpha1.PromotionFailed,
		tugboatv1alpha1.EventPromotionAborted:         tugboatv1alpha1.PromotionAborted,
	}[e]
	n := notify.Notice{
		Event: e, Time: Now, Namespace: "apps", Pipeline: "web", Release: "web",
		Promotion: &notify.Promotion{
			Name: "web-production-1.4.0", From: "staging", To: "production", Version: "1.4.0",
			Phase: phase, URL: "https://git.example.com/org/fleet/pulls/42", Strategy: tugboatv1alpha1.StrategyPullRequest,
			RequestedBy: tugboatv1alpha1.RequestedByAuto, ApprovalsRequired: 2,
			Votes: []tugboatv1alpha1.ApprovalVote{{
				Decision: tugboatv1alpha1.DecisionApprove, User: "alice@example.com", Source: tugboatv1alpha1.ApprovalSourceKubernetes,
				Time: metav1.NewTime(Now.Add(-5 * time.Minute)),
			}, {
				Decision: tugboatv1alpha1.DecisionApprove, User: "U024BE7LH", DisplayName: "bob", Source: tugboatv1alpha1.ApprovalSourceSlack,
				Time: metav1.NewTime(Now.Add(-4*time.Minute - 30*time.Second)),
			}},
			ApprovedBy: "U024BE7LH",
			Created:    Now.Add(-10 * time.Minute), Started: &started,
		},
		Targets: []notify.Target{{
			Environment: "production", Spoke: "prod-eu", Namespace: "apps", Release: "web",
			Version: "1.4.0", Revision: 12, Health: tugboatv1alpha1.HealthCurrent, Done: true,
			HelmRelease: &tugboatv1alpha1.ObjectReference{Name: "web-prod-eu"},
		}, {
			Environment: "production", Spoke: "prod-us", Namespace: "apps", Release: "web",
			Version: "1.4.0", Revision: 9, Health: tugboatv1alpha1.HealthCurrent, Done: true,
		}},
		Timeline: []notify.Step{
			{Time: Now.Add(-10 * time.Minute), Source: "hub", Text: "promotion created: staging is healthy on 1.4.0"},
			{Time: Now.Add(-5 * time.Minute), Source: "hub", Text: "approved by alice@example.com (Kubernetes)"},
			{Time: Now.Add(-4*time.Minute - 30*time.Second), Source: "hub", Text: "approved by bob (Slack)"},
			{Time: Now.Add(-4 * time.Minute), Source: "hub", Text: "pull request https://git.example.com/org/fleet/pulls/42 opened"},
			{Time: Now.Add(-2 * time.Minute), Source: "prod-eu/apps/web", Text: "revision 12 (1.4.0) pending-upgrade"},
			{Time: Now.Add(-110 * time.Second), Source: "prod-eu/apps/web", Text: "Pod web-7d9f-x created"},
			{Time: Now.Add(-100 * time.Second), Source: "prod-us/apps/web", Text: "revision 9 (1.4.0) pending-upgrade"},
			{Time: Now.Add(-90 * time.Second), Source: "prod-eu/apps/web", Text: "health InProgress → Current: rollout complete"},
			{Time: Now.Add(-60 * time.Second), Source: "prod-us/apps/web", Text: "health InProgress → Current: rollout complete"},
			{Time: Now, Source: "hub", Text: "promotion succeeded"},
		},
	}
	switch e {
	case tugboatv1alpha1.EventPromotionWaitingApproval:
		n.Promotion.Votes = n.Promotion.Votes[:1]
		n.Promotion.ApprovedBy = ""
		n.Approval = &notify.ApprovalRequest{Namespace: "apps", Pipeline: "web", Promotion: "web-production-1.4.0", Notifier: "team-slack"}
	case tugboatv1alpha1.EventPromotionFailed:
		n.Promotion.Message = "timed out after 30m: prod-us/apps/web is Failed: Deployment web exceeded its progress deadline"
		n.Targets[1].Health = tugboatv1alpha1.HealthFailed
		n.Targets[1].Done = false
	case tugboatv1alpha1.EventPromotionSucceeded:
		done := Now
		n.Promotion.Done = &done
		n.Summary = true
	}
	return n
}

// Deployment returns a notice about revision 7 of release apps/web on spoke
// staging-1, for event e.
func Deployment(e tugboatv1alpha1.NotifyEvent) notify.Notice {
	health := tugboatv1alpha1.HealthCurrent
	if e == tugboatv1alpha1.EventDeploymentFailed || e == tugboatv1alpha1.EventDeploymentDegraded {
		health = tugboatv1alpha1.HealthFailed
	}
	return notify.Notice{
		Event: e, Time: Now, Namespace: "apps", Pipeline: "web", Release: "web",
		Deployment: &notify.Deployment{
			Spoke: "staging-1", Namespace: "apps", Release: "web", Revision: 7, ChartVersion: "1.4.0", AppVersion: "2.3.1",
			Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: health, Environment: "staging",
		},
		Targets: []notify.Target{{
			Environment: "staging", Spoke: "staging-1", Namespace: "apps", Release: "web",
			Version: "1.4.0", Revision: 7, Health: health,
		}},
	}
}

// LongTimeline returns n with a timeline of count generated steps.
func LongTimeline(n notify.Notice, count int) notify.Notice {
	n.Timeline = nil
	for i := range count {
		n.Timeline = append(n.Timeline, notify.Step{
			Time: Now.Add(time.Duration(i-count) * time.Second), Source: "prod-eu/apps/web",
			Text: fmt.Sprintf("Pod web-7d9f-%04d created", i),
		})
	}
	return n
}
