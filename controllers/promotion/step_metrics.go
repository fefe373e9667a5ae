package promotion

// Metrics lifecycle steps: the hub evaluates the step's PromQL query
// against a Prometheus (address and credentials from a Secret), through
// Prometheus's own client library and the hub's egress policy, count times,
// interval apart, the way Flagger's and Argo Rollouts' analyses work. Each
// value is judged by the step's success condition; the attempt fails as
// soon as more than failureLimit measurements failed and passes once all
// count were taken.
//
// The reconciler never blocks between measurements: one reconcile takes at
// most one measurement and asks to be woken at the next one (RequeueAfter).
// The measurements taken and failed, and the latest values, are in the
// step's status (status.steps[].metrics), so a hub that restarts goes on
// from where it stood: runSteps only measures from the latest status (never
// a stale cached copy), so a measurement is neither taken twice nor lost.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	notifywebhook "tugboat.dev/tugboat/controllers/notify/webhook"
)

const (
	// MaxMetricsQuery bounds one query: the time left of the attempt, at
	// most this.
	MaxMetricsQuery = 30 * time.Second
	// maxMeasurementMessage is how long a measurement's message may be
	// (the CRD's limit).
	maxMeasurementMessage = 256
)

// The keys of a metrics step's Secret.
const (
	MetricsSecretAddress     = "address"
	MetricsSecretBearerToken = "bearerToken"
	MetricsSecretUsername    = "username"
	MetricsSecretPassword    = "password"
)

// metricsInterval and metricsCount are spec's interval and count, with
// their defaults.
func metricsInterval(m *tugboatv1alpha1.MetricsStep) time.Duration {
	if m.Interval != nil && m.Interval.Duration > 0 {
		return m.Interval.Duration
	}
	d, _ := time.ParseDuration(tugboatv1alpha1.DefaultMetricsInterval)
	return d
}

func metricsCount(m *tugboatv1alpha1.MetricsStep) int32 { return max(m.Count, 1) }

// metricsTimeout is the default timeout of a metrics step's attempt: time
// for every measurement, and a minute to spare.
func metricsTimeout(m *tugboatv1alpha1.MetricsStep) *metav1.Duration {
	return &metav1.Duration{Duration: metricsInterval(m)*time.Duration(metricsCount(m)) + time.Minute}
}

// metricsAttempt takes the next measurement of st's current attempt when
// it is due, and judges the attempt.
func (r *Reconciler) metricsAttempt(ctx context.Context, pr *tugboatv1alpha1.Promotion, spec *tugboatv1alpha1.Step,
	st *tugboatv1alpha1.StepStatus) (attemptResult, error) {
	cfg := spec.Metrics
	if cfg == nil {
		return attemptResult{done: true, message: "the step has no metrics configuration"}, nil
	}
	if st.Metrics == nil {
		st.Metrics = &tugboatv1alpha1.MetricsStepStatus{}
	}
	ms := st.Metrics
	count, interval := metricsCount(cfg), metricsInterval(cfg)
	now := r.Now()
	timeout := stepTimeout(spec, metricsTimeout(cfg))
	started := now
	if st.StartedAt != nil {
		started = st.StartedAt.Time
	}
	deadline := started.Add(timeout)

	// When is the next measurement due? The first of the first attempt at
	// once; the first of a retry one interval after it started, so that a
	// retry does not query again in the same instant; any other one an
	// interval after the last.
	due := started
	if n := len(ms.Measurements); n > 0 {
		due = ms.Measurements[n-1].At.Add(interval)
	} else if st.Attempts > 1 {
		due = started.Add(interval)
	}
	if !now.Before(deadline) || due.After(deadline) {
		return attemptResult{done: true, timedOut: true, message: fmt.Sprintf("timed out after %s with %d of %d measurements taken, %d failed",
			timeout, ms.Taken, count, ms.Failed)}, nil
	}
	if wait := due.Sub(now); wait > 0 {
		return attemptResult{wait: metricsProgress(cfg, ms, count, due), requeue: wait}, nil
	}

	api, shown, fail, err := r.prometheusAPI(ctx, pr, cfg, min(MaxMetricsQuery, deadline.Sub(now)))
	if err != nil {
		return attemptResult{}, err
	}
	if fail != "" {
		// The Secret or the address is wrong: no measurement can be taken,
		// so the attempt fails at once rather than counting failures.
		return attemptResult{done: true, message: fail}, nil
	}
	m := r.measure(ctx, api, shown, cfg, min(MaxMetricsQuery, deadline.Sub(now)))
	ms.Taken++
	if !m.Passed {
		ms.Failed++
	}
	ms.Measurements = append(ms.Measurements, m)
	if n := len(ms.Measurements); n > tugboatv1alpha1.MaxMeasurements {
		ms.Measurements = append([]tugboatv1alpha1.Measurement(nil), ms.Measurements[n-tugboatv1alpha1.MaxMeasurements:]...)
	}
	last := describeMeasurement(cfg, m)
	switch {
	case ms.Failed > cfg.FailureLimit:
		return attemptResult{done: true, message: fmt.Sprintf("%d of %d measurements failed, more than the failure limit %d; last: %s",
			ms.Failed, ms.Taken, cfg.FailureLimit, last)}, nil
	case ms.Taken >= count:
		return attemptResult{done: true, ok: true, message: fmt.Sprintf("%d measurements taken, %d failed (failure limit %d); last: %s",
			ms.Taken, ms.Failed, cfg.FailureLimit, last)}, nil
	}
	return attemptResult{wait: metricsProgress(cfg, ms, count, m.At.Add(interval)), requeue: interval}, nil
}

