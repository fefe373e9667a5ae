package pipeline

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

func labeled(name string, lbls map[string]string) *tugboatv1alpha1.Spoke {
	sp := readySpoke(name)
	sp.Labels = lbls
	return sp
}

var production = map[string]string{"env": "production"}

func TestExpandTargets(t *testing.T) {
	p := &tugboatv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "web"}, Spec: tugboatv1alpha1.PipelineSpec{Release: "web"}}
	prodSelector := &metav1.LabelSelector{MatchLabels: production}
	hr := &tugboatv1alpha1.ObjectReference{Name: "web-hr"}
	fleet := []*tugboatv1alpha1.Spoke{
		labeled("prod-us", production), nil, labeled("prod-eu", production),
		labeled("staging-1", map[string]string{"env": "staging"}), labeled("prod-ap", map[string]string{"env": "production", "tier": "canary"}),
	}
	type want struct{ spoke, release, selector string }
	cases := []struct {
		name      string
		targets   []tugboatv1alpha1.Target
		spokes    []*tugboatv1alpha1.Spoke
		want      []want
		unmatched []string
		err       string
	}{{
		name:    "named spokes stay as written, in spec order",
		targets: []tugboatv1alpha1.Target{{Spoke: "b", Namespace: "apps"}, {Spoke: "a", Namespace: "apps", Release: "api"}},
		want:    []want{{"b", "web", ""}, {"a", "api", ""}},
	}, {
		name:    "a selector expands to every matching Spoke, sorted by name, skipping the others",
		targets: []tugboatv1alpha1.Target{{SpokeSelector: prodSelector, Namespace: "apps", HelmRelease: hr}},
		spokes:  fleet,
		want:    []want{{"prod-ap", "web", "env=production"}, {"prod-eu", "web", "env=production"}, {"prod-us", "web", "env=production"}},
	}, {
		name: "matchExpressions select too",
		targets: []tugboatv1alpha1.Target{{Namespace: "apps", SpokeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpExists},
		}}}},
		spokes: fleet,
		want:   []want{{"prod-ap", "web", "tier"}},
	}, {
		name:      "a selector matching no Spoke is reported, the named targets stay",
		targets:   []tugboatv1alpha1.Target{{Spoke: "edge", Namespace: "apps"}, {SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "qa"}}, Namespace: "apps"}},
		spokes:    fleet,
		want:      []want{{"edge", "web", ""}},
		unmatched: []string{"env=qa"},
	}, {
		name:      "no Spokes at all: unmatched",
		targets:   []tugboatv1alpha1.Target{{SpokeSelector: prodSelector, Namespace: "apps"}},
		unmatched: []string{"env=production"},
	}, {
		name:    "a release both named and selected, or selected twice, counts once (first)",
		targets: []tugboatv1alpha1.Target{{Spoke: "prod-eu", Namespace: "apps"}, {SpokeSelector: prodSelector, Namespace: "apps"}, {SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}, Namespace: "apps"}},
		spokes:  fleet,
		want:    []want{{"prod-eu", "web", ""}, {"prod-ap", "web", "env=production"}, {"prod-us", "web", "env=production"}},
	}, {
		name:    "the same Spoke in another namespace or release is another target",
		targets: []tugboatv1alpha1.Target{{SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}, Namespace: "apps"}, {SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}, Namespace: "apps", Release: "api"}},
		spokes:  fleet,
		want:    []want{{"prod-ap", "web", "tier=canary"}, {"prod-ap", "api", "tier=canary"}},
	}, {
		name: "an invalid selector is an error naming the target",
		targets: []tugboatv1alpha1.Target{{Spoke: "a", Namespace: "apps"}, {Namespace: "apps", SpokeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: "Like", Values: []string{"prod"}},
		}}}},
		spokes: fleet,
		err:    "environment production, targets[1].spokeSelector",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := &tugboatv1alpha1.Environment{Name: "production", Targets: tc.targets}
			res, err := ExpandTargets(p, env, tc.spokes)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			var got []want
			for _, rt := range res.Targets {
				g.Expect(rt.Spoke).NotTo(BeEmpty())
				g.Expect(rt.SpokeSelector).To(BeNil(), "a resolved target names its spoke")
				g.Expect(rt.Namespace).To(Equal("apps"))
				got = append(got, want{rt.Spoke, ReleaseOf(p, &rt.Target), rt.Selector})
				if tc.targets[0].HelmRelease != nil {
					g.Expect(rt.HelmRelease).To(Equal(hr), "helmRelease keeps its meaning on every selected spoke")
				}
			}
			g.Expect(got).To(Equal(tc.want))
			g.Expect(res.Unmatched).To(Equal(tc.unmatched))
		})
	}

	t.Run("more than MaxTargets targets is an error", func(t *testing.T) {
		g := NewWithT(t)
		var many []*tugboatv1alpha1.Spoke
		for i := 0; i <= MaxTargets; i++ {
			many = append(many, labeled(fmt.Sprintf("prod-%04d", i), production))
		}
		env := &tugboatv1alpha1.Environment{Name: "production", Targets: []tugboatv1alpha1.Target{{SpokeSelector: prodSelector, Namespace: "apps"}}}
		_, err := ExpandTargets(p, env, many)
		g.Expect(err).To(MatchError(ContainSubstring("has 5001 targets once its spokeSelectors are expanded; at most 5000")))
	})
}

