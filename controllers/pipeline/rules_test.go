package pipeline

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// The rules of observe (summarize) and decide (plan), without an API
// server: a world holds the Spokes and ReleaseHistories the targets name,
// and reconcile runs summarize and plan on them as one reconcile would.

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

type world struct {
	p      *tugboatv1alpha1.Pipeline
	f      facts
	promos []tugboatv1alpha1.Promotion
}

// newWorld returns Pipeline "web" with environments dev, staging and
// production; each environment has one target per spoke named, on Ready
// Spokes, and no release reported yet.
func newWorld(envs map[string][]string) *world {
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "web"},
		Spec:       tugboatv1alpha1.PipelineSpec{Release: "web", Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm}},
	}
	w := &world{p: p, f: facts{spokes: map[string]*tugboatv1alpha1.Spoke{}, spokeErrs: map[string]error{}, histories: map[string]*tugboatv1alpha1.ReleaseHistory{}}}
	for _, name := range []string{"dev", "staging", "production"} {
		env := tugboatv1alpha1.Environment{Name: name}
		for _, spoke := range envs[name] {
			env.Targets = append(env.Targets, tugboatv1alpha1.Target{Spoke: spoke, Namespace: "apps"})
			w.f.spokes[spoke] = readySpoke(spoke)
		}
		p.Spec.Environments = append(p.Spec.Environments, env)
	}
	return w
}

// oneEach is one target per environment: dev-1, staging-1, prod-1.
func oneEach() *world {
	return newWorld(map[string][]string{"dev": {"dev-1"}, "staging": {"staging-1"}, "production": {"prod-1"}})
}

func readySpoke(name string) *tugboatv1alpha1.Spoke {
	sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
	sp.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AgentConnected"}}
	return sp
}

func (w *world) env(name string) *tugboatv1alpha1.Environment {
	return &w.p.Spec.Environments[EnvironmentIndex(w.p, name)]
}

// deploy records revision rev of version on spoke's release, deployed at
// at, with health h; earlier revisions stay in the history.
func (w *world) deploy(spoke string, rev int32, version string, h tugboatv1alpha1.Health, at time.Time) {
	name := tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", "web")
	rh := w.f.histories[name]
	if rh == nil {
		rh = &tugboatv1alpha1.ReleaseHistory{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
		w.f.histories[name] = rh
	}
	for i := range rh.Status.Revisions {
		if rh.Status.Revisions[i].Status == tugboatv1alpha1.ReleaseStatusDeployed {
			rh.Status.Revisions[i].Status = tugboatv1alpha1.ReleaseStatusSuperseded
		}
	}
	sum := tugboatv1alpha1.RevisionSummary{
		Revision: rev, Chart: "web", ChartVersion: version, Status: tugboatv1alpha1.ReleaseStatusDeployed,
		Health: h, LastDeployed: &metav1.Time{Time: at},
	}
	rh.Status.Revisions = append([]tugboatv1alpha1.Revision{{RevisionSummary: sum}}, rh.Status.Revisions...)
	rh.Status.Current = &sum
}

// uninstall records that spoke's release was uninstalled at at, as the
// recorder does (current revision uninstalled, Ready False Uninstalled).
func (w *world) uninstall(spoke string, at time.Time) {
	rh := w.f.histories[tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", "web")]
	rh.Status.Revisions[0].Status = tugboatv1alpha1.ReleaseStatusUninstalled
	rh.Status.Revisions[0].Health = tugboatv1alpha1.HealthUnknown
	cur := rh.Status.Revisions[0].RevisionSummary
	rh.Status.Current = &cur
	rh.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Uninstalled", LastTransitionTime: metav1.Time{Time: at}}}
}

// promotion records an existing Promotion of version into env in phase.
func (w *world) promotion(env, version string, phase tugboatv1alpha1.PromotionPhase) {
	w.promos = append(w.promos, tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: PromotionName("web", env, version)},
		Spec:       tugboatv1alpha1.PromotionSpec{Pipeline: "web", To: env, Version: version},
		Status:     tugboatv1alpha1.PromotionStatus{Phase: phase},
	})
}

func (w *world) resume(env string, at time.Time) {
	if w.p.Annotations == nil {
		w.p.Annotations = map[string]string{}
	}
	w.p.Annotations[ResumeAnnotationPrefix+env] = at.UTC().Format(time.RFC3339)
}

// reconcile runs observe's and decide's rules at now, as one reconcile
// does (the status carries over to the next), and returns the Promotions
// decided as "environment@version" and the requeue.
func (w *world) reconcile(now time.Time) ([]string, time.Duration, *view) {
	v := summarize(w.p, w.f, w.promos, now)
	steps, requeue := plan(w.p, v, w.promos, now)
	setReadyFor(w.p, v)
	var got []string
	for _, s := range steps {
		got = append(got, s.dst.Name+"@"+s.version)
	}
	return got, requeue, v
}

