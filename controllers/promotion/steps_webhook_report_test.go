package promotion_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/promotion"
	"tugboat.dev/tugboat/e2e/identity"
)

// reportStep POSTs a step report to the CI API of the hub started last
// (its receiver, over loopback), signed with key, and returns the answer's
// status and body. The body is written out here: controllers tests do not
// import webhook (its types), only the hub's assembly.
func (f *stepsFixture) reportStep(g Gomega, key []byte, promotionName, step, delivery, result, message string) (int, string) {
	var addr net.Addr
	g.Eventually(func() net.Addr {
		f.mu.Lock()
		defer f.mu.Unlock()
		addr = f.hub.Receiver.Addr()
		return addr
	}).WithTimeout(30 * time.Second).ShouldNot(BeNil())
	raw, err := json.Marshal(map[string]string{"promotion": promotionName, "step": step, "delivery": delivery, "result": result, "message": message})
	g.Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodPost, "http://"+addr.String()+"/v1/pipelines/"+f.ns+"/web/steps", bytes.NewReader(raw))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	wire.SignRequest(req, key, raw, time.Now())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

func timedWebhookStep(name, url string, timeout time.Duration, retries int32) tugboatv1alpha1.Step {
	s := webhookStep(name, url, retries)
	s.Timeout = &metav1.Duration{Duration: timeout}
	return s
}

// TestSteps_aWebhookStepThatAnswers202WaitsForItsReport: the receiver
// answers the pre step's signed call 202 Accepted; the hub publishes the
// attempt's LifecycleEvent and the step waits, saying how to report; the
// receiver reports success through the real hub's CI API, signed with the
// step's key; the hub's ServiceAccount finishes the event (finishedBy),
// the step succeeds naming the credential, and the strategy runs. The
// webhook was called once; a second report is refused (409).
func TestSteps_aWebhookStepThatAnswers202WaitsForItsReport(t *testing.T) {
	g := NewWithT(t)
	srv := newStepReceiver(t, stepKey, http.StatusAccepted, "queued")
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{webhookStep("qa", srv.URL+"/hook", 0)}})
	newSecret(g, f.ns, "qa-hook", map[string][]byte{"key": stepKey})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(srv.requests).WithTimeout(30 * time.Second).Should(HaveLen(1))
	id := srv.requests()[0].ID
	ev := f.event(g, promotion.EventName(name, "qa", 1))
	g.Expect([]string{ev.Spec.Lifecycle, ev.Spec.EventKey, ev.Spec.Promotion, ev.Spec.Step, string(ev.Status.Phase)}).To(
		Equal([]string{promotion.WebhookLifecycle, promotion.WebhookLifecycle, name, "qa", ""}))
	g.Expect(ev.OwnerReferences).To(ConsistOf(HaveField("Name", name)))
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(ConsistOf(And(
		HavePrefix("qa Running 1: webhook "+srv.URL+"/hook accepted delivery "+id+" (202): waiting for its report by "),
		ContainSubstring(`POST /v1/pipelines/`+f.ns+`/web/steps {"promotion":"`+name+`","step":"qa","delivery":"`+id+`","result":"succeeded" or "failed"}`))))
	g.Expect(f.strategyCalls()).To(BeZero(), "the pre step waits for the report")

	code, body := f.reportStep(g, stepKey, name, "qa", id, "succeeded", "smoke tests passed")
	g.Expect(code).To(Equal(http.StatusOK), body)
	var resp map[string]string
	g.Expect(json.Unmarshal([]byte(body), &resp)).To(Succeed())
	g.Expect(resp).To(Equal(map[string]string{"promotion": name, "step": "qa", "result": "succeeded",
		"reportedBy": "the webhook key of Secret qa-hook", "lifecycleEvent": ev.Name}))

	g.Eventually(f.strategyCalls).WithTimeout(30 * time.Second).Should(Equal(1))
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(Equal([]string{
		"qa Succeeded 1: webhook " + srv.URL + "/hook accepted delivery " + id + " (202) and reported success, through " + identity.HubUser +
			": the webhook key of Secret qa-hook reported succeeded: smoke tests passed"}))
	done := f.event(g, ev.Name)
	g.Expect(done.Status.Phase).To(Equal(tugboatv1alpha1.EventDone))
	g.Expect(done.Status.FinishedBy).To(Equal(identity.HubUser), "the hub's ServiceAccount wrote it, as the API server authenticated it")
	g.Expect(srv.requests()).To(HaveLen(1), "the webhook is called once")

	code, body = f.reportStep(g, stepKey, name, "qa", id, "failed", "too late")
	g.Expect(code).To(Equal(http.StatusConflict), body)
	g.Expect(body).To(ContainSubstring("step qa of promotion " + name + " is Succeeded"))
}

