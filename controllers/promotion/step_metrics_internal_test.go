package promotion

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/e2e/promtest"
)

// TestMeasure_judgesEachShapeOfResult runs queries of every result shape
// against a real Prometheus scraping a gauge at 0.001: a single sample and
// a scalar are values, judged by the condition; no series, several, NaN,
// a range vector and a query Prometheus refuses are failed measurements
// that say why.
func TestMeasure_judgesEachShapeOfResult(t *testing.T) {
	g := NewWithT(t)
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "web_error_rate", Help: "Share of requests that failed."})
	gauge.Set(0.001)
	prom := promtest.Start(t, promtest.Target(t, gauge))
	g.Eventually(func() (string, error) { return prom.Query(context.Background(), "web_error_rate") }).
		WithTimeout(30 * time.Second).Should(Equal("0.001"))
	c, err := promapi.NewClient(promapi.Config{Address: prom.URL, Client: egress.Policy{AllowLoopback: true}.Client(10 * time.Second)})
	g.Expect(err).NotTo(HaveOccurred())
	api := promv1.NewAPI(c)
	r := &Reconciler{Now: time.Now}
	lt := tugboatv1alpha1.MetricCondition{Operator: tugboatv1alpha1.MetricLessThan, Threshold: "0.01"}
	gt := tugboatv1alpha1.MetricCondition{Operator: tugboatv1alpha1.MetricGreaterThan, Threshold: "1e-2"}
	for _, tc := range []struct {
		query string
		cond  tugboatv1alpha1.MetricCondition
		want  string
	}{
		{"web_error_rate", lt, "0.001 true "},
		{"web_error_rate", gt, "0.001 false "},
		{"scalar(web_error_rate)", lt, "0.001 true "},
		{`web_error_rate{job="elsewhere"}`, lt, " false the query returned no series"},
		{`web_error_rate or label_replace(web_error_rate, "copy", "1", "", "")`, lt, " false the query returned 2 series, not one: aggregate them (e.g. with sum())"},
		{"web_error_rate * 0 / 0", lt, "NaN false the query returned NaN"},
		{"web_error_rate[1m]", lt, " false the query returned a matrix, not a scalar or one sample"},
		{"sum(", lt, " false querying Prometheus " + prom.URL + ": bad_data: invalid parameter \"query\": 1:5: parse error: unclosed left parenthesis"},
	} {
		cfg := &tugboatv1alpha1.MetricsStep{Query: tc.query, SuccessCondition: tc.cond}
		m := r.measure(context.Background(), api, prom.URL, cfg, 10*time.Second)
		g.Expect(fmt.Sprintf("%s %t %s", m.Value, m.Passed, m.Message)).To(Equal(tc.want), "query %s", tc.query)
		g.Expect(time.Since(m.At.Time)).To(BeNumerically("<", time.Minute))
	}
}

// TestCompare_appliesEachOperator: "value operator threshold" for each
// operator, at, below and above the threshold.
func TestCompare_appliesEachOperator(t *testing.T) {
	g := NewWithT(t)
	want := map[tugboatv1alpha1.MetricOperator][3]bool{ // below, at, above
		tugboatv1alpha1.MetricLessThan:           {true, false, false},
		tugboatv1alpha1.MetricLessThanOrEqual:    {true, true, false},
		tugboatv1alpha1.MetricGreaterThan:        {false, false, true},
		tugboatv1alpha1.MetricGreaterThanOrEqual: {false, true, true},
		tugboatv1alpha1.MetricEqual:              {false, true, false},
		tugboatv1alpha1.MetricNotEqual:           {true, false, true},
	}
	for op, w := range want {
		for i, v := range []float64{0.5, 1, 2} {
			ok, err := compare(v, tugboatv1alpha1.MetricCondition{Operator: op, Threshold: "1.0"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(Equal(w[i]), "%g %s 1.0", v, op)
		}
	}
	_, err := compare(1, tugboatv1alpha1.MetricCondition{Operator: "Between", Threshold: "1"})
	g.Expect(err).To(MatchError(`unknown operator "Between"`))
	_, err = compare(1, tugboatv1alpha1.MetricCondition{Operator: tugboatv1alpha1.MetricEqual, Threshold: "one"})
	g.Expect(err).To(MatchError(`threshold "one" is not a number`))
}

// TestMetricsAttempt_waitsForTheNextMeasurementAndTimesOut: between
// measurements an attempt only says when the next is due (no query, no
// Secret read); past its timeout, or when the next measurement would fall
// after it, it times out saying how far it got. The timeout defaults to
// interval × count + 1m.
func TestMetricsAttempt_waitsForTheNextMeasurementAndTimesOut(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	r := &Reconciler{Now: func() time.Time { return now }} // no APIReader: a read would panic
	spec := &tugboatv1alpha1.Step{Name: "errors", Type: tugboatv1alpha1.StepMetrics, Metrics: &tugboatv1alpha1.MetricsStep{
		Query: "web_error_rate", Interval: &metav1.Duration{Duration: time.Minute}, Count: 3, FailureLimit: 1,
		SuccessCondition: tugboatv1alpha1.MetricCondition{Operator: tugboatv1alpha1.MetricLessThan, Threshold: "0.01"},
	}}
	status := func(started time.Duration, last time.Duration) *tugboatv1alpha1.StepStatus {
		at := metav1.NewTime(now.Add(-started))
		return &tugboatv1alpha1.StepStatus{Name: "errors", Type: tugboatv1alpha1.StepMetrics, Phase: tugboatv1alpha1.StepRunning, Attempts: 1, StartedAt: &at,
			Metrics: &tugboatv1alpha1.MetricsStepStatus{Taken: 1, Failed: 1, Measurements: []tugboatv1alpha1.Measurement{
				{At: metav1.NewMicroTime(now.Add(-last)), Value: "0.5"}}}}
	}

	out, err := r.metricsAttempt(context.Background(), &tugboatv1alpha1.Promotion{}, spec, status(20*time.Second, 20*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(attemptResult{requeue: 40 * time.Second,
		wait: "1 of 3 measurements taken, 1 failed (failure limit 1); last: 0.5, not LessThan 0.01; next at 2026-11-28T10:00:40Z"}))

	// The default timeout is 3 × 1m + 1m: at 4m it is up.
	out, err = r.metricsAttempt(context.Background(), &tugboatv1alpha1.Promotion{}, spec, status(4*time.Minute, 3*time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(attemptResult{done: true, timedOut: true, message: "timed out after 4m0s with 1 of 3 measurements taken, 1 failed"}))

	// A timeout of 150s, 100s after the start: the next measurement, due
	// 55s from now, would fall after it.
	spec.Timeout = &metav1.Duration{Duration: 150 * time.Second}
	out, err = r.metricsAttempt(context.Background(), &tugboatv1alpha1.Promotion{}, spec, status(100*time.Second, 5*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(attemptResult{done: true, timedOut: true, message: "timed out after 2m30s with 1 of 3 measurements taken, 1 failed"}))
}
