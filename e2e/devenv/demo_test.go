package devenv_test

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/devenv"
	"tugboat.dev/tugboat/e2e/harness"
)

// timeline is what `tugboat dev demo` printed under "Timeline".
type timeline struct {
	steps []timelineStep
	// promotions: the last phase printed for each Promotion.
	promotions map[string]string
	// releases: "spoke/namespace/release" → the revisions printed, in order,
	// each with its chart version.
	releases   map[string][]printedRevision
	approvedBy []string
	holds      map[string]string // environment → "Reason, message"
	// stepFacts: "promotion/step" → the phase printed for a lifecycle step.
	stepFacts map[string]string
	// stopped: what the Pipeline said of a version it stopped.
	stopped []string
	total   time.Duration
}

type timelineStep struct {
	title    string
	at, took time.Duration
}

type printedRevision struct {
	revision int32
	version  string
}

var (
	stepLine      = regexp.MustCompile(`^\s+\+([0-9.]+)s\s+([0-9.]+)s\s+\d+\. (.+)$`)
	promotionFact = regexp.MustCompile(`^\s+promotion (\S+): (\w+)$`)
	releaseFact   = regexp.MustCompile(`^\s+release (\S+) revision (\d+): \S+ (\S+), (\w+)$`)
	approvedFact  = regexp.MustCompile(`^\s+approved by (\S+)$`)
	holdFact      = regexp.MustCompile(`^\s+hold (\S+): (.+)$`)
	stepFact      = regexp.MustCompile(`^\s+step (\S+) of (\S+) \((\w+) (\w+)\): (\w+)$`)
	stoppedFact   = regexp.MustCompile(`^\s+stopped: (.+)$`)
	totalLine     = regexp.MustCompile(`^Total: ([0-9.]+)s$`)
)

func parseTimeline(t *testing.T, out string) timeline {
	t.Helper()
	i := strings.Index(out, "\nTimeline\n")
	if i < 0 {
		t.Fatalf("no timeline in the output")
	}
	tl := timeline{promotions: map[string]string{}, releases: map[string][]printedRevision{}, holds: map[string]string{}, stepFacts: map[string]string{}}
	secs := func(s string) time.Duration {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("bad duration %q: %v", s, err)
		}
		return time.Duration(f * float64(time.Second))
	}
	for _, line := range strings.Split(out[i+len("\nTimeline\n"):], "\n") {
		if m := stepLine.FindStringSubmatch(line); m != nil {
			tl.steps = append(tl.steps, timelineStep{title: m[3], at: secs(m[1]), took: secs(m[2])})
		} else if m := promotionFact.FindStringSubmatch(line); m != nil {
			tl.promotions[m[1]] = m[2]
		} else if m := releaseFact.FindStringSubmatch(line); m != nil {
			rev, _ := strconv.Atoi(m[2])
			tl.releases[m[1]] = append(tl.releases[m[1]], printedRevision{revision: int32(rev), version: m[3]})
		} else if m := approvedFact.FindStringSubmatch(line); m != nil {
			tl.approvedBy = append(tl.approvedBy, m[1])
		} else if m := holdFact.FindStringSubmatch(line); m != nil {
			tl.holds[m[1]] = m[2]
		} else if m := stepFact.FindStringSubmatch(line); m != nil {
			tl.stepFacts[m[2]+"/"+m[1]] = m[5]
		} else if m := stoppedFact.FindStringSubmatch(line); m != nil {
			tl.stopped = append(tl.stopped, m[1])
		} else if m := totalLine.FindStringSubmatch(line); m != nil {
			tl.total = secs(m[1])
			break
		}
	}
	return tl
}

