package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
)

// metricsStepsWith is a valid Pipeline whose production environment has a
// metrics post step, which mutate breaks.
func metricsStepsWith(name string, mutate func(s *tugboatv1.Step)) client.Object {
	return stepsWith(name, func(s *tugboatv1.Steps) {
		s.Post[0] = tugboatv1.Step{Name: "errors", Type: tugboatv1.StepMetrics, Metrics: &tugboatv1.MetricsStep{
			SecretRef: tugboatv1.LocalSecretReference{Name: "prometheus"},
			Query:     `sum(rate(http_requests_total{code=~"5.."}[5m])) / sum(rate(http_requests_total[5m]))`,
			Interval:  &metav1.Duration{Duration: time.Minute}, Count: 5, FailureLimit: 1,
			SuccessCondition: tugboatv1.MetricCondition{Operator: tugboatv1.MetricLessThan, Threshold: "0.01"},
		}}
		mutate(&s.Post[0])
	})
}

// testMetricsSteps is the metrics step's part of
// TestAPIValidation_lifecycleSteps: each bad input is refused naming the
// field and what is wrong; a full step round-trips, and an empty interval
// and count take their defaults; a step's measurements in a Promotion's
// status are bounded.
func testMetricsSteps(ctx context.Context, t *testing.T, c client.Client) {
	cases := []struct {
		name   string
		mutate func(s *tugboatv1.Step)
		want   []string
	}{
		{"a metrics step without its configuration", func(s *tugboatv1.Step) { s.Metrics = nil },
			[]string{"spec.environments[1].steps.post[0].metrics", "metrics is required when type is metrics, and forbidden otherwise"}},
		{"a webhook step with a metrics configuration", func(s *tugboatv1.Step) {
			s.Type, s.Webhook = tugboatv1.StepWebhook, &tugboatv1.WebhookStep{URL: "https://qa.example.com"}
		}, []string{"spec.environments[1].steps.post[0].metrics", "metrics is required when type is metrics, and forbidden otherwise"}},
		{"an empty query", func(s *tugboatv1.Step) { s.Metrics.Query = "" },
			[]string{"spec.environments[1].steps.post[0].metrics.query", "at least 1 chars long"}},
		{"a query over 4 KiB", func(s *tugboatv1.Step) { s.Metrics.Query = strings.Repeat("q", 4097) },
			[]string{"spec.environments[1].steps.post[0].metrics.query", "Too long"}},
		{"an interval under a second", func(s *tugboatv1.Step) { s.Metrics.Interval = &metav1.Duration{Duration: 500 * time.Millisecond} },
			[]string{"spec.environments[1].steps.post[0].metrics.interval", "interval must be from 1s to 1h"}},
		{"an interval over an hour", func(s *tugboatv1.Step) { s.Metrics.Interval = &metav1.Duration{Duration: 2 * time.Hour} },
			[]string{"spec.environments[1].steps.post[0].metrics.interval", "interval must be from 1s to 1h"}},
		{"a negative count", func(s *tugboatv1.Step) { s.Metrics.Count = -1 },
			[]string{"spec.environments[1].steps.post[0].metrics.count", "greater than or equal to 1"}},
		{"more than 100 measurements", func(s *tugboatv1.Step) { s.Metrics.Count = 101 },
			[]string{"spec.environments[1].steps.post[0].metrics.count", "less than or equal to 100"}},
		{"a failure limit that can never be reached", func(s *tugboatv1.Step) { s.Metrics.FailureLimit = 5 },
			[]string{"spec.environments[1].steps.post[0].metrics", "failureLimit must be less than count, or the step could never fail"}},
		{"a failure limit over a default count", func(s *tugboatv1.Step) { s.Metrics.Count, s.Metrics.FailureLimit = 0, 1 },
			[]string{"spec.environments[1].steps.post[0].metrics", "failureLimit must be less than count, or the step could never fail"}},
		{"a negative failure limit", func(s *tugboatv1.Step) { s.Metrics.FailureLimit = -1 },
			[]string{"spec.environments[1].steps.post[0].metrics.failureLimit", "greater than or equal to 0"}},
		{"an unknown operator", func(s *tugboatv1.Step) { s.Metrics.SuccessCondition.Operator = "Between" },
			[]string{"spec.environments[1].steps.post[0].metrics.successCondition.operator", `Unsupported value: "Between"`}},
		{"a threshold that is not a number", func(s *tugboatv1.Step) { s.Metrics.SuccessCondition.Threshold = "1%" },
			[]string{"spec.environments[1].steps.post[0].metrics.successCondition.threshold", "should match"}},
		{"an empty threshold", func(s *tugboatv1.Step) { s.Metrics.SuccessCondition.Threshold = "" },
			[]string{"spec.environments[1].steps.post[0].metrics.successCondition.threshold", "at least 1 chars long"}},
		{"a Secret name that is not a DNS name", func(s *tugboatv1.Step) { s.Metrics.SecretRef.Name = "Prometheus Creds" },
			[]string{"spec.environments[1].steps.post[0].metrics.secretRef.name", "should match"}},
		{"a timeout shorter than the measurements", func(s *tugboatv1.Step) { s.Timeout = &metav1.Duration{Duration: 4 * time.Minute} },
			[]string{"spec.environments[1].steps.post[0].timeout", "timeout must be longer than metrics.interval times (metrics.count - 1), or the step times out before its last measurement"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := metricsStepsWith("metrics-bad-"+string(rune('a'+i)), tc.mutate)
			err := c.Create(ctx, obj)
			if err == nil {
				_ = c.Delete(ctx, obj)
			}
			g.Expect(err).To(HaveOccurred(), "the API server accepted the object")
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}

	t.Run("round-trips a metrics step, with its defaults", func(t *testing.T) {
		g := NewWithT(t)
		p := metricsStepsWith("metrics-roundtrip", func(s *tugboatv1.Step) { s.Timeout = &metav1.Duration{Duration: 5 * time.Minute} }).(*tugboatv1.Pipeline)
		want := p.Spec.Environments[1].Steps.DeepCopy()
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })
		got := &tugboatv1.Pipeline{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Spec.Environments[1].Steps).To(Equal(want))

		d := metricsStepsWith("metrics-defaults", func(s *tugboatv1.Step) { s.Metrics.Interval, s.Metrics.Count, s.Metrics.FailureLimit = nil, 0, 0 }).(*tugboatv1.Pipeline)
		g.Expect(c.Create(ctx, d)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, d) })
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(d), got)).To(Succeed())
		m := got.Spec.Environments[1].Steps.Post[0].Metrics
		g.Expect(m.Interval).To(Equal(&metav1.Duration{Duration: time.Minute}))
		g.Expect(m.Count).To(BeEquivalentTo(1))
	})

	t.Run("bounds a step's measurements in status", func(t *testing.T) {
		g := NewWithT(t)
		p := minimalPromotion("metrics-status")
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })
		at := metav1.NewMicroTime(time.Unix(1767225600, 123456000))
		st := tugboatv1.StepStatus{Name: "errors", Stage: tugboatv1.StepStagePost, Type: tugboatv1.StepMetrics, Phase: tugboatv1.StepRunning, Attempts: 1,
			Metrics: &tugboatv1.MetricsStepStatus{Taken: 11, Failed: 1}}
		for range 11 {
			st.Metrics.Measurements = append(st.Metrics.Measurements, tugboatv1.Measurement{At: at, Value: "0.001", Passed: true})
		}
		p.Status.Steps = []tugboatv1.StepStatus{st}
		err := c.Status().Update(ctx, p)
		g.Expect(err).To(MatchError(ContainSubstring("status.steps[0].metrics.measurements: Too many: 11: must have at most 10 items")))

		st.Metrics.Measurements = st.Metrics.Measurements[:10]
		st.Metrics.Measurements[9] = tugboatv1.Measurement{At: at, Message: strings.Repeat("m", 257)}
		p.Status.Steps = []tugboatv1.StepStatus{st}
		err = c.Status().Update(ctx, p)
		g.Expect(err).To(MatchError(ContainSubstring("status.steps[0].metrics.measurements[9].message: Too long")))

		st.Metrics.Measurements[9].Message = "the query returned no series"
		p.Status.Steps = []tugboatv1.StepStatus{st}
		g.Expect(c.Status().Update(ctx, p)).To(Succeed())
		got := &tugboatv1.Promotion{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Steps[0].Metrics.Measurements[0].At.Equal(&at)).To(BeTrue(), "measurement times keep their microseconds")
	})
}
