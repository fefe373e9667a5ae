package dora_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/dora"
	. "tugboat.dev/tugboat/controllers/dora/doratest"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func at(ts ...time.Time) []time.Time { return ts }

func ratio(r float64) *float64 { return &r }

const (
	m = time.Minute
	h = time.Hour
)

// want are the figures a case expects; fields left zero must be zero (a
// nil Summary or rate means "no sample").
type want struct {
	deployments     int
	frequency       float64
	leadTime        *dora.Summary
	leadTimeUnknown int
	changes         int
	failures        int
	rate            *float64
	ttr             *dora.Summary
	unrestored      int
}

func check(t *testing.T, got dora.Figures, w want) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(got.Deployments).To(Equal(w.deployments), "deployments")
	g.Expect(got.DeploymentFrequency).To(BeNumerically("~", w.frequency, 1e-9), "deployment frequency")
	g.Expect(got.LeadTime).To(Equal(w.leadTime), "lead time")
	g.Expect(got.LeadTimeUnknown).To(Equal(w.leadTimeUnknown), "deployments without a lead time")
	g.Expect(got.Changes).To(Equal(w.changes), "changes")
	g.Expect(got.ChangeFailures).To(Equal(w.failures), "change failures")
	if w.rate == nil {
		g.Expect(got.ChangeFailureRate).To(BeNil(), "change-failure rate")
	} else {
		g.Expect(got.ChangeFailureRate).NotTo(BeNil(), "change-failure rate")
		g.Expect(*got.ChangeFailureRate).To(BeNumerically("~", *w.rate, 1e-9), "change-failure rate")
	}
	g.Expect(got.TimeToRestore).To(Equal(w.ttr), "time to restore")
	g.Expect(got.Unrestored).To(Equal(w.unrestored), "unrestored failures")
}

// The scripted history of doratest.Script, whose figures are worked out by
// hand in its doc comment and in docs/dora.md.
func TestCompute_script(t *testing.T) {
	o := Script("fleet", "web", now)
	in := dora.Input{Pipeline: o.Pipeline, Histories: o.Histories, Promotions: o.Promotions, Now: now}
	got := dora.Compute(in)
	g := NewWithT(t)
	g.Expect(got.Namespace).To(Equal("fleet"))
	g.Expect(got.Pipeline).To(Equal("web"))
	g.Expect(got.FirstEnvironment).To(Equal("dev"))
	g.Expect(got.Environment).To(Equal("production"))
	g.Expect(got.From).To(Equal(ago(30 * Day)))
	g.Expect(got.To).To(Equal(now))
	check(t, got, want{
		deployments: 2, frequency: 2.0 / 30,
		leadTime: &dora.Summary{Count: 2, Median: 25*h + 5*m, P90: 48*h + 40*m},
		changes:  3, failures: 1, rate: ratio(1.0 / 3),
		ttr: &dora.Summary{Count: 1, Median: 55 * m, P90: 55 * m},
	})

	// A 10-day window leaves 1.0.0 out: one deployment (1.1.0), two
	// changes (1.1.0 deployed, 1.2.0 failed).
	in.Window = 10 * Day
	check(t, dora.Compute(in), want{
		deployments: 1, frequency: 0.1,
		leadTime: &dora.Summary{Count: 1, Median: 48*h + 40*m, P90: 48*h + 40*m},
		changes:  2, failures: 1, rate: ratio(0.5),
		ttr: &dora.Summary{Count: 1, Median: 55 * m, P90: 55 * m},
	})

	// A 2-day window holds no deployment and no failure: every figure but
	// the frequency is unknown; 1.2.1, still deploying, is no change yet.
	in.Window = 2 * Day
	check(t, dora.Compute(in), want{})
}