// TestDevDemo_timelineMatchesTheHub runs the real `tugboat dev demo --stay`
// and checks its printed timeline against what the hub recorded: every
// Promotion it names, with the phase it printed last, and no other; every
// release revision it printed, with its chart version, in the
// ReleaseHistories; staging's smoke test passing for 1.0.0 and failing for
// 1.2.0, with the test Pod's log printed and recorded, and 1.2.0 stopped in
// staging; the approval under the user the hub's API server authenticates;
// the rollback hold on staging; production still at 1.0.0.
// Then Ctrl-C stops every process and removes the directory.
func TestDevDemo_timelineMatchesTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "demo")
	demo := startTugboat(t, dir, "dev", "demo", "--dir", dir, "--stay")
	demo.waitForLine(t, "Press Ctrl-C", 5*time.Minute)
	out := demo.out()
	tl := parseTimeline(t, out)

	g.Expect(tl.steps).To(HaveLen(10), out)
	for i, s := range tl.steps {
		g.Expect(s.took).To(BeNumerically(">=", 0), s.title)
		if i > 0 {
			prev := tl.steps[i-1]
			g.Expect(s.at).To(BeNumerically("~", prev.at+prev.took, 150*time.Millisecond), "step %d starts when step %d ended", i+1, i)
		}
	}
	last := tl.steps[len(tl.steps)-1]
	g.Expect(tl.total).To(BeNumerically("~", last.at+last.took, 150*time.Millisecond))
	t.Logf("the demo's timeline took %s (its environment's start included)", tl.total)

	hubCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "hub.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	hub, err := client.New(hubCfg, client.Options{Scheme: harness.DefaultScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	ns := devenv.DefaultNamespace

	// Promotions: the hub has exactly those the timeline names, each in
	// the phase it printed last.
	var promotions tugboatv1alpha1.PromotionList
	g.Expect(hub.List(ctx, &promotions, client.InNamespace(ns))).To(Succeed())
	recorded := map[string]string{}
	for _, pr := range promotions.Items {
		recorded[pr.Name] = string(pr.Status.Phase)
	}
	g.Expect(recorded).To(Equal(tl.promotions))
	g.Expect(tl.promotions).To(Equal(map[string]string{
		"demo-staging-1.0.0":    "Succeeded",
		"demo-production-1.0.0": "Succeeded",
		"demo-staging-1.1.0":    "Failed",
		"demo-staging-1.2.0":    "Failed",
	}), "1.2.0 stopped in staging: no promotion of it into production")

	// Releases: every printed revision is in the ReleaseHistory with the
	// printed chart version, and the last printed is the current one.
	g.Expect(tl.releases).To(HaveLen(3))
	for id, revs := range tl.releases {
		parts := strings.Split(id, "/")
		g.Expect(parts).To(HaveLen(3), id)
		var rh tugboatv1alpha1.ReleaseHistory
		g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(parts[0], parts[1], parts[2])}, &rh)).To(Succeed())
		for _, p := range revs {
			i := slices.IndexFunc(rh.Status.Revisions, func(r tugboatv1alpha1.Revision) bool { return r.Revision == p.revision })
			g.Expect(i).NotTo(Equal(-1), "%s revision %d is recorded", id, p.revision)
			g.Expect(rh.Status.Revisions[i].ChartVersion).To(Equal(p.version), "%s revision %d", id, p.revision)
		}
		g.Expect(rh.Status.Current).NotTo(BeNil())
		g.Expect(rh.Status.Current.Revision).To(Equal(revs[len(revs)-1].revision), id)
	}
	g.Expect(tl.releases["production/demo/demo"]).To(Equal([]printedRevision{{1, "1.0.0"}, {1, "1.0.0"}, {1, "1.0.0"}}), "production keeps 1.0.0")
	g.Expect(tl.releases["staging/demo/demo"]).To(Equal([]printedRevision{{1, "1.0.0"}, {2, "1.1.0"}, {3, "1.2.0"}, {4, "1.0.0"}}))

	// Staging's smoke test (the sample Pipeline's helmTest post step) is
	// printed as it ended, and so recorded on the hub.
	g.Expect(tl.stepFacts).To(HaveKeyWithValue("demo-staging-1.0.0/"+devenv.DemoTestStep, "Succeeded"), out)
	var staged tugboatv1alpha1.Promotion
	g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-staging-1.0.0"}, &staged)).To(Succeed())
	g.Expect(staged.Status.Steps).To(ConsistOf(And(HaveField("Name", devenv.DemoTestStep), HaveField("Phase", tugboatv1alpha1.StepSucceeded))))

	// 1.2.0's smoke test fails in staging (kwok fails its test Pod, and
	// serves the harness's stand-in log as the node's kubelet): the
	// promotion fails naming the step and the test Pod, with the end of
	// its log, printed line by line; the Pipeline stops 1.2.0 there.
	g.Expect(tl.stepFacts).To(HaveKeyWithValue("demo-staging-1.2.0/"+devenv.DemoTestStep, "Failed"), out)
	var failed tugboatv1alpha1.Promotion
	g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-staging-1.2.0"}, &failed)).To(Succeed())
	g.Expect(failed.Status.Steps).To(HaveLen(1))
	smoke := failed.Status.Steps[0]
	g.Expect([]any{smoke.Name, smoke.Type, smoke.Phase}).To(Equal([]any{devenv.DemoTestStep, tugboatv1alpha1.StepHelmTest, tugboatv1alpha1.StepFailed}))
	g.Expect(smoke.Message).To(HavePrefix("helm test failed on staging/demo/demo: "))
	g.Expect(smoke.Message).To(HaveSuffix("test pod demo-smoke failed: log (last lines): " + strings.TrimSpace(harness.KwokPodLog)))
	ready := findReady(failed.Status.Conditions)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Reason).To(Equal("StepFailed"))
	g.Expect(ready.Message).To(HavePrefix("post step smoke (helmTest) failed after 1 attempt(s): helm test failed on staging/demo/demo"))
	g.Expect(out).To(ContainSubstring("post step smoke (helmTest) Failed after 1 attempt(s):"))
	for _, line := range strings.Split(strings.TrimSpace(harness.KwokPodLog), "\n") {
		g.Expect(out).To(ContainSubstring("  |   "+line), "the log's lines are printed")
	}
	g.Expect(tl.stopped).To(Equal([]string{"1.2.0 is not promoted out of staging: its post step smoke (helmTest) failed in promotion demo-staging-1.2.0"}))

	// The approval names the user the hub's API server authenticates for
	// the environment's kubeconfig.
	review := &authenticationv1.SelfSubjectReview{}
	g.Expect(hub.Create(ctx, review)).To(Succeed())
	var prod tugboatv1alpha1.Promotion
	g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-production-1.0.0"}, &prod)).To(Succeed())
	g.Expect(prod.Status.Approval).NotTo(BeNil())
	g.Expect(tl.approvedBy).To(Equal([]string{prod.Status.Approval.ApprovedBy}))
	g.Expect(prod.Status.Approval.ApprovedBy).To(Equal(review.Status.UserInfo.Username))

	// The rollback holds staging, as printed.
	var p tugboatv1alpha1.Pipeline
	g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: devenv.DemoChart}, &p)).To(Succeed())
	g.Expect(p.Status.HeldEnvironments).To(HaveLen(1))
	held := p.Status.HeldEnvironments[0]
	g.Expect(tl.holds).To(Equal(map[string]string{held.Name: string(held.Reason) + ", " + held.Message}))
	g.Expect(held.Name).To(Equal("staging"))
	g.Expect(held.Reason).To(Equal(tugboatv1alpha1.HoldRollback))

	pids := clusterPIDs(g, dir)
	g.Expect(demo.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	select {
	case <-demo.done:
	case <-time.After(time.Minute):
		t.Fatal("tugboat dev demo did not exit within a minute of SIGINT")
	}
	g.Expect(demo.cmd.ProcessState.ExitCode()).To(Equal(0), demo.out())
	for _, pid := range pids {
		g.Expect(harness.ProcessAlive(pid)).To(BeFalse(), "pid %d after Ctrl-C", pid)
	}
	g.Expect(dir).NotTo(BeADirectory())
}

