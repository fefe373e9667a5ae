//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion"
)

// onDemandFlags are the flags of `tugboat diff PIPELINE --from --to`.
type onDemandFlags struct {
	from, to string
	timeout  time.Duration
}

func (f *onDemandFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.from, "from", "", "preview on demand: the environment whose running version is previewed (with --to; the argument is then a pipeline)")
	cmd.Flags().StringVar(&f.to, "to", "", "preview on demand: the environment the version would be promoted into (with --from)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 3*time.Minute, "preview on demand: how long to wait for the hub and the agents' answers")
}

// on reports whether the flags ask for an on-demand preview.
func (f *onDemandFlags) on() bool { return f.from != "" || f.to != "" }

func (f *onDemandFlags) validate() error {
	switch {
	case !f.on():
		return nil
	case f.from == "" || f.to == "":
		return usageErrorf("--from and --to go together: tugboat diff PIPELINE --from ENV --to ENV")
	case f.from == f.to:
		return usageErrorf("--from and --to name the same environment %q: a preview shows what promoting one environment's version into another would change", f.from)
	case f.timeout <= 0:
		return usageErrorf("--timeout must be positive, not %s", f.timeout)
	}
	return nil
}

// run asks the hub for an on-demand preview of pipeline name from f.from to
// f.to, waits until the agents answered (or the hub's deadline or
// f.timeout passed), and returns what to print.
func (f *onDemandFlags) run(ctx context.Context, s *hubSession, name string, progress io.Writer) (diffView, error) {
	v := diffView{Namespace: s.namespace, Pipeline: name, From: f.from, To: f.to}
	p := &tugboatv1alpha1.Pipeline{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return v, notFoundErrorf("pipeline %s not found in namespace %s", name, s.namespace)
		}
		return v, fmt.Errorf("reading pipeline %s/%s: %w", s.namespace, name, err)
	}
	for _, env := range []string{f.from, f.to} {
		if pipeline.EnvironmentIndex(p, env) < 0 {
			return v, usageErrorf("pipeline %s has no environment %q (it has %s)", name, env, environmentNames(p))
		}
	}
	if st := pipeline.StrategyFor(p, &p.Spec.Environments[pipeline.EnvironmentIndex(p, f.to)]); st.Type != tugboatv1alpha1.StrategyHelm {
		return v, usageErrorf("%s is promoted by the %s strategy: previews are computed for the helm strategy, whose agents carry out the promotion", f.to, st.Type)
	}
	pp := &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, GenerateName: clip.String(name+"-"+f.to+"-", 200)},
		Spec:       tugboatv1alpha1.PromotionPreviewSpec{Pipeline: name, From: f.from, To: f.to},
	}
	if err := s.client.Create(ctx, pp); err != nil {
		return v, fmt.Errorf("asking the hub for a preview of %s from %s into %s: %w", name, f.from, f.to, err)
	}
	v.PreviewName = pp.Name
	fmt.Fprintf(progress, "Asked the hub for promotionpreview %s/%s; waiting for the agents (at most %s) ...\n", s.namespace, pp.Name, f.timeout)
	key := types.NamespacedName{Namespace: s.namespace, Name: pp.Name}
	var sum *tugboatv1alpha1.PreviewSummary
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, f.timeout, true, func(ctx context.Context) (bool, error) {
		if err := s.client.Get(ctx, key, pp); err != nil {
			return false, fmt.Errorf("reading the preview %s: %w", key, err)
		}
		if pp.Status.Failure != "" {
			return true, nil
		}
		if len(pp.Spec.Targets) == 0 {
			return false, nil
		}
		sum = promotion.Summarize(pp, time.Now())
		return sum.Phase != tugboatv1alpha1.PreviewPending, nil
	})
	switch {
	case pp.Status.Failure != "":
		return v, fmt.Errorf("the hub cannot preview %s from %s into %s: %s", name, f.from, f.to, pp.Status.Failure)
	case err != nil && len(pp.Spec.Targets) == 0:
		return v, fmt.Errorf("the hub did not take up promotionpreview %s within %s (is the hub running?): %w", key, f.timeout, err)
	case err != nil:
		return v, fmt.Errorf("the agents did not answer promotionpreview %s within %s (tugboat diff ... --timeout, or kubectl get promotionpreview %s -n %s -o yaml later): %w",
			key, f.timeout, pp.Name, s.namespace, err)
	}
	v.Version, v.Preview = pp.Spec.Version, sum
	v.TotalTargets, v.Groups, v.OtherChanges = pp.Spec.TotalTargets, pp.Status.Groups, pp.Status.OtherChanges
	return v, nil
}

// environmentNames lists p's environments for an error message.
func environmentNames(p *tugboatv1alpha1.Pipeline) string {
	out := ""
	for i, e := range p.Spec.Environments {
		if i > 0 {
			out += ", "
		}
		out += e.Name
	}
	return out
}
