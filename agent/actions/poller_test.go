package actions

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/agent/keyfile"
	"tugboat.dev/tugboat/api/wire"
)

// The hub offers an action on every poll until its outcome is reported; the
// first report fails (503) and is retried. The agent upgrades once, reports
// the outcome once accepted, and refuses an action outside its limits.
func TestPoller_carriesOutActionsOnceAndReportsThem(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	hub := newFakeHub(t)
	hub.replies = []int{http.StatusServiceUnavailable}
	up := upgradeAction(ns, "web", "1.1.0")
	refused := upgradeAction("kube-system", "coredns", "9.9.9")
	hub.offer(up, refused)

	opts := testOptions(Limits{Namespaces: []string{ns}, ChartSources: []string{chartsURL}})
	run := &countingRunner{Runner: newExecutor(t, opts)}
	startPoller(t, run, opts, hub)

	g.Eventually(hub.results).WithTimeout(60 * time.Second).Should(HaveLen(2))
	outcomes := hub.results()
	o := outcomeFor(g, outcomes, up.ID)
	g.Expect(o.Result).To(Equal(wire.ActionSucceeded), o.Message)
	g.Expect(o.Revision).To(Equal(2))
	r := outcomeFor(g, outcomes, refused.ID)
	g.Expect(r.Result).To(Equal(wire.ActionRefused))
	g.Expect(r.Message).To(Equal("namespace kube-system is not in --actions-allowed-namespaces"))

	// Offered on many polls while it ran, carried out once.
	g.Expect(run.count(up.ID)).To(Equal(1))
	g.Expect(history(t, ns, "web")).To(HaveLen(2))
	reports, polls, badSig := hub.counts()
	g.Expect(reports).To(Equal(3), "one retried report, two accepted")
	g.Expect(polls).To(BeNumerically(">=", 1))
	g.Expect(badSig).To(BeZero())

	// Offered again (the hub lost the report): reported again, not re-run.
	hub.offer(up)
	g.Eventually(hub.results).WithTimeout(10 * time.Second).Should(HaveLen(3))
	g.Expect(run.count(up.ID)).To(Equal(1))
}

// A 404 on the report means the hub forgot the action: the outcome is
// dropped, not retried. The agent polls again at once after a new action,
// so a list the hub answered before it answered the report may still name
// the action: that is no reason to report it again, nor to carry it out
// again.
func TestPoller_dropsAnOutcomeTheHubForgot(t *testing.T) {
	g := NewWithT(t)
	hub := newFakeHub(t)
	hub.replies = []int{http.StatusNotFound, http.StatusNotFound}
	a := upgradeAction("apps", "web", "1.1.0")
	hub.offer(a)
	opts := testOptions(Limits{})
	run := &countingRunner{Runner: newExecutor(t, opts)}
	startPoller(t, run, opts, hub)

	reports := func() int { r, _, _ := hub.counts(); return r }
	g.Eventually(reports).WithTimeout(10 * time.Second).Should(Equal(1))
	g.Consistently(reports).WithTimeout(time.Second).Should(Equal(1), "dropped, not retried")
	g.Expect(hub.results()).To(BeEmpty())
	g.Expect(run.count(a.ID)).To(Equal(1), "carried out once")
}

// Requests signed with another key are refused by the hub; the poller keeps
// retrying with backoff, and recovers once the key file is right.
func TestPoller_signsWithTheCurrentKeyFile(t *testing.T) {
	g := NewWithT(t)
	hub := newFakeHub(t)
	good := hub.keyFile
	bad := t.TempDir() + "/key"
	g.Expect(writeFile(bad, "a-key-the-hub-does-not-know-0123456789")).To(Succeed())
	hub.keyFile = bad
	a := upgradeAction("apps", "web", "1.1.0")
	hub.offer(a)
	startPoller(t, newExecutor(t, testOptions(Limits{})), testOptions(Limits{}), hub)
	g.Eventually(func() int { _, _, b := hub.counts(); return b }).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 2))
	g.Expect(hub.results()).To(BeEmpty())

	key, err := keyfile.Read(good)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(writeFile(bad, string(key))).To(Succeed())
	g.Eventually(hub.results).WithTimeout(10 * time.Second).Should(HaveLen(1))
	g.Expect(hub.results()[0].Result).To(Equal(wire.ActionRefused))
}

