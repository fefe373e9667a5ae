//go:build !agentonly

package app_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
)

// TestDiff_onDemandBadInput is the bad-input table of `tugboat diff
// PIPELINE --from ENV --to ENV`: each row fails with a clear error and its
// exit code, and leaves no preview behind but the one the hub answered
// with why it cannot preview (no version runs in from).
func TestDiff_onDemandBadInput(t *testing.T) {
	ns := newNamespace(t)
	newPipeline(t, ns, "web") // the notification strategy
	svc := newPipeline(t, ns, "svc")
	svc.Spec.Promotion = tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyHelm,
		Helm: &tugboatv1alpha1.HelmStrategy{Repository: "https://charts.example.com", Chart: "svc"}}
	if err := cluster.Client.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	hubtest.Start(t, cluster.RESTConfig, hubtest.Options())

	rows := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"--from without --to", []string{"svc", "--from", "staging"}, app.ExitUsage, "--from and --to go together"},
		{"--to without --from", []string{"svc", "--to", "production"}, app.ExitUsage, "--from and --to go together"},
		{"the same environment", []string{"svc", "--from", "staging", "--to", "staging"}, app.ExitUsage, `name the same environment "staging"`},
		{"no time to wait", []string{"svc", "--from", "staging", "--to", "production", "--timeout", "0s"}, app.ExitUsage, "--timeout must be positive"},
		{"an unknown pipeline", []string{"nope", "--from", "staging", "--to", "production"}, app.ExitNotFound, "pipeline nope not found in namespace " + ns},
		{"an unknown environment", []string{"svc", "--from", "qa", "--to", "production"}, app.ExitUsage,
			`pipeline svc has no environment "qa" (it has dev, staging, production)`},
		{"not the helm strategy", []string{"web", "--from", "staging", "--to", "production"}, app.ExitUsage,
			"production is promoted by the notification strategy: previews are computed for the helm strategy"},
		{"no version runs in from", []string{"svc", "--from", "staging", "--to", "production", "--timeout", "30s"}, app.ExitError,
			"the hub cannot preview svc from staging into production: no version runs in staging: none of its targets reported a release yet"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			g := NewWithT(t)
			out, _, err := tugboat(append([]string{"diff", "-n", ns}, row.args...)...)
			g.Expect(err).To(HaveOccurred(), out)
			g.Expect(err.Error()).To(ContainSubstring(row.want))
			g.Expect(app.ExitCode(err)).To(Equal(row.code))
			g.Expect(out).To(BeEmpty())
		})
	}
	g := NewWithT(t)
	var list tugboatv1alpha1.PromotionPreviewList
	g.Expect(cluster.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "only the one the hub answered")
	g.Expect(list.Items[0].Spec).To(Equal(tugboatv1alpha1.PromotionPreviewSpec{Pipeline: "svc", From: "staging", To: "production"}))
	g.Expect(list.Items[0].CreationTimestamp.Time).To(BeTemporally("<=", metav1.Now().Time))
}