func TestCompute_cases(t *testing.T) {
	devProd := Pipeline("fleet", "web", E("dev", "dev-1"), E("production", "prod-1"))
	tests := []struct {
		name       string
		pipeline   *tugboatv1alpha1.Pipeline
		histories  []tugboatv1alpha1.ReleaseHistory
		promotions []tugboatv1alpha1.Promotion
		want       want
	}{{
		name:     "no history at all",
		pipeline: devProd,
		want:     want{},
	}, {
		name:     "dev only: nothing reached production",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "dev-1", Rev{Version: "1.0.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - m))}),
		},
		want: want{},
	}, {
		name:     "the first deploy in dev is no longer recorded: lead time unknown",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "dev-1", Rev{Version: "1.1.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - m))}),
			History("fleet", "prod-1", Rev{Version: "1.0.0", Deployed: ago(Day), Complete: at(ago(Day - m))}),
		},
		want: want{deployments: 1, frequency: 1.0 / 30, leadTimeUnknown: 1, changes: 1, rate: ratio(0)},
	}, {
		name:     "production deployed before dev (clock skew, a hotfix): no lead time",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "dev-1", Rev{Version: "1.0.0", Deployed: ago(Day), Complete: at(ago(Day - m))}),
			History("fleet", "prod-1", Rev{Version: "1.0.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - m))}),
		},
		want: want{deployments: 1, frequency: 1.0 / 30, leadTimeUnknown: 1, changes: 1, rate: ratio(0)},
	}, {
		name:     "one environment: lead time is the time from deploy to healthy",
		pipeline: Pipeline("fleet", "web", E("production", "prod-1")),
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "prod-1",
				Rev{Version: "1.0.0", Deployed: ago(3 * Day), Complete: at(ago(3*Day - 4*m))},
				Rev{Version: "1.1.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - 2*m))},
				Rev{Version: "1.2.0", Deployed: ago(Day), Complete: at(ago(Day - 10*m))}),
		},
		want: want{
			deployments: 3, frequency: 0.1,
			leadTime: &dora.Summary{Count: 3, Median: 4 * m, P90: 10 * m},
			changes:  3, rate: ratio(0),
		},
	}, {
		name:     "a reinstall of an older version after an uninstall is a deployment, not a rollback (no failure)",
		pipeline: Pipeline("fleet", "web", E("production", "prod-1")),
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "prod-1",
				Rev{Version: "1.1.0", Deployed: ago(4 * Day), Complete: at(ago(4*Day - m))},
				Rev{Version: "1.2.0", Deployed: ago(3 * Day), Complete: at(ago(3*Day - m)), Status: tugboatv1alpha1.ReleaseStatusUninstalled},
				Rev{Version: "1.0.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - m)), Reinstall: true},
				Rev{Version: "1.0.1", Deployed: ago(Day), Complete: at(ago(Day - m))}),
		},
		want: want{
			deployments: 4, frequency: 4.0 / 30,
			leadTime: &dora.Summary{Count: 4, Median: m, P90: m},
			changes:  4, rate: ratio(0),
		},
	}, {
		name:     "a redeploy of the same version (values change) is not a new deployment",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "dev-1", Rev{Version: "1.0.0", Deployed: ago(3 * Day), Complete: at(ago(3*Day - m))}),
			History("fleet", "prod-1",
				Rev{Version: "1.0.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - m))},
				Rev{Version: "1.0.0", Deployed: ago(Day), Complete: at(ago(Day - m))}),
		},
		want: want{
			deployments: 1, frequency: 1.0 / 30,
			leadTime: &dora.Summary{Count: 1, Median: Day + m, P90: Day + m},
			changes:  1, rate: ratio(0),
		},
	}, {
		name:     "two targets: deployed when the second runs it healthy",
		pipeline: Pipeline("fleet", "web", E("dev", "dev-1"), E("production", "prod-1", "prod-2")),
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "dev-1", Rev{Version: "1.0.0", Deployed: ago(3 * Day)}),
			History("fleet", "prod-1", Rev{Version: "1.0.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - m))}),
			History("fleet", "prod-2", Rev{Version: "1.0.0", Deployed: ago(2*Day - h), Complete: at(ago(2*Day - 2*h))}),
		},
		want: want{
			deployments: 1, frequency: 1.0 / 30,
			leadTime: &dora.Summary{Count: 1, Median: Day + 2*h, P90: Day + 2*h},
			changes:  1, rate: ratio(0),
		},
	}, {
		name:     "two targets, one not updated yet: no outcome, not counted",
		pipeline: Pipeline("fleet", "web", E("dev", "dev-1"), E("production", "prod-1", "prod-2")),
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "dev-1", Rev{Version: "1.0.0", Deployed: ago(3 * Day)}),
			History("fleet", "prod-1", Rev{Version: "1.0.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - m))}),
		},
		want: want{},
	}, {
		name:     "Helm's upgrade fails; a fix restores",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "prod-1",
				Rev{Version: "1.0.0", Deployed: ago(10 * Day), Complete: at(ago(10*Day - m))},
				Rev{Version: "1.1.0", Deployed: ago(5 * Day), Status: tugboatv1alpha1.ReleaseStatusFailed, Health: tugboatv1alpha1.HealthInProgress},
				Rev{Version: "1.1.1", Deployed: ago(5*Day - 2*h), Complete: at(ago(5*Day - 2*h - 3*m))}),
		},
		want: want{
			deployments: 2, frequency: 2.0 / 30, leadTimeUnknown: 2,
			changes: 3, failures: 1, rate: ratio(1.0 / 3),
			ttr: &dora.Summary{Count: 1, Median: 2*h + 3*m, P90: 2*h + 3*m},
		},
	}, {
		name:     "a failure not restored yet",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "prod-1",
				Rev{Version: "1.0.0", Deployed: ago(10 * Day), Complete: at(ago(10*Day - m))},
				Rev{Version: "1.1.0", Deployed: ago(h), Failed: at(ago(h - 5*m))}),
		},
		want: want{
			deployments: 1, frequency: 1.0 / 30, leadTimeUnknown: 1,
			changes: 2, failures: 1, rate: ratio(0.5), unrestored: 1,
		},
	}, {
		name:     "failed, then healthy by itself: deployed and failed; restored when healthy",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "dev-1", Rev{Version: "1.0.0", Deployed: ago(2 * Day)}),
			History("fleet", "prod-1",
				Rev{Version: "1.0.0", Deployed: ago(Day), Failed: at(ago(Day - m)), Complete: at(ago(Day - 31*m))}),
		},
		want: want{
			deployments: 1, frequency: 1.0 / 30,
			leadTime: &dora.Summary{Count: 1, Median: Day + 31*m, P90: Day + 31*m},
			changes:  1, failures: 1, rate: ratio(1),
			ttr: &dora.Summary{Count: 1, Median: 30 * m, P90: 30 * m},
		},
	}, {
		name:     "healthy for days, then rolled back: a change failure from the rollback on",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "prod-1",
				Rev{Version: "1.0.0", Deployed: ago(10 * Day), Complete: at(ago(10*Day - m))},
				Rev{Version: "1.1.0", Deployed: ago(5 * Day), Complete: at(ago(5*Day - m))},
				Rev{Version: "1.0.0", Deployed: ago(2 * Day), Complete: at(ago(2*Day - 4*m))}),
		},
		want: want{
			deployments: 2, frequency: 2.0 / 30, leadTimeUnknown: 2,
			changes: 2, failures: 1, rate: ratio(0.5),
			ttr: &dora.Summary{Count: 1, Median: 4 * m, P90: 4 * m},
		},
	}, {
		name:     "a rollback whose predecessor retention dropped reads as a deployment (partial data)",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			// Revisions 1 and 2 were dropped by retention; revision 3
			// rolled 2.0.0 back to 1.0.0.
			func() tugboatv1alpha1.ReleaseHistory {
				rh := History("fleet", "prod-1",
					Rev{Version: "1.0.0", Deployed: ago(20 * Day)},
					Rev{Version: "2.0.0", Deployed: ago(15 * Day)},
					Rev{Version: "1.0.0", Deployed: ago(Day), Complete: at(ago(Day - m))})
				rh.Status.Revisions = rh.Status.Revisions[:1]
				return rh
			}(),
		},
		want: want{deployments: 1, frequency: 1.0 / 30, leadTimeUnknown: 1, changes: 1, rate: ratio(0)},
	}, {
		name:     "a version that never ran healthy, rolled back: a failed change, restored when the rollback runs healthy",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			func() tugboatv1alpha1.ReleaseHistory {
				rh := History("fleet", "prod-1",
					Rev{Version: "1.0.0", Deployed: ago(20 * Day)},
					Rev{Version: "2.0.0", Deployed: ago(15 * Day)},
					Rev{Version: "2.1.0", Deployed: ago(14 * Day)},
					Rev{Version: "2.0.0", Deployed: ago(Day), Complete: at(ago(Day - m))})
				rh.Status.Revisions = rh.Status.Revisions[:2] // 2.1.0 and its rollback
				return rh
			}(),
		},
		// 2.1.0 deployed 14 days ago, never reported healthy, rolled
		// back a day ago: one failed change, restored 1m after.
		want: want{changes: 1, failures: 1, rate: ratio(1), ttr: &dora.Summary{Count: 1, Median: m, P90: m}},
	}, {
		name:     "a Promotion that failed before anything was deployed is no change",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "prod-1", Rev{Version: "1.0.0", Deployed: ago(10 * Day), Complete: at(ago(10*Day - m))}),
		},
		promotions: []tugboatv1alpha1.Promotion{
			Promotion("fleet", "web", "dev", "production", "1.1.0", tugboatv1alpha1.PromotionFailed, ago(Day)),
		},
		want: want{deployments: 1, frequency: 1.0 / 30, leadTimeUnknown: 1, changes: 1, rate: ratio(0)},
	}, {
		name:     "a Promotion that timed out while the targets never reported health fails the change",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "prod-1",
				Rev{Version: "1.0.0", Deployed: ago(10 * Day), Complete: at(ago(10*Day - m))},
				Rev{Version: "1.1.0", Deployed: ago(Day)}),
		},
		promotions: []tugboatv1alpha1.Promotion{
			Promotion("fleet", "web", "dev", "production", "1.1.0", tugboatv1alpha1.PromotionFailed, ago(Day-30*m)),
			// Another Pipeline's and another environment's Promotions
			// are not this one's.
			Promotion("fleet", "api", "dev", "production", "1.0.0", tugboatv1alpha1.PromotionFailed, ago(10*Day-30*m)),
			Promotion("fleet", "web", "", "dev", "1.0.0", tugboatv1alpha1.PromotionFailed, ago(10*Day-30*m)),
		},
		want: want{
			deployments: 1, frequency: 1.0 / 30, leadTimeUnknown: 1,
			changes: 2, failures: 1, rate: ratio(0.5), unrestored: 1,
		},
	}, {
		name:     "health without events: healthy from the deploy on",
		pipeline: devProd,
		histories: []tugboatv1alpha1.ReleaseHistory{
			History("fleet", "dev-1", Rev{Version: "1.0.0", Deployed: ago(2 * Day), Health: tugboatv1alpha1.HealthCurrent}),
			History("fleet", "prod-1", Rev{Version: "1.0.0", Deployed: ago(Day), Health: tugboatv1alpha1.HealthCurrent}),
		},
		want: want{
			deployments: 1, frequency: 1.0 / 30,
			leadTime: &dora.Summary{Count: 1, Median: Day, P90: Day},
			changes:  1, rate: ratio(0),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dora.Compute(dora.Input{Pipeline: tt.pipeline, Histories: tt.histories, Promotions: tt.promotions, Now: now})
			check(t, got, tt.want)
		})
	}
}

