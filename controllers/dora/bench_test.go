package dora_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/dora"
	. "tugboat.dev/tugboat/controllers/dora/doratest"
)

// BenchmarkCompute measures the figures of a large Pipeline: three
// environments of 100 targets each (the most a Pipeline's environment
// holds after selector expansion), 20 revisions per release (the most a
// ReleaseHistory keeps), and 100 Promotions.
func BenchmarkCompute(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	var envs []Env
	var histories []tugboatv1alpha1.ReleaseHistory
	for _, name := range []string{"dev", "staging", "production"} {
		var spokes []string
		for i := range 100 {
			s := fmt.Sprintf("%s-%d", name, i)
			spokes = append(spokes, s)
			histories = append(histories, randomHistory(r, s, 20))
		}
		envs = append(envs, E(name, spokes...))
	}
	p := Pipeline("fleet", "web", envs...)
	var promotions []tugboatv1alpha1.Promotion
	for i := range 100 {
		promotions = append(promotions, Promotion("fleet", "web", "staging", "production", fmt.Sprintf("1.%d.0", i), tugboatv1alpha1.PromotionFailed, ago(Day)))
	}
	in := dora.Input{Pipeline: p, Histories: histories, Promotions: promotions, Now: now}
	b.ReportAllocs()
	for b.Loop() {
		dora.Compute(in)
	}
}
