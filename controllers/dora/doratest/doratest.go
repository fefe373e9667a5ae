// Package doratest builds scripted Pipelines, ReleaseHistories and
// Promotions for tests of the DORA figures: the unit tests of
// controllers/dora, the hub's gauges on a real API server, and
// `tugboat status --dora`. Script names the one history with known
// answers all three check; docs/dora.md works its figures out by hand.
package doratest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Day is 24 hours.
const Day = 24 * time.Hour

// Env is one environment of a scripted Pipeline: its name and the spokes
// of its targets (namespace "apps", the Pipeline's release).
type Env struct {
	Name   string
	Spokes []string
}

// E returns the Env name with spokes.
func E(name string, spokes ...string) Env { return Env{Name: name, Spokes: spokes} }

// Pipeline returns Pipeline name in ns promoting release "web" through envs.
func Pipeline(ns, name string, envs ...Env) *tugboatv1alpha1.Pipeline {
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
		},
	}
	for _, e := range envs {
		env := tugboatv1alpha1.Environment{Name: e.Name}
		for _, s := range e.Spokes {
			env.Targets = append(env.Targets, tugboatv1alpha1.Target{Spoke: s, Namespace: "apps"})
		}
		p.Spec.Environments = append(p.Spec.Environments, env)
	}
	return p
}

// Rev is one scripted revision.
type Rev struct {
	// Version is the chart version.
	Version string
	// Deployed is lastDeployed.
	Deployed time.Time
	// Complete and Failed are the times of RolloutComplete and
	// RolloutFailed events.
	Complete, Failed []time.Time
	// Health is the revision's last health; defaults to Current after a
	// RolloutComplete, Failed after a RolloutFailed (the later wins),
	// else InProgress.
	Health tugboatv1alpha1.Health
	// Status is Helm's status; defaults to deployed for the newest
	// revision and superseded for the others.
	Status tugboatv1alpha1.ReleaseStatus
	// Reinstall starts a new installation (after an uninstall): Helm
	// numbers its revisions from 1 again.
	Reinstall bool
}

// History returns the ReleaseHistory of release "web" in namespace "apps"
// on spoke, in ns, with revisions numbered 1, 2, ... in the order given (from
// 1 again at a Reinstall, in the next installation).
func History(ns, spoke string, revs ...Rev) tugboatv1alpha1.ReleaseHistory {
	rh := tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: spoke, Namespace: "apps", Release: "web"},
	}
	n, life := int32(0), int32(1)
	for i, r := range revs {
		n++
		if r.Reinstall && i > 0 {
			n, life = 1, life+1
		}
		out := tugboatv1alpha1.Revision{RevisionSummary: tugboatv1alpha1.RevisionSummary{
			Revision: n, Installation: life, Chart: "web", ChartVersion: r.Version, Status: r.Status, Health: r.Health,
			LastDeployed: &metav1.Time{Time: r.Deployed},
		}}
		if out.Status == "" {
			out.Status = tugboatv1alpha1.ReleaseStatusSuperseded
			if i == len(revs)-1 {
				out.Status = tugboatv1alpha1.ReleaseStatusDeployed
			}
		}
		var lastHealthy, lastFailed time.Time
		for _, t := range r.Complete {
			out.Events = append(out.Events, event(spoke, n, "RolloutComplete", tugboatv1alpha1.EventTypeNormal, t))
			lastHealthy = later(lastHealthy, t)
		}
		for _, t := range r.Failed {
			out.Events = append(out.Events, event(spoke, n, "RolloutFailed", tugboatv1alpha1.EventTypeWarning, t))
			lastFailed = later(lastFailed, t)
		}
		if out.Health == "" {
			switch {
			case lastHealthy.IsZero() && lastFailed.IsZero():
				out.Health = tugboatv1alpha1.HealthInProgress
			case lastHealthy.After(lastFailed):
				out.Health = tugboatv1alpha1.HealthCurrent
			default:
				out.Health = tugboatv1alpha1.HealthFailed
			}
		}
		rh.Status.Revisions = append([]tugboatv1alpha1.Revision{out}, rh.Status.Revisions...)
	}
	if len(rh.Status.Revisions) > 0 {
		cur := rh.Status.Revisions[0].RevisionSummary
		rh.Status.Current = &cur
	}
	return rh
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func event(spoke string, rev int32, reason string, typ tugboatv1alpha1.EventType, t time.Time) tugboatv1alpha1.ReleaseEvent {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%s/%d", spoke, rev, reason, t.UnixNano()))
	return tugboatv1alpha1.ReleaseEvent{ID: hex.EncodeToString(sum[:8]), Time: metav1.Time{Time: t}, Type: typ, Reason: reason, Count: 1}
}

// Promotion returns a finished Promotion of version into env.
func Promotion(ns, pipeline, from, to, version string, phase tugboatv1alpha1.PromotionPhase, completed time.Time) tugboatv1alpha1.Promotion {
	return tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pipeline + "-" + to + "-" + version},
		Spec: tugboatv1alpha1.PromotionSpec{
			Pipeline: pipeline, From: from, To: to, Version: version,
			RequestedBy: tugboatv1alpha1.RequestedByAuto,
		},
		Status: tugboatv1alpha1.PromotionStatus{Phase: phase, StartedAt: &metav1.Time{Time: completed.Add(-time.Minute)}, CompletedAt: &metav1.Time{Time: completed}},
	}
}

