package pipeline

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// MaxTargets bounds an environment's targets once its spokeSelectors are
// expanded. A Promotion keeps one PromotionTarget per target and bounded
// counts in its status, and a Pipeline's status lists at most
// MaxTargetStatuses of them, so no object grows with it.
const MaxTargets = 5000

// ResolvedTarget is one concrete target: a release on one Spoke. Its
// Target has Spoke set and no SpokeSelector, so ReleaseOf and HistoryName
// apply to it as to a target that names its spoke.
type ResolvedTarget struct {
	tugboatv1alpha1.Target
	// Selector is the spokeSelector that selected the Spoke, as kubectl
	// writes a label selector ("env=production"); "" for a named spoke.
	Selector string
}

// Resolution is an environment's targets expanded over the Spokes of the
// Pipeline's namespace.
type Resolution struct {
	// Targets in spec order; a selector's Spokes sorted by name. A release
	// both named and selected, or selected twice, is listed once (first).
	Targets []ResolvedTarget
	// Unmatched are the selectors (as text) that match no Spoke: the
	// environment waits while there is one.
	Unmatched []string
}

// ExpandTargets expands env's targets over spokes, the Spokes of the
// Pipeline's namespace (in any order; nil entries are skipped). It reads
// nothing but its arguments. An invalid selector, or more than MaxTargets
// targets, is an error.
func ExpandTargets(p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, spokes []*tugboatv1alpha1.Spoke) (Resolution, error) {
	var sorted []*tugboatv1alpha1.Spoke
	for _, sp := range spokes {
		if sp != nil {
			sorted = append(sorted, sp)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var res Resolution
	seen := map[string]bool{}
	add := func(t tugboatv1alpha1.Target, selector string) {
		key := HistoryName(p, &t)
		if seen[key] {
			return
		}
		seen[key] = true
		res.Targets = append(res.Targets, ResolvedTarget{Target: t, Selector: selector})
	}
	for i := range env.Targets {
		t := env.Targets[i]
		if t.SpokeSelector == nil {
			add(t, "")
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(t.SpokeSelector)
		if err != nil {
			return Resolution{}, fmt.Errorf("environment %s, targets[%d].spokeSelector: %w", env.Name, i, err)
		}
		text := sel.String()
		matched := false
		for _, sp := range sorted {
			if !sel.Matches(labels.Set(sp.Labels)) {
				continue
			}
			matched = true
			c := t
			c.Spoke, c.SpokeSelector = sp.Name, nil
			add(c, text)
		}
		if !matched {
			res.Unmatched = append(res.Unmatched, text)
		}
	}
	if len(res.Targets) > MaxTargets {
		return Resolution{}, fmt.Errorf("environment %s has %d targets once its spokeSelectors are expanded; at most %d", env.Name, len(res.Targets), MaxTargets)
	}
	return res, nil
}

// hasSelector reports whether any target of p selects its spokes by label.
func hasSelector(p *tugboatv1alpha1.Pipeline) bool {
	for i := range p.Spec.Environments {
		for j := range p.Spec.Environments[i].Targets {
			if p.Spec.Environments[i].Targets[j].SpokeSelector != nil {
				return true
			}
		}
	}
	return false
}

// listSpokes lists the Spokes of p's namespace when a target of p selects
// spokes by label, else returns nil: a Pipeline that names its spokes
// reads only those.
func listSpokes(ctx context.Context, c client.Reader, p *tugboatv1alpha1.Pipeline) ([]*tugboatv1alpha1.Spoke, error) {
	if !hasSelector(p) {
		return nil, nil
	}
	var list tugboatv1alpha1.SpokeList
	if err := c.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
		return nil, fmt.Errorf("listing spokes: %w", err)
	}
	spokes := make([]*tugboatv1alpha1.Spoke, len(list.Items))
	for i := range list.Items {
		spokes[i] = &list.Items[i]
	}
	return spokes, nil
}

// ResolveTargets returns env's concrete targets: its named spokes, and the
// Spokes of the Pipeline's namespace its spokeSelectors match now (read
// through c, the cache). The Pipeline and Promotion controllers and the
// helm strategy's action channel all resolve targets here.
func ResolveTargets(ctx context.Context, c client.Reader, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (Resolution, error) {
	spokes, err := listSpokes(ctx, c, p)
	if err != nil {
		return Resolution{}, err
	}
	return ExpandTargets(p, env, spokes)
}

// selectorKey is the TargetIndex value of a selector target: the release
// it stands for on every Spoke (a ReleaseHistory name never holds ':').
func selectorKey(namespace, release string) string {
	return "selector:" + namespace + "/" + release
}

// selectorIndexValue is the SpokeIndex value of a Pipeline with a
// spokeSelector target (a Spoke's name is lower case, so none has it).
const selectorIndexValue = "spokeSelector"

// selects reports whether a spokeSelector target of p, in any
// environment, matches a Spoke labeled lbls, and (when release is not
// nil) stands for the release release (namespace, name).
func selects(p *tugboatv1alpha1.Pipeline, lbls map[string]string, release *[2]string) bool {
	for i := range p.Spec.Environments {
		for j := range p.Spec.Environments[i].Targets {
			t := &p.Spec.Environments[i].Targets[j]
			if t.SpokeSelector == nil {
				continue
			}
			if release != nil && (t.Namespace != release[0] || ReleaseOf(p, t) != release[1]) {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(t.SpokeSelector)
			if err == nil && sel.Matches(labels.Set(lbls)) {
				return true
			}
		}
	}
	return false
}

// TargetOf finds the environment of p one of whose targets, resolved
// through c (ResolveTargets), is the release (namespace, release) on spoke,
// and that target; "" and nil when none is.
func TargetOf(ctx context.Context, c client.Reader, p *tugboatv1alpha1.Pipeline, spoke, namespace, release string) (string, *ResolvedTarget, error) {
	spokes, err := listSpokes(ctx, c, p)
	if err != nil {
		return "", nil, err
	}
	for i := range p.Spec.Environments {
		env := &p.Spec.Environments[i]
		res, err := ExpandTargets(p, env, spokes)
		if err != nil {
			return "", nil, err
		}
		for j := range res.Targets {
			t := &res.Targets[j]
			if t.Spoke == spoke && t.Namespace == namespace && ReleaseOf(p, &t.Target) == release {
				return env.Name, t, nil
			}
		}
	}
	return "", nil, nil
}