func setReadyFor(p *tugboatv1alpha1.Pipeline, v *view) { (&Reconciler{}).setReady(p, v) }

func (w *world) ready() metav1.Condition {
	c := apimeta.FindStatusCondition(w.p.Status.Conditions, "Ready")
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

func soak(env *tugboatv1alpha1.Environment, d time.Duration) {
	env.Gates.SoakTime = &metav1.Duration{Duration: d}
}

const healthy = tugboatv1alpha1.HealthCurrent

func TestRules_soakTime(t *testing.T) {
	tests := []struct {
		name string
		run  func(g Gomega, w *world)
	}{{
		name: "not yet elapsed: no promotion, look again when it ends",
		run: func(g Gomega, w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			got, requeue, _ := w.reconcile(t0)
			g.Expect(got).To(BeEmpty())
			g.Expect(requeue).To(Equal(10 * time.Minute))
			got, requeue, _ = w.reconcile(t0.Add(4 * time.Minute))
			g.Expect(got).To(BeEmpty())
			g.Expect(requeue).To(Equal(6 * time.Minute))
		},
	}, {
		name: "elapsed: promoted, counted from when the environment was first seen converged",
		run: func(g Gomega, w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			_, _, _ = w.reconcile(t0)
			got, requeue, _ := w.reconcile(t0.Add(10 * time.Minute))
			g.Expect(got).To(Equal([]string{"staging@1.1.0"}))
			g.Expect(requeue).To(BeZero())
			g.Expect(w.p.Status.Environments[0].HealthySince.Time).To(Equal(t0))
		},
	}, {
		name: "reset by a new revision: the soak counts again from the new version",
		run: func(g Gomega, w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			_, _, _ = w.reconcile(t0)
			w.deploy("dev-1", 3, "1.2.0", healthy, t0.Add(8*time.Minute))
			got, requeue, _ := w.reconcile(t0.Add(8 * time.Minute))
			g.Expect(got).To(BeEmpty())
			g.Expect(requeue).To(Equal(10 * time.Minute))
			got, _, _ = w.reconcile(t0.Add(12 * time.Minute))
			g.Expect(got).To(BeEmpty(), "1.1.0's soak would have ended; 1.2.0's has not")
			got, _, _ = w.reconcile(t0.Add(18 * time.Minute))
			g.Expect(got).To(Equal([]string{"staging@1.2.0"}))
		},
	}, {
		name: "reset by a health loss: not healthy, not soaking",
		run: func(g Gomega, w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			_, _, _ = w.reconcile(t0)
			w.f.histories["dev-1.apps.web"].Status.Current.Health = tugboatv1alpha1.HealthInProgress
			_, _, _ = w.reconcile(t0.Add(5 * time.Minute))
			g.Expect(w.p.Status.Environments[0].HealthySince).To(BeNil())
			w.f.histories["dev-1.apps.web"].Status.Current.Health = healthy
			got, requeue, _ := w.reconcile(t0.Add(11 * time.Minute))
			g.Expect(got).To(BeEmpty())
			g.Expect(requeue).To(Equal(10 * time.Minute))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := oneEach()
			soak(w.env("dev"), 10*time.Minute)
			w.deploy("staging-1", 1, "1.0.0", healthy, t0.Add(-time.Hour))
			w.deploy("prod-1", 1, "1.0.0", healthy, t0.Add(-time.Hour))
			tt.run(NewWithT(t), w)
		})
	}
}

func TestRules_healthGate(t *testing.T) {
	tests := []struct {
		name           string
		health         tugboatv1alpha1.Health
		requireHealthy *bool
		want           []string
	}{
		{name: "Current passes", health: healthy, want: []string{"staging@1.1.0"}},
		{name: "Failed (degraded) blocks", health: tugboatv1alpha1.HealthFailed},
		{name: "Unknown blocks", health: tugboatv1alpha1.HealthUnknown},
		{name: "no health reported blocks", health: ""},
		{name: "InProgress blocks", health: tugboatv1alpha1.HealthInProgress},
		{name: "Failed passes when requireHealthy is false", health: tugboatv1alpha1.HealthFailed, requireHealthy: ptr.To(false), want: []string{"staging@1.1.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := oneEach()
			w.env("dev").Gates.RequireHealthy = tt.requireHealthy
			w.deploy("dev-1", 2, "1.1.0", tt.health, t0)
			w.deploy("staging-1", 1, "1.0.0", healthy, t0)
			w.deploy("prod-1", 1, "1.0.0", healthy, t0)
			got, _, v := w.reconcile(t0)
			g.Expect(got).To(Equal(tt.want))
			if tt.want == nil {
				g.Expect(v.envs[0].notReady).To(ConsistOf("dev-1/apps/web is " + orUnknown(string(tt.health))))
				g.Expect(w.p.Status.Environments[0].HealthySince).To(BeNil())
			}
		})
	}
}

func TestRules_targets(t *testing.T) {
	two := map[string][]string{"dev": {"dev-1", "dev-2"}, "staging": {"staging-1", "staging-2"}, "production": {"prod-1"}}
	tests := []struct {
		name  string
		world func() *world
		setup func(w *world)
		want  []string
		check func(g Gomega, w *world, v *view)
	}{{
		name:  "mixed versions in the source: never converged",
		world: func() *world { return newWorld(two) },
		setup: func(w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			w.deploy("dev-2", 2, "1.2.0", healthy, t0)
		},
		check: func(g Gomega, w *world, v *view) {
			g.Expect(w.p.Status.Environments[0].Versions).To(Equal([]string{"1.2.0", "1.1.0"}))
			g.Expect(v.envs[0].notReady).To(ContainElement("targets run 1.2.0, 1.1.0"))
			g.Expect(w.p.Status.Environments[0].HealthySince).To(BeNil())
		},
	}, {
		name:  "one source target lagging (still rolling out): not promoted",
		world: func() *world { return newWorld(two) },
		setup: func(w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			w.deploy("dev-2", 2, "1.1.0", tugboatv1alpha1.HealthInProgress, t0)
		},
		check: func(g Gomega, _ *world, v *view) {
			g.Expect(v.envs[0].notReady).To(ConsistOf("dev-2/apps/web is InProgress"))
		},
	}, {
		name:  "one source target lagging (older version): not promoted",
		world: func() *world { return newWorld(two) },
		setup: func(w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			w.deploy("dev-2", 1, "1.0.0", healthy, t0)
		},
	}, {
		name:  "one destination target lagging: promoted (the version is not everywhere)",
		world: func() *world { return newWorld(two) },
		setup: func(w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			w.deploy("dev-2", 2, "1.1.0", healthy, t0)
			w.deploy("staging-1", 2, "1.1.0", healthy, t0)
			w.deploy("staging-2", 1, "1.0.0", healthy, t0)
		},
		want: []string{"staging@1.1.0"},
	}, {
		name:  "every destination target runs the version: nothing to do",
		world: func() *world { return newWorld(two) },
		setup: func(w *world) {
			for _, s := range []string{"dev-1", "dev-2", "staging-1", "staging-2", "prod-1"} {
				w.deploy(s, 2, "1.1.0", healthy, t0)
			}
		},
		want: nil,
	}, {
		name:  "a destination target runs something newer: never a downgrade",
		world: func() *world { return newWorld(two) },
		setup: func(w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			w.deploy("dev-2", 2, "1.1.0", healthy, t0)
			w.deploy("staging-1", 2, "1.0.0", healthy, t0)
			w.deploy("staging-2", 2, "1.2.0", healthy, t0)
		},
	}, {
		name:  "a destination target never reported (Spoke not Ready): waits, and says so",
		world: oneEach,
		setup: func(w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			w.f.spokes["staging-1"].Status.Conditions[0].Status = metav1.ConditionUnknown
			w.f.spokes["staging-1"].Status.Conditions[0].Message = "no heartbeat for 5m"
		},
		check: func(g Gomega, w *world, v *view) {
			g.Expect(v.problems).To(ConsistOf("spoke staging-1 is not Ready: no heartbeat for 5m", "target staging-1/apps/web has not reported a release"))
			g.Expect(w.p.Status.Environments[1].Targets[0].Absent).To(BeFalse())
			g.Expect(w.ready().Reason).To(Equal(tugboatv1alpha1.TargetNotFoundReason.String()))
		},
	}, {
		name:  "a destination target whose Spoke is not registered: waits, and says so",
		world: oneEach,
		setup: func(w *world) {
			w.deploy("dev-1", 2, "1.1.0", healthy, t0)
			w.f.spokes["staging-1"] = nil
		},
		check: func(g Gomega, w *world, _ *view) {
			g.Expect(w.ready().Message).To(ContainSubstring("spoke staging-1 is not registered in namespace fleet"))
		},
	}, {
		name:  "a destination target absent on a Ready Spoke: promoted (installed)",
		world: oneEach,
		setup: func(w *world) { w.deploy("dev-1", 2, "1.1.0", healthy, t0) },
		want:  []string{"staging@1.1.0"},
		check: func(g Gomega, w *world, _ *view) {
			g.Expect(w.p.Status.Environments[1].Targets[0].Absent).To(BeTrue())
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := tt.world()
			w.deploy("prod-1", 1, "1.0.0", healthy, t0)
			tt.setup(w)
			got, _, v := w.reconcile(t0)
			g.Expect(got).To(Equal(tt.want))
			if tt.check != nil {
				tt.check(g, w, v)
			}
		})
	}
}