// Objects is a scripted Pipeline with its histories and Promotions.
type Objects struct {
	Pipeline   *tugboatv1alpha1.Pipeline
	Histories  []tugboatv1alpha1.ReleaseHistory
	Promotions []tugboatv1alpha1.Promotion
}

// Script is the scripted history with known answers, ending at now
// (whole seconds): Pipeline name in ns, dev (dev-1) → staging (staging-1)
// → production (prod-1, prod-2). Over the default 30-day window:
//
//   - 1.0.0 reaches dev 20 days ago and production (both targets healthy)
//     19 days minus 1h05m ago: lead time 25h05m.
//   - 1.1.0 reaches dev 10 days ago and production 8 days minus 40m ago:
//     lead time 48h40m.
//   - 1.2.0 reaches dev 5 days ago; in production it fails health on
//     prod-1 10m after its deploy 3 days ago (and its Promotion fails 30m
//     after it); both targets are rolled back to 1.1.0 1h after the deploy
//     and run healthy again 1h05m after it: time to restore 55m.
//   - 1.2.1 is deploying on prod-1 now (no outcome yet); 1.3.0's
//     Promotion into production was rejected (nothing deployed).
//
// Figures: 2 deployments (2/30 per day), lead time median 25h05m and p90
// 48h40m, 3 changes with 1 failure (1/3), time to restore 55m.
func Script(ns, name string, now time.Time) Objects {
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	m := time.Minute
	p := Pipeline(ns, name, E("dev", "dev-1"), E("staging", "staging-1"), E("production", "prod-1", "prod-2"))
	return Objects{
		Pipeline: p,
		Histories: []tugboatv1alpha1.ReleaseHistory{
			History(ns, "dev-1",
				Rev{Version: "1.0.0", Deployed: ago(20 * Day), Complete: []time.Time{ago(20*Day - 2*m)}},
				Rev{Version: "1.1.0", Deployed: ago(10 * Day), Complete: []time.Time{ago(10*Day - m)}},
				Rev{Version: "1.2.0", Deployed: ago(5 * Day), Complete: []time.Time{ago(5*Day - m)}},
				Rev{Version: "1.3.0", Deployed: ago(2 * Day), Complete: []time.Time{ago(2*Day - m)}},
			),
			History(ns, "staging-1",
				Rev{Version: "1.2.0", Deployed: ago(4 * Day), Complete: []time.Time{ago(4*Day - m)}},
			),
			History(ns, "prod-1",
				Rev{Version: "1.0.0", Deployed: ago(19 * Day), Complete: []time.Time{ago(19*Day - 5*m)}},
				Rev{Version: "1.1.0", Deployed: ago(8 * Day), Complete: []time.Time{ago(8*Day - 5*m)}},
				Rev{Version: "1.2.0", Deployed: ago(3 * Day), Failed: []time.Time{ago(3*Day - 10*m)}},
				Rev{Version: "1.1.0", Deployed: ago(3*Day - time.Hour), Complete: []time.Time{ago(3*Day - 65*m)}},
				Rev{Version: "1.2.1", Deployed: ago(time.Hour)},
			),
			History(ns, "prod-2",
				Rev{Version: "1.0.0", Deployed: ago(19*Day - time.Hour), Complete: []time.Time{ago(19*Day - 65*m)}},
				Rev{Version: "1.1.0", Deployed: ago(8*Day - 30*m), Complete: []time.Time{ago(8*Day - 40*m)}},
				Rev{Version: "1.2.0", Deployed: ago(3 * Day), Complete: []time.Time{ago(3*Day - 3*m)}},
				Rev{Version: "1.1.0", Deployed: ago(3*Day - time.Hour), Complete: []time.Time{ago(3*Day - 62*m)}},
			),
		},
		Promotions: []tugboatv1alpha1.Promotion{
			Promotion(ns, name, "staging", "production", "1.2.0", tugboatv1alpha1.PromotionFailed, ago(3*Day-30*m)),
			Promotion(ns, name, "staging", "production", "1.3.0", tugboatv1alpha1.PromotionFailed, ago(Day)),
		},
	}
}

// Create writes o to the API server c as the hub would: the Pipeline, each
// ReleaseHistory and Promotion with its status (the status subresource).
func Create(ctx context.Context, c client.Client, o Objects) error {
	if err := c.Create(ctx, o.Pipeline.DeepCopy()); err != nil {
		return fmt.Errorf("creating Pipeline %s: %w", o.Pipeline.Name, err)
	}
	for i := range o.Histories {
		rh := o.Histories[i].DeepCopy()
		status := rh.Status
		if err := c.Create(ctx, rh); err != nil {
			return fmt.Errorf("creating ReleaseHistory %s: %w", rh.Name, err)
		}
		rh.Status = status
		if err := c.Status().Update(ctx, rh); err != nil {
			return fmt.Errorf("writing the status of ReleaseHistory %s: %w", rh.Name, err)
		}
	}
	for i := range o.Promotions {
		pr := o.Promotions[i].DeepCopy()
		status := pr.Status
		if err := c.Create(ctx, pr); err != nil {
			return fmt.Errorf("creating Promotion %s: %w", pr.Name, err)
		}
		pr.Status = status
		if err := c.Status().Update(ctx, pr); err != nil {
			return fmt.Errorf("writing the status of Promotion %s: %w", pr.Name, err)
		}
	}
	return nil
}