// selectorWorld is dev-1 → staging-1 → production, production selecting
// the Spokes labeled env=production: prod-a and prod-b.
func selectorWorld() *world {
	w := newWorld(map[string][]string{"dev": {"dev-1"}, "staging": {"staging-1"}})
	w.env("production").Targets = []tugboatv1alpha1.Target{{SpokeSelector: &metav1.LabelSelector{MatchLabels: production}, Namespace: "apps"}}
	w.f.spokes["prod-a"] = labeled("prod-a", production)
	w.f.spokes["prod-b"] = labeled("prod-b", production)
	w.f.spokes["lab-1"] = labeled("lab-1", map[string]string{"env": "lab"})
	return w
}

func targetsOf(p *tugboatv1alpha1.Pipeline, env string) []string {
	var out []string
	for _, es := range p.Status.Environments {
		if es.Name != env {
			continue
		}
		for _, ts := range es.Targets {
			out = append(out, ts.Spoke+"@"+ts.Version+" "+ts.Selector)
		}
	}
	return out
}

func TestRules_spokeSelector(t *testing.T) {
	t.Run("a selected environment is promoted into; status names each spoke and the selector", func(t *testing.T) {
		g := NewWithT(t)
		w := selectorWorld()
		w.deploy("staging-1", 2, "1.1.0", healthy, t0)
		w.deploy("prod-a", 1, "1.0.0", healthy, t0)
		w.deploy("prod-b", 1, "1.0.0", healthy, t0)
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(ConsistOf("production@1.1.0"))
		g.Expect(targetsOf(w.p, "production")).To(Equal([]string{"prod-a@1.0.0 env=production", "prod-b@1.0.0 env=production"}))
		g.Expect(targetsOf(w.p, "staging")).To(Equal([]string{"staging-1@1.1.0 "}))
	})

	t.Run("a selector matching no spoke: the environment waits, and Ready says why", func(t *testing.T) {
		g := NewWithT(t)
		w := selectorWorld()
		delete(w.f.spokes, "prod-a")
		w.f.spokes["prod-b"].Labels = map[string]string{"env": "staging"}
		w.deploy("staging-1", 2, "1.1.0", healthy, t0)
		got, _, v := w.reconcile(t0)
		g.Expect(got).To(BeEmpty())
		g.Expect(targetsOf(w.p, "production")).To(BeEmpty())
		ready := w.ready()
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("environment production: spokeSelector env=production matches no spoke in namespace fleet"))
		g.Expect(v.envs[2].notReady).To(ContainElement("spokeSelector env=production matches no spoke"))

		// A named target next to it does not let the environment go ahead.
		w.env("production").Targets = append(w.env("production").Targets, tugboatv1alpha1.Target{Spoke: "lab-1", Namespace: "apps"})
		w.deploy("lab-1", 1, "1.0.0", healthy, t0)
		got, _, _ = w.reconcile(t0)
		g.Expect(got).To(BeEmpty(), "not promoted into while a selector matches nothing")

		// As a source, it does not converge either.
		w = selectorWorld()
		w.env("staging").Targets = []tugboatv1alpha1.Target{{Spoke: "staging-1", Namespace: "apps"}, {SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "qa"}}, Namespace: "apps"}}
		w.deploy("staging-1", 2, "1.1.0", healthy, t0)
		w.deploy("prod-a", 1, "1.0.0", healthy, t0)
		w.deploy("prod-b", 1, "1.0.0", healthy, t0)
		got, _, _ = w.reconcile(t0)
		g.Expect(got).To(BeEmpty(), "not promoted out of while a selector matches nothing")
	})

	t.Run("a selected source converges only when every selected spoke runs the version", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(map[string][]string{"production": {"dr-1"}})
		w.env("staging").Targets = []tugboatv1alpha1.Target{{SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "staging"}}, Namespace: "apps"}}
		w.env("dev").Targets = []tugboatv1alpha1.Target{{Spoke: "dev-1", Namespace: "apps"}}
		w.f.spokes["dev-1"] = readySpoke("dev-1")
		w.f.spokes["stg-a"] = labeled("stg-a", map[string]string{"env": "staging"})
		w.f.spokes["stg-b"] = labeled("stg-b", map[string]string{"env": "staging"})
		w.deploy("dev-1", 1, "1.0.0", healthy, t0)
		w.deploy("stg-a", 2, "1.1.0", healthy, t0)
		w.deploy("stg-b", 1, "1.0.0", healthy, t0)
		w.deploy("dr-1", 1, "1.0.0", healthy, t0)
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(BeEmpty())
		w.deploy("stg-b", 2, "1.1.0", healthy, t0)
		got, _, _ = w.reconcile(t0)
		g.Expect(got).To(ConsistOf("production@1.1.0"))
	})

	t.Run("a spoke that joins later is reached by the next promotion; one that leaves is dropped", func(t *testing.T) {
		g := NewWithT(t)
		w := selectorWorld()
		w.deploy("staging-1", 2, "1.1.0", healthy, t0)
		w.deploy("prod-a", 2, "1.1.0", healthy, t0)
		w.deploy("prod-b", 2, "1.1.0", healthy, t0)
		w.promotion("production", "1.1.0", tugboatv1alpha1.PromotionSucceeded)
		got, _, _ := w.reconcile(t0)
		g.Expect(got).To(BeEmpty())

		// prod-c is labeled env=production (no Pipeline edit) and runs 1.0.0.
		w.f.spokes["prod-c"] = labeled("prod-c", production)
		w.deploy("prod-c", 1, "1.0.0", healthy, t0)
		got, _, v := w.reconcile(t0)
		g.Expect(targetsOf(w.p, "production")).To(Equal([]string{"prod-a@1.1.0 env=production", "prod-b@1.1.0 env=production", "prod-c@1.0.0 env=production"}))
		g.Expect(v.envs[2].converged).To(BeFalse(), "the joiner runs another version")
		g.Expect(got).To(BeEmpty(), "1.1.0 was promoted into production once already")

		// The next version reaches every selected spoke, the joiner included.
		w.deploy("staging-1", 3, "1.2.0", healthy, t0)
		got, _, _ = w.reconcile(t0)
		g.Expect(got).To(ConsistOf("production@1.2.0"))

		// prod-a loses its label: it leaves the environment.
		w.f.spokes["prod-a"].Labels = nil
		w.reconcile(t0)
		g.Expect(targetsOf(w.p, "production")).To(Equal([]string{"prod-b@1.1.0 env=production", "prod-c@1.0.0 env=production"}))
	})
}