// metricsProgress is what a running metrics step waits for. It names the
// time the next measurement is due, not how long until then: the message
// stays the same from one reconcile to the next, so waiting writes nothing.
func metricsProgress(cfg *tugboatv1alpha1.MetricsStep, ms *tugboatv1alpha1.MetricsStepStatus, count int32, next time.Time) string {
	msg := fmt.Sprintf("%d of %d measurements taken, %d failed (failure limit %d)", ms.Taken, count, ms.Failed, cfg.FailureLimit)
	if n := len(ms.Measurements); n > 0 {
		msg += "; last: " + describeMeasurement(cfg, ms.Measurements[n-1])
	}
	return msg + "; next at " + next.UTC().Format(time.RFC3339)
}

// describeMeasurement says what m measured, against the success condition.
func describeMeasurement(cfg *tugboatv1alpha1.MetricsStep, m tugboatv1alpha1.Measurement) string {
	c := cfg.SuccessCondition
	switch {
	case m.Value == "":
		return m.Message
	case m.Passed:
		return fmt.Sprintf("%s, %s %s", m.Value, c.Operator, c.Threshold)
	}
	return fmt.Sprintf("%s, not %s %s", m.Value, c.Operator, c.Threshold)
}

// prometheusAPI returns a client of the Prometheus the step's Secret names,
// whose requests pass the egress policy and carry the Secret's
// credentials, and the address as it may be shown (no user info, query or
// fragment). fail says why there is none when the configuration is wrong;
// err is an API error reading the Secret (the reconcile retries).
func (r *Reconciler) prometheusAPI(ctx context.Context, pr *tugboatv1alpha1.Promotion, cfg *tugboatv1alpha1.MetricsStep,
	timeout time.Duration) (api promv1.API, shown, fail string, err error) {
	ref := types.NamespacedName{Namespace: pr.Namespace, Name: cfg.SecretRef.Name}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Sprintf("metrics step: Secret %s not found", ref), nil
		}
		return nil, "", "", err
	}
	address := string(secret.Data[MetricsSecretAddress])
	if address == "" {
		return nil, "", fmt.Sprintf("metrics step: Secret %s has no key %q (the Prometheus's base URL)", ref, MetricsSecretAddress), nil
	}
	u, perr := url.Parse(address)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, "", fmt.Sprintf("metrics step: key %q of Secret %s must be an absolute http or https URL, e.g. http://prometheus.monitoring:9090", MetricsSecretAddress, ref), nil
	}
	shown = notifywebhook.Redact(address)
	token := string(secret.Data[MetricsSecretBearerToken])
	user, pass := string(secret.Data[MetricsSecretUsername]), string(secret.Data[MetricsSecretPassword])
	switch {
	case token != "" && (user != "" || pass != ""):
		return nil, "", fmt.Sprintf("metrics step: Secret %s has both %q and %q/%q: keep one way to authenticate", ref, MetricsSecretBearerToken, MetricsSecretUsername, MetricsSecretPassword), nil
	case (user == "") != (pass == ""):
		return nil, "", fmt.Sprintf("metrics step: Secret %s needs both %q and %q, or neither", ref, MetricsSecretUsername, MetricsSecretPassword), nil
	}
	hc := r.Egress.Client(timeout)
	var rt = hc.Transport
	switch {
	case token != "":
		rt = promconfig.NewAuthorizationCredentialsRoundTripper("Bearer", promconfig.NewInlineSecret(token), rt)
	case user != "":
		rt = promconfig.NewBasicAuthRoundTripper(promconfig.NewInlineSecret(user), promconfig.NewInlineSecret(pass), rt)
	}
	hc.Transport = promconfig.NewUserAgentRoundTripper("tugboat-hub", rt)
	c, cerr := promapi.NewClient(promapi.Config{Address: address, Client: hc})
	if cerr != nil {
		return nil, "", fmt.Sprintf("metrics step: Prometheus address %s: %v", shown, cerr), nil
	}
	return promv1.NewAPI(closingClient{Client: c, transport: hc}), shown, "", nil
}