// findReady returns the Ready condition, or nil.
func findReady(conds []metav1.Condition) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == "Ready" {
			return &conds[i]
		}
	}
	return nil
}

// TestDevDemo_ctrlCMidwayWithABrokenPipeCleansUp interrupts the real demo
// while it waits for a promotion, its stdout a pipe whose reader went away
// (`tugboat dev demo | tee log`, with tee ended by the same Ctrl-C): it
// exits non-zero, no process of the environment survives, and its
// temporary directory is gone.
func TestDevDemo_ctrlCMidwayWithABrokenPipeCleansUp(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "demo")
	demo := startTugboat(t, dir, "dev", "demo", "--dir", dir)
	demo.waitForLine(t, "3. The hub promotes 1.0.0 to staging", 5*time.Minute)
	pids := clusterPIDs(g, dir)
	g.Expect(pids).To(HaveLen(4*5+4), "four clusters of five processes, the hub and three agents")
	g.Expect(demo.stdout.Close()).To(Succeed())
	g.Expect(demo.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	select {
	case <-demo.done:
	case <-time.After(time.Minute):
		t.Fatal("tugboat dev demo did not exit within a minute of SIGINT")
	}
	g.Expect(demo.cmd.ProcessState.ExitCode()).NotTo(Equal(0), "an interrupted demo did not finish")
	ws := demo.cmd.ProcessState.Sys().(syscall.WaitStatus)
	g.Expect(ws.Signaled()).To(BeFalse(), "it exited, not killed by signal %v", ws.Signal())
	for _, pid := range pids {
		g.Expect(harness.ProcessAlive(pid)).To(BeFalse(), "pid %d after Ctrl-C", pid)
	}
	g.Expect(dir).NotTo(BeADirectory())
}
