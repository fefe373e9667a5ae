package promotion_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/e2e/promtest"
)

// errorRate is a scrape target the test controls: a real HTTP server
// exposing the gauge web_error_rate through promhttp, scraped by a real
// Prometheus (promtest, built from its module into ./bin).
type errorRate struct {
	gauge prometheus.Gauge
	prom  *promtest.Server
}

// newErrorRate serves the gauge at value and starts a Prometheus scraping
// it; it returns once the Prometheus answers value for the query.
func newErrorRate(t *testing.T, g Gomega, value float64) *errorRate {
	e := &errorRate{gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "web_error_rate", Help: "Share of requests that failed."})}
	e.gauge.Set(value)
	e.prom = promtest.Start(t, promtest.Target(t, e.gauge))
	g.Eventually(func() (string, error) { return e.prom.Query(context.Background(), "web_error_rate") }).
		WithTimeout(30*time.Second).Should(Equal(model.SampleValue(value).String()), "Prometheus scraped the target")
	return e
}

func metricsStep(name string, count, failureLimit int32, interval time.Duration) tugboatv1alpha1.Step {
	return tugboatv1alpha1.Step{Name: name, Type: tugboatv1alpha1.StepMetrics, Metrics: &tugboatv1alpha1.MetricsStep{
		SecretRef: tugboatv1alpha1.LocalSecretReference{Name: "prometheus"},
		Query:     "web_error_rate", Interval: &metav1.Duration{Duration: interval}, Count: count, FailureLimit: failureLimit,
		SuccessCondition: tugboatv1alpha1.MetricCondition{Operator: tugboatv1alpha1.MetricLessThan, Threshold: "0.01"},
	}}
}

// measurements is each measurement of the Promotion's step name as
// "value passed: message".
func (f *stepsFixture) measurements(pr, step string) []tugboatv1alpha1.Measurement {
	for _, s := range f.get(pr).Status.Steps {
		if s.Name == step && s.Metrics != nil {
			return s.Metrics.Measurements
		}
	}
	return nil
}

func values(ms []tugboatv1alpha1.Measurement) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %t%s", m.Value, m.Passed, map[bool]string{true: ": " + m.Message}[m.Message != ""]))
	}
	return out
}

// TestSteps_aMetricsStepWithAGoodValuePasses: the post step measures the
// error rate three times, a second apart, against a real Prometheus that
// scrapes a real target; every value is below 0.01, so it passes and the
// Promotion succeeds. The values and their times are in the step's status,
// one interval apart (one measurement per reconcile, none blocking).
func TestSteps_aMetricsStepWithAGoodValuePasses(t *testing.T) {
	g := NewWithT(t)
	rate := newErrorRate(t, g, 0.001)
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Post: []tugboatv1alpha1.Step{metricsStep("errors", 3, 0, time.Second)}})
	newSecret(g, f.ns, "prometheus", map[string][]byte{"address": []byte(rate.prom.URL)})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.strategyCalls).WithTimeout(30 * time.Second).Should(Equal(1))
	g.Expect(f.measurements(name, "errors")).To(BeEmpty(), "a post step waits for the targets")
	f.report("2.0.0", 2)
	g.Eventually(f.state(name)).WithTimeout(60 * time.Second).Should(Equal("Succeeded Succeeded: every target of production runs 2.0.0, healthy"))
	g.Expect(f.steps(name)()).To(Equal([]string{"errors Succeeded 1: 3 measurements taken, 0 failed (failure limit 0); last: 0.001, LessThan 0.01"}))
	ms := f.measurements(name, "errors")
	g.Expect(values(ms)).To(Equal([]string{"0.001 true", "0.001 true", "0.001 true"}))
	for i := 1; i < len(ms); i++ {
		g.Expect(ms[i].At.Sub(ms[i-1].At.Time)).To(BeNumerically(">=", 900*time.Millisecond), "measurements are an interval apart")
	}
	st := f.get(name).Status.Steps[0]
	g.Expect(st.Metrics.Taken).To(BeEquivalentTo(3))
	g.Expect(st.Metrics.Failed).To(BeZero())
}

// TestSteps_aMetricsStepWithABadValueFailsAtTheFailureLimit: the error rate
// is 0.5; the pre step tolerates one failed measurement of five, so it
// fails at the second, saying why, with both values in its status; the
// strategy never ran, and each failed measurement is a Warning Event.
func TestSteps_aMetricsStepWithABadValueFailsAtTheFailureLimit(t *testing.T) {
	g := NewWithT(t)
	rate := newErrorRate(t, g, 0.5)
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{metricsStep("errors", 5, 1, time.Second)}})
	newSecret(g, f.ns, "prometheus", map[string][]byte{"address": []byte(rate.prom.URL)})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.state(name)).WithTimeout(60 * time.Second).Should(Equal("Failed StepFailed: pre step errors (metrics) failed after 1 attempt(s): " +
		"2 of 2 measurements failed, more than the failure limit 1; last: 0.5, not LessThan 0.01"))
	g.Expect(values(f.measurements(name, "errors"))).To(Equal([]string{"0.5 false", "0.5 false"}))
	g.Expect(f.strategyCalls()).To(BeZero())
	g.Eventually(func() []string { return promotionEvents(g, f.ns, name) }).WithTimeout(30 * time.Second).Should(ContainElements(
		"Warning StepMeasurementFailed: pre step errors (metrics) measurement 1 failed (1 failed in this attempt): value 0.5",
		"Warning StepMeasurementFailed: pre step errors (metrics) measurement 2 failed (2 failed in this attempt): value 0.5",
		"Warning StepFailed: pre step errors (metrics) failed after 1 attempt(s): 2 of 2 measurements failed, more than the failure limit 1; last: 0.5, not LessThan 0.01",
	))
}