// closingClient closes the idle connections of its own transport after
// each request: a measurement is minutes from the next one.
type closingClient struct {
	promapi.Client
	transport *http.Client
}

func (c closingClient) Do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	defer c.transport.CloseIdleConnections()
	return c.Client.Do(ctx, req)
}

// measure runs the query once and judges its value. A query that fails,
// returns no series or several, or NaN, is a failed measurement saying so.
func (r *Reconciler) measure(ctx context.Context, api promv1.API, shown string, cfg *tugboatv1alpha1.MetricsStep, timeout time.Duration) tugboatv1alpha1.Measurement {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	at := r.Now()
	m := tugboatv1alpha1.Measurement{At: metav1.NewMicroTime(at)}
	failed := func(format string, args ...any) tugboatv1alpha1.Measurement {
		m.Message = clip.String(fmt.Sprintf(format, args...), maxMeasurementMessage)
		return m
	}
	v, _, err := api.Query(ctx, cfg.Query, at, promv1.WithTimeout(timeout))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return failed("Prometheus %s did not answer within %s", shown, timeout.Round(time.Millisecond))
		}
		return failed("querying Prometheus %s: %v", shown, err)
	}
	var value float64
	switch res := v.(type) {
	case *model.Scalar:
		value = float64(res.Value)
	case model.Vector:
		switch len(res) {
		case 0:
			return failed("the query returned no series")
		case 1:
			value = float64(res[0].Value)
		default:
			return failed("the query returned %d series, not one: aggregate them (e.g. with sum())", len(res))
		}
	default:
		return failed("the query returned a %s, not a scalar or one sample", v.Type())
	}
	m.Value = strconv.FormatFloat(value, 'g', -1, 64)
	if math.IsNaN(value) {
		return failed("the query returned NaN")
	}
	ok, err := compare(value, cfg.SuccessCondition)
	if err != nil {
		return failed("%v", err)
	}
	m.Passed = ok
	return m
}

// compare reports whether "value operator threshold" holds.
func compare(value float64, c tugboatv1alpha1.MetricCondition) (bool, error) {
	t, err := strconv.ParseFloat(c.Threshold, 64)
	if err != nil {
		return false, fmt.Errorf("threshold %q is not a number", c.Threshold)
	}
	switch c.Operator {
	case tugboatv1alpha1.MetricLessThan:
		return value < t, nil
	case tugboatv1alpha1.MetricLessThanOrEqual:
		return value <= t, nil
	case tugboatv1alpha1.MetricGreaterThan:
		return value > t, nil
	case tugboatv1alpha1.MetricGreaterThanOrEqual:
		return value >= t, nil
	case tugboatv1alpha1.MetricEqual:
		return value == t, nil
	case tugboatv1alpha1.MetricNotEqual:
		return value != t, nil
	}
	return false, fmt.Errorf("unknown operator %q", c.Operator)
}
