package helm

import (
	"context"
	"fmt"
	"strings"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// Strategy is the helm strategy.
type Strategy struct{}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the helm strategy.
func New() *Strategy { return &Strategy{} }

// Promote checks promotion.helm against every target (a terminal error
// names the field) and reports the actions the agents will be offered. It
// changes nothing: the Promotion reconciler queues the actions.
func (s *Strategy) Promote(_ context.Context, req strategy.Request) (strategy.Result, error) {
	cfg := req.Strategy.Helm
	if _, err := ValuesPolicy(cfg); err != nil {
		return strategy.Result{}, strategy.Terminal(err)
	}
	for _, t := range req.Targets {
		if _, err := ChartSource(cfg, t.Release, t.HelmRelease != nil); err != nil {
			return strategy.Result{}, strategy.Terminal(fmt.Errorf("target %s/%s/%s: %w", t.SpokeName, t.Namespace, t.Release, err))
		}
	}
	n := len(req.Targets)
	noun := "targets"
	if n == 1 {
		noun = "target"
	}
	return strategy.Result{Message: fmt.Sprintf("queued an action for %d %s", n, noun)}, nil
}

// ChartSource returns where the agent of a target whose release is named
// release fetches the chart from, or an error naming the field of
// promotion.helm that is wrong.
//
//   - repository must be an http://, https:// or oci:// URL. It may be
//     empty only for a target managed by a Flux HelmRelease
//     (hasHelmRelease): the agent then only sets the HelmRelease's chart
//     version, and the chart comes from wherever the HelmRelease points.
//   - chart is the chart's name in the repository. When it is empty, an
//     oci:// repository is taken as the full reference of the chart (its
//     last path segment is the name, as in oci://registry/charts/web), and
//     otherwise the name defaults to the release's.
func ChartSource(cfg *tugboatv1alpha1.HelmStrategy, release string, hasHelmRelease bool) (wire.ChartSource, error) {
	var repo, chart string
	if cfg != nil {
		repo, chart = cfg.Repository, cfg.Chart
	}
	const prefix = "promotion.helm."
	switch {
	case repo == "" && !hasHelmRelease:
		return wire.ChartSource{}, fmt.Errorf("%srepository: required for a target without a helmRelease", prefix)
	case repo == "":
	case strings.HasPrefix(repo, "oci://"):
		rest := strings.TrimSuffix(strings.TrimPrefix(repo, "oci://"), "/")
		if rest == "" || strings.ContainsAny(rest, " \t\r\n?#") {
			return wire.ChartSource{}, fmt.Errorf("%srepository: %q is not a valid OCI reference", prefix, repo)
		}
		if chart == "" {
			i := strings.LastIndexByte(rest, '/')
			if i < 0 {
				return wire.ChartSource{}, fmt.Errorf("%srepository: %q names no chart: use oci://registry/path/chart or set chart", prefix, repo)
			}
			repo, chart = "oci://"+rest[:i], rest[i+1:]
		}
	case strings.HasPrefix(repo, "http://"), strings.HasPrefix(repo, "https://"):
		if strings.ContainsAny(repo, " \t\r\n") || len(repo) == len("https://") {
			return wire.ChartSource{}, fmt.Errorf("%srepository: %q is not a valid URL", prefix, repo)
		}
	default:
		return wire.ChartSource{}, fmt.Errorf("%srepository: must start with http://, https:// or oci://, got %q", prefix, repo)
	}
	if chart == "" {
		chart = release
	}
	if chart == "" {
		return wire.ChartSource{}, fmt.Errorf("%schart: required (there is no release name to default to)", prefix)
	}
	return wire.ChartSource{Repository: repo, Name: chart}, nil
}

// ValuesPolicy returns the wire values policy of cfg: wire.ValuesReuse
// unless reset-then-reuse is asked for.
func ValuesPolicy(cfg *tugboatv1alpha1.HelmStrategy) (string, error) {
	if cfg == nil {
		return wire.ValuesReuse, nil
	}
	switch cfg.ValuesPolicy {
	case "", tugboatv1alpha1.ValuesPolicyReuse:
		return wire.ValuesReuse, nil
	case tugboatv1alpha1.ValuesPolicyResetThenReuse:
		return wire.ValuesResetThenReuse, nil
	}
	return "", fmt.Errorf("promotion.helm.valuesPolicy: must be %s or %s, got %q",
		tugboatv1alpha1.ValuesPolicyReuse, tugboatv1alpha1.ValuesPolicyResetThenReuse, cfg.ValuesPolicy)
}