// The agent acts only on answers signed with its spoke key for the request
// it sent (issue 12, Medium 2): an injected (unsigned), forged (another key)
// or replayed (the signature of an earlier answer) list of actions is
// refused, and so is an unsigned acknowledgement of an outcome, which is
// then reported again.
func TestPoller_actsOnlyOnAnswersSignedForTheRequest(t *testing.T) {
	g := NewWithT(t)
	hub := newFakeHub(t)
	a := upgradeAction("apps", "web", "1.1.0")
	hub.offer(a)
	opts := testOptions(Limits{})
	run := &countingRunner{Runner: newExecutor(t, opts)}
	hub.setAnswers(unsignedAnswers)
	startPoller(t, run, opts, hub)

	for _, mode := range []answerSigning{unsignedAnswers, wrongKeyAnswers, replayedAnswers} {
		hub.setAnswers(mode)
		_, polls, _ := hub.counts()
		g.Eventually(func() int { _, p, _ := hub.counts(); return p }).WithTimeout(10*time.Second).Should(BeNumerically(">=", polls+3), "mode %d", mode)
		g.Expect(run.count(a.ID)).To(BeZero(), "an action from an answer the spoke key did not sign for this request (mode %d)", mode)
	}

	// Signed: carried out and reported; an unsigned acknowledgement of
	// the report is not taken for one, so the outcome is reported again.
	hub.mu.Lock()
	hub.answers, hub.ackUnsigned = signedAnswers, true
	hub.mu.Unlock()
	g.Eventually(func() int { r, _, _ := hub.counts(); return r }).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 3))
	g.Expect(run.count(a.ID)).To(Equal(1))
	hub.mu.Lock()
	hub.ackUnsigned = false
	hub.mu.Unlock()
	reportsThen := -1
	g.Eventually(func() bool {
		r, _, _ := hub.counts()
		stable := r == reportsThen
		reportsThen = r
		return stable
	}).WithTimeout(10*time.Second).WithPolling(time.Second).Should(BeTrue(), "reports stop once one is acknowledged with a signature")
	g.Expect(run.count(a.ID)).To(Equal(1))
}

// With a poll interval of an hour on both sides (the hub holds an empty
// poll for an hour, the agent spaces polls by an hour), every action still
// reaches the agent as soon as it is offered: a new action is followed by
// a poll at once, and repeats of an action under way wait only until its
// outcome is reported.
func TestPoller_anActionReachesTheAgentWithAPollIntervalOfAnHour(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	install(t, ns, "api", "1.0.0", nil)
	hub := newFakeHub(t)
	hub.setHold(time.Hour)
	opts := testOptions(Limits{Namespaces: []string{ns}, ChartSources: []string{chartsURL}})
	opts.MinPollInterval = time.Hour
	opts.PollTimeout = 2 * time.Hour
	run := &countingRunner{Runner: newExecutor(t, opts)}
	startPoller(t, run, opts, hub)
	g.Eventually(func() int { _, polls, _ := hub.counts(); return polls }).WithTimeout(10*time.Second).Should(Equal(1), "the first poll is held")

	for i, a := range []wire.Action{upgradeAction(ns, "web", "1.1.0"), upgradeAction(ns, "api", "1.1.0")} {
		hub.offer(a)
		g.Eventually(hub.results).WithTimeout(60*time.Second).Should(HaveLen(i+1), "action %s reached the agent", a.Release)
		o := outcomeFor(g, hub.results(), a.ID)
		g.Expect(o.Result).To(Equal(wire.ActionSucceeded), o.Message)
		g.Expect(run.count(a.ID)).To(Equal(1))
	}
	// No spinning while the hub repeated an action under way: about two
	// polls per action (the one that brought it, one that found it again
	// and waited for its report), and the one held now.
	_, polls, _ := hub.counts()
	g.Expect(polls).To(BeNumerically("<=", 8))
}

// A hub that offers an action again after it accepted its outcome (it lost
// the record, e.g. restored from a backup) gets the remembered outcome
// again, in answer to a poll asked for after the report: the action is not
// carried out twice.
func TestPoller_reportsARememberedOutcomeTheHubOffersAgain(t *testing.T) {
	g := NewWithT(t)
	hub := newFakeHub(t)
	a := upgradeAction("kube-system", "coredns", "9.9.9") // refused: quick, and changes nothing
	hub.offer(a)
	opts := testOptions(Limits{})
	run := &countingRunner{Runner: newExecutor(t, opts)}
	startPoller(t, run, opts, hub)
	g.Eventually(hub.results).WithTimeout(10 * time.Second).Should(HaveLen(1))

	hub.offer(a)
	g.Eventually(hub.results).WithTimeout(10 * time.Second).Should(HaveLen(2))
	g.Expect(hub.results()[1]).To(Equal(hub.results()[0]), "the remembered outcome")
	g.Expect(run.count(a.ID)).To(Equal(1))
}
