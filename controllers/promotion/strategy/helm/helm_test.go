package helm_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/helm"
)

func request(cfg *tugboatv1alpha1.HelmStrategy, targets ...strategy.Target) strategy.Request {
	return strategy.Request{
		Version:  "1.2.0",
		Strategy: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm, Helm: cfg},
		Targets:  targets,
	}
}

var (
	plain = strategy.Target{SpokeName: "staging", Namespace: "apps", Release: "web"}
	flux  = strategy.Target{SpokeName: "production", Namespace: "apps", Release: "web",
		HelmRelease: &tugboatv1alpha1.ObjectReference{Namespace: "apps", Name: "web"}}
)

func TestStrategy_queuesAnActionPerTarget(t *testing.T) {
	g := NewWithT(t)
	res, err := helm.New().Promote(context.Background(), request(&tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com"}, plain, flux))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(Equal("queued an action for 2 targets"))

	res, err = helm.New().Promote(context.Background(), request(nil, flux))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(Equal("queued an action for 1 target"))
}

func TestStrategy_rejectsBadConfigurationTerminally(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  *tugboatv1alpha1.HelmStrategy
		want string
	}{
		"no repository for a plain release": {nil, "target staging/apps/web: promotion.helm.repository: required"},
		"ftp repository":                    {&tugboatv1alpha1.HelmStrategy{Repository: "ftp://charts"}, "promotion.helm.repository: must start with http://, https:// or oci://"},
		"oci without a chart":               {&tugboatv1alpha1.HelmStrategy{Repository: "oci://registry"}, "promotion.helm.repository: \"oci://registry\" names no chart"},
		"unknown values policy":             {&tugboatv1alpha1.HelmStrategy{Repository: "https://c", ValuesPolicy: "merge"}, "promotion.helm.valuesPolicy: must be reuse or reset-then-reuse"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := helm.New().Promote(context.Background(), request(tc.cfg, plain))
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(strategy.IsTerminal(err)).To(BeTrue())
		})
	}
}

func TestChartSource_defaults(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg     *tugboatv1alpha1.HelmStrategy
		release string
		hr      bool
		want    wire.ChartSource
	}{
		"http, chart defaults to the release": {&tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com"}, "web", false, wire.ChartSource{Repository: "https://charts.example.com", Name: "web"}},
		"http with chart":                     {&tugboatv1alpha1.HelmStrategy{Repository: "http://charts", Chart: "podinfo"}, "web", false, wire.ChartSource{Repository: "http://charts", Name: "podinfo"}},
		"oci full reference":                  {&tugboatv1alpha1.HelmStrategy{Repository: "oci://ghcr.io/acme/charts/web/"}, "app", false, wire.ChartSource{Repository: "oci://ghcr.io/acme/charts", Name: "web"}},
		"oci prefix and chart":                {&tugboatv1alpha1.HelmStrategy{Repository: "oci://ghcr.io/acme", Chart: "web"}, "app", false, wire.ChartSource{Repository: "oci://ghcr.io/acme", Name: "web"}},
		"helmRelease without repository":      {nil, "web", true, wire.ChartSource{Name: "web"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := helm.ChartSource(tc.cfg, tc.release, tc.hr)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestValuesPolicy(t *testing.T) {
	g := NewWithT(t)
	g.Expect(helm.ValuesPolicy(nil)).To(Equal(wire.ValuesReuse))
	g.Expect(helm.ValuesPolicy(&tugboatv1alpha1.HelmStrategy{ValuesPolicy: tugboatv1alpha1.ValuesPolicyResetThenReuse})).To(Equal(wire.ValuesResetThenReuse))
}