// TestSteps_aMetricsStepAgainstAnUnreachablePrometheusFails: nothing
// listens at the Secret's address: the measurement fails saying so, and
// with no failure tolerated the attempt fails; the retry (a fresh attempt,
// its first measurement an interval later) fails the same way, and so do
// the step and the Promotion. A Prometheus that accepts the connection but
// never answers fails the measurement when the step's timeout is up.
func TestSteps_aMetricsStepAgainstAnUnreachablePrometheusFails(t *testing.T) {
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())
	step := metricsStep("errors", 3, 0, 2*time.Second)
	step.Retries = 1
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{step}})
	newSecret(g, f.ns, "prometheus", map[string][]byte{"address": []byte("http://" + addr)})
	f.startHub()
	name := f.promote("2.0.0")
	refused := "querying Prometheus http://" + addr + ": dial tcp " + addr + ": connect: connection refused"
	g.Eventually(f.state(name)).WithTimeout(60 * time.Second).Should(Equal("Failed StepFailed: pre step errors (metrics) failed after 2 attempt(s): " +
		"1 of 1 measurements failed, more than the failure limit 0; last: " + refused))
	g.Expect(values(f.measurements(name, "errors"))).To(Equal([]string{" false: " + refused}), "the last attempt's measurements only")
	st := f.get(name).Status.Steps[0]
	// startedAt is to the second (rounded down): a retry that measured at
	// once would show less than a second.
	g.Expect(st.Metrics.Measurements[0].At.Sub(st.StartedAt.Time)).To(BeNumerically(">=", 2*time.Second), "the retry measured an interval after it started")
	g.Expect(f.strategyCalls()).To(BeZero())

	// A Prometheus that never answers: the query is bounded by the step's
	// timeout.
	hang := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(hang) })
	step = metricsStep("errors", 1, 0, time.Second)
	step.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	mute := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{step}})
	newSecret(g, mute.ns, "prometheus", map[string][]byte{"address": []byte(silent.URL)})
	mute.startHub()
	name = mute.promote("2.0.0")
	g.Eventually(mute.state(name)).WithTimeout(60 * time.Second).Should(MatchRegexp(`^Failed StepFailed: pre step errors \(metrics\) failed after 1 attempt\(s\): ` +
		`1 of 1 measurements failed, more than the failure limit 0; last: Prometheus ` + regexp.QuoteMeta(silent.URL) + ` did not answer within 1?\.?[0-9]+m?s$`))
}

// TestSteps_aMetricsStepObeysTheEgressPolicy: a hub that refuses loopback
// destinations (the default) fails the measurement before any request
// leaves, saying why; a Secret without an address fails the step at once,
// with no measurement taken.
func TestSteps_aMetricsStepObeysTheEgressPolicy(t *testing.T) {
	g := NewWithT(t)
	rate := newErrorRate(t, g, 0.001)
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{metricsStep("errors", 3, 0, time.Second)}})
	newSecret(g, f.ns, "prometheus", map[string][]byte{"address": []byte(rate.prom.URL)})
	f.startHub(func(o *hub.Options) { o.Egress.AllowLoopback = false })
	name := f.promote("2.0.0")
	host := strings.TrimPrefix(rate.prom.URL, "http://")
	g.Eventually(f.state(name)).WithTimeout(60 * time.Second).Should(Equal("Failed StepFailed: pre step errors (metrics) failed after 1 attempt(s): " +
		"1 of 1 measurements failed, more than the failure limit 0; last: querying Prometheus " + rate.prom.URL + ": dial tcp " + host +
		": destination 127.0.0.1 is a loopback address (the hub's --egress-allow-loopback allows it)"))
	g.Expect(f.strategyCalls()).To(BeZero())

	bad := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{metricsStep("errors", 3, 0, time.Second)}})
	newSecret(g, bad.ns, "prometheus", map[string][]byte{"url": []byte(rate.prom.URL)})
	bad.startHub()
	name = bad.promote("2.0.0")
	g.Eventually(bad.state(name)).WithTimeout(30 * time.Second).Should(Equal("Failed StepFailed: pre step errors (metrics) failed after 1 attempt(s): " +
		"metrics step: Secret " + bad.ns + "/prometheus has no key \"address\" (the Prometheus's base URL)"))
	g.Expect(bad.measurements(name, "errors")).To(BeEmpty())
}