// TestSteps_aFailedReportFailsTheWebhookStep: a report of failure fails
// the pre step and the Promotion with the reporter's message; the strategy
// never runs.
func TestSteps_aFailedReportFailsTheWebhookStep(t *testing.T) {
	g := NewWithT(t)
	srv := newStepReceiver(t, stepKey, http.StatusAccepted, "")
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{webhookStep("qa", srv.URL+"/hook", 0)}})
	newSecret(g, f.ns, "qa-hook", map[string][]byte{"key": stepKey})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(ConsistOf(ContainSubstring("waiting for its report")))
	id := srv.requests()[0].ID
	code, body := f.reportStep(g, stepKey, name, "qa", id, "failed", "migration broken")
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Eventually(f.state(name)).WithTimeout(30 * time.Second).Should(Equal("Failed StepFailed: pre step qa (webhook) failed after 1 attempt(s): webhook " +
		srv.URL + "/hook accepted delivery " + id + " (202) and reported failure, through " + identity.HubUser +
		": the webhook key of Secret qa-hook reported failed: migration broken"))
	g.Expect(f.event(g, promotion.EventName(name, "qa", 1)).Status.Phase).To(Equal(tugboatv1alpha1.EventError))
	g.Expect(f.strategyCalls()).To(BeZero())
	g.Expect(srv.requests()).To(HaveLen(1))
}

// TestSteps_anUnreportedWebhookStepTimesOut: a pre step of 2s with one
// retry whose 202s are never reported: each attempt's event is marked
// TimedOut at its deadline, the retry calls again with a new delivery id,
// and the step ends TimedOut; a report after that is refused.
func TestSteps_anUnreportedWebhookStepTimesOut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := newStepReceiver(t, stepKey, http.StatusAccepted, "")
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{timedWebhookStep("qa", srv.URL+"/hook", 2*time.Second, 1)}})
	newSecret(g, f.ns, "qa-hook", map[string][]byte{"key": stepKey})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.state(name)).WithTimeout(60 * time.Second).Should(HavePrefix("Failed StepFailed: pre step qa (webhook) timed out after 2 attempt(s): webhook " +
		srv.URL + "/hook accepted delivery "))
	got := srv.requests()
	g.Expect(got).To(HaveLen(2))
	g.Expect([]int32{got[0].Attempt, got[1].Attempt}).To(Equal([]int32{1, 2}))
	g.Expect(got[0].ID).NotTo(Equal(got[1].ID))
	g.Expect(f.state(name)()).To(ContainSubstring(got[1].ID + " (202) but no report came by "))
	for _, attempt := range []int32{1, 2} {
		ev := &tugboatv1alpha1.LifecycleEvent{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: promotion.EventName(name, "qa", attempt)}, ev)).To(Succeed())
		g.Expect(ev.Status.Phase).To(Equal(tugboatv1alpha1.EventTimedOut))
		g.Expect(ev.Status.Message).To(HavePrefix("no report of delivery " + got[attempt-1].ID + " came through the CI API by the deadline "))
	}
	code, body := f.reportStep(g, stepKey, name, "qa", got[1].ID, "succeeded", "late")
	g.Expect(code).To(Equal(http.StatusConflict), body)
	g.Expect(f.strategyCalls()).To(BeZero())
}