// A spokeSelector target counts the Spokes the Pipeline's status lists;
// histories of other namespaces are not the Pipeline's.
func TestCompute_targetsFromStatus(t *testing.T) {
	g := NewWithT(t)
	p := Pipeline("fleet", "web", E("production"))
	p.Spec.Environments[0].Targets = []tugboatv1alpha1.Target{{SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, Namespace: "apps"}}
	histories := []tugboatv1alpha1.ReleaseHistory{
		History("fleet", "prod-1", Rev{Version: "1.0.0", Deployed: ago(Day), Complete: at(ago(Day - m))}),
		History("fleet", "prod-2", Rev{Version: "1.0.0", Deployed: ago(Day), Complete: at(ago(Day - 3*m))}),
	}
	other := History("elsewhere", "prod-2", Rev{Version: "1.0.0", Deployed: ago(Day), Complete: at(ago(Day - 9*m))})

	// Not expanded yet: no targets, nothing deployed.
	got := dora.Compute(dora.Input{Pipeline: p, Histories: histories, Now: now})
	g.Expect(got.Deployments).To(BeZero())

	p.Status.Environments = []tugboatv1alpha1.EnvironmentStatus{{Name: "production", Targets: []tugboatv1alpha1.TargetStatus{
		{Spoke: "prod-1", Namespace: "apps", Release: "web"}, {Spoke: "prod-2", Namespace: "apps", Release: "web"},
	}}}
	got = dora.Compute(dora.Input{Pipeline: p, Histories: append([]tugboatv1alpha1.ReleaseHistory{other}, histories...), Now: now})
	g.Expect(got.Deployments).To(Equal(1))
	g.Expect(got.LeadTime).To(Equal(&dora.Summary{Count: 1, Median: 3 * m, P90: 3 * m}))
}

// A Pipeline without environments (not valid, but the figures must not
// fail on it) has no figures.
func TestCompute_noEnvironments(t *testing.T) {
	g := NewWithT(t)
	got := dora.Compute(dora.Input{Pipeline: Pipeline("fleet", "web"), Now: now})
	g.Expect(got.Environment).To(BeEmpty())
	g.Expect(got.Deployments).To(BeZero())
	g.Expect(got.ChangeFailureRate).To(BeNil())
}