// TestSteps_aHubRestartKeepsTheMeasurements: the hub stops after the first
// of three measurements, 3 s apart (meanwhile it writes nothing); a new hub
// goes on from the status: it takes the two others (none repeated, none
// lost) and the step passes.
func TestSteps_aHubRestartKeepsTheMeasurements(t *testing.T) {
	g := NewWithT(t)
	rate := newErrorRate(t, g, 0.001)
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{metricsStep("errors", 3, 0, 3*time.Second)}})
	newSecret(g, f.ns, "prometheus", map[string][]byte{"address": []byte(rate.prom.URL)})
	stop := f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(func() int { return len(f.measurements(name, "errors")) }).WithTimeout(30 * time.Second).Should(Equal(1))
	// Waiting for the next measurement writes nothing: the step's message
	// names when it is due, not how long until then.
	rv := f.get(name).ResourceVersion
	g.Consistently(func() string { return f.get(name).ResourceVersion }).WithTimeout(time.Second).Should(Equal(rv), "no status write while the step waits")
	stop()
	first := f.measurements(name, "errors")[0]
	f.startHub()
	g.Eventually(f.strategyCalls).WithTimeout(60 * time.Second).Should(Equal(1))
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(Equal([]string{
		"errors Succeeded 1: 3 measurements taken, 0 failed (failure limit 0); last: 0.001, LessThan 0.01"}))
	ms := f.measurements(name, "errors")
	g.Expect(ms).To(HaveLen(3))
	g.Expect(ms[0].At.Equal(&first.At)).To(BeTrue(), "the first measurement is kept")
	for i := 1; i < len(ms); i++ {
		g.Expect(ms[i].At.Sub(ms[i-1].At.Time)).To(BeNumerically(">=", 2900*time.Millisecond), "measurements are an interval apart")
	}
}

// TestSteps_aMetricsStepAuthenticatesWithTheSecretsCredentials: the
// Prometheus sits behind a proxy that wants a bearer token or a user and
// password; the Secret's bearerToken, or username and password, get
// through, and a wrong token fails the measurement with the answer. A
// Secret with both kinds of credentials, or half of a user's, fails the
// step at once, saying so.
func TestSteps_aMetricsStepAuthenticatesWithTheSecretsCredentials(t *testing.T) {
	g := NewWithT(t)
	rate := newErrorRate(t, g, 0.001)
	target, err := url.Parse(rate.prom.URL)
	g.Expect(err).NotTo(HaveOccurred())
	upstream := httputil.NewSingleHostReverseProxy(target)
	guard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, basic := r.BasicAuth()
		bearer := r.Header.Get("Authorization") == "Bearer s3cret-token"
		password := basic && user == "tugboat" && pass == "s3cret-password"
		if !bearer && !password {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(guard.Close)

	for _, tc := range []struct {
		name   string
		secret map[string][]byte
		want   string
	}{
		{"bearer token", map[string][]byte{"bearerToken": []byte("s3cret-token")},
			"Succeeded: 1 measurements taken, 0 failed (failure limit 0); last: 0.001, LessThan 0.01"},
		{"user and password", map[string][]byte{"username": []byte("tugboat"), "password": []byte("s3cret-password")},
			"Succeeded: 1 measurements taken, 0 failed (failure limit 0); last: 0.001, LessThan 0.01"},
		{"wrong token", map[string][]byte{"bearerToken": []byte("guessed")},
			"Failed: 1 of 1 measurements failed, more than the failure limit 0; last: querying Prometheus " + guard.URL + ": client_error: client error: 401"},
		{"a token and a user", map[string][]byte{"bearerToken": []byte("s3cret-token"), "username": []byte("tugboat"), "password": []byte("s3cret-password")},
			`Failed: metrics step: Secret NS/prometheus has both "bearerToken" and "username"/"password": keep one way to authenticate`},
		{"a user without a password", map[string][]byte{"username": []byte("tugboat")},
			`Failed: metrics step: Secret NS/prometheus needs both "username" and "password", or neither`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{metricsStep("errors", 1, 0, time.Second)}})
			tc.secret["address"] = []byte(guard.URL)
			newSecret(g, f.ns, "prometheus", tc.secret)
			f.startHub()
			name := f.promote("2.0.0")
			g.Eventually(func() string {
				pr := f.get(name)
				if len(pr.Status.Steps) == 0 || !pr.Status.Steps[0].Phase.Terminal() {
					return ""
				}
				st := pr.Status.Steps[0]
				return fmt.Sprintf("%s: %s", st.Phase, st.Message)
			}).WithTimeout(30 * time.Second).Should(Equal(strings.ReplaceAll(tc.want, "NS/", f.ns+"/")))
			if strings.HasPrefix(tc.want, "Succeeded") {
				g.Eventually(f.strategyCalls).WithTimeout(30*time.Second).Should(Equal(1), "the strategy runs after the pre step")
			} else {
				g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(HavePrefix("Failed StepFailed: "))
				g.Expect(f.strategyCalls()).To(BeZero())
			}
		})
	}
}