// TestSteps_aHubRestartNeitherRepeatsTheCallNorLosesTheReport: the hub
// stops after the receiver's 202; a new hub does not call the webhook
// again and takes the report, and stops at once; a third hub completes
// the step from the event. One call, one event, the report kept.
func TestSteps_aHubRestartNeitherRepeatsTheCallNorLosesTheReport(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := newStepReceiver(t, stepKey, http.StatusAccepted, "")
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{webhookStep("qa", srv.URL+"/hook", 0)}})
	newSecret(g, f.ns, "qa-hook", map[string][]byte{"key": stepKey})
	stop := f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(ConsistOf(ContainSubstring("waiting for its report")))
	stop()
	id := srv.requests()[0].ID

	stop = f.startHub()
	code, body := f.reportStep(g, stepKey, name, "qa", id, "succeeded", "after a restart")
	g.Expect(code).To(Equal(http.StatusOK), body)
	stop()

	f.startHub()
	g.Eventually(f.strategyCalls).WithTimeout(30 * time.Second).Should(Equal(1))
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(Equal([]string{
		"qa Succeeded 1: webhook " + srv.URL + "/hook accepted delivery " + id + " (202) and reported success, through " + identity.HubUser +
			": the webhook key of Secret qa-hook reported succeeded: after a restart"}))
	deliveries, unverified := srv.seen()
	g.Expect(deliveries).To(Equal([]string{id}), "no hub called the webhook again")
	g.Expect(unverified).To(BeZero())
	var list tugboatv1alpha1.LifecycleEventList
	g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "one event for the one attempt")
}

// TestSteps_aFailedReportRetriesWithANewDelivery: with one retry, a
// failed report makes the hub call the webhook again (a new delivery id,
// attempt 2); a late report of attempt 1 is refused as stale, and a
// report of attempt 2's success passes the step.
func TestSteps_aFailedReportRetriesWithANewDelivery(t *testing.T) {
	g := NewWithT(t)
	srv := newStepReceiver(t, stepKey, http.StatusAccepted, "")
	f := newStepsFixture(t, &tugboatv1alpha1.Steps{Pre: []tugboatv1alpha1.Step{webhookStep("qa", srv.URL+"/hook", 1)}})
	newSecret(g, f.ns, "qa-hook", map[string][]byte{"key": stepKey})
	f.startHub()
	name := f.promote("2.0.0")
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(ConsistOf(ContainSubstring("waiting for its report")))
	first := srv.requests()[0].ID
	code, body := f.reportStep(g, stepKey, name, "qa", first, "failed", "flaky")
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(ConsistOf(HavePrefix("qa Running 2: webhook " + srv.URL + "/hook accepted delivery ")))
	got := srv.requests()
	g.Expect(got).To(HaveLen(2))
	g.Expect([]int32{got[0].Attempt, got[1].Attempt}).To(Equal([]int32{1, 2}))
	second := got[1].ID

	code, body = f.reportStep(g, stepKey, name, "qa", first, "succeeded", "late")
	g.Expect(code).To(Equal(http.StatusConflict), body)
	g.Expect(body).To(ContainSubstring("stale delivery: delivery " + first + " is attempt 1's; step qa is at attempt 2 (delivery " + second + ")"))
	code, body = f.reportStep(g, stepKey, name, "qa", second, "succeeded", "passed on retry")
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Eventually(f.strategyCalls).WithTimeout(30 * time.Second).Should(Equal(1))
	g.Eventually(f.steps(name)).WithTimeout(30 * time.Second).Should(Equal([]string{
		"qa Succeeded 2: webhook " + srv.URL + "/hook accepted delivery " + second + " (202) and reported success, through " + identity.HubUser +
			": the webhook key of Secret qa-hook reported succeeded: passed on retry"}))
	g.Expect(srv.requests()).To(HaveLen(2))
}
