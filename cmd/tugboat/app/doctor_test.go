//go:build !agentonly

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// ago is a time d before now.
func ago(d time.Duration) metav1.Time {
	return metav1.NewTime(time.Now().Add(-d).Truncate(time.Second))
}

// withCLIVersion makes the CLI report v for the test.
func withCLIVersion(t *testing.T, v string) {
	t.Helper()
	old := app.Version
	app.Version = v
	t.Cleanup(func() { app.Version = old })
}

// newSpoke creates Spoke name in ns (with its key Secret when withKey)
// and writes its status as the hub would; the Spoke is deleted when the
// test ends.
func newSpoke(t *testing.T, ns, name string, withKey bool, status tugboatv1alpha1.SpokeStatus) {
	t.Helper()
	ctx := context.Background()
	if withKey {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-key"}, Data: map[string][]byte{"key": []byte("0123456789abcdef0123456789abcdef")}}
		if err := cluster.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	sp := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
	}
	if err := cluster.Client.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	// Other tests of the package expect no Spokes on the hub.
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), sp) })
	sp.Status = status
	if err := cluster.Client.Status().Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
}

func readySpoke(version string, releases int32) tugboatv1alpha1.SpokeStatus {
	seen := ago(10 * time.Second)
	return tugboatv1alpha1.SpokeStatus{
		ObservedGeneration: 1, LastSeen: &seen, AgentVersion: version, KubernetesVersion: "v1.36.3", ReleaseCount: releases,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AgentConnected",
			Message: "agent " + version + " is sending heartbeats", LastTransitionTime: seen, ObservedGeneration: 1}},
	}
}

func staleSpoke(version string) tugboatv1alpha1.SpokeStatus {
	seen := ago(2 * time.Hour)
	return tugboatv1alpha1.SpokeStatus{
		ObservedGeneration: 1, LastSeen: &seen, AgentVersion: version, ReleaseCount: 4,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "AgentNotSeen",
			Message: "no heartbeat since " + seen.UTC().Format(time.RFC3339) + " (timeout 1m30s)", LastTransitionTime: ago(time.Hour), ObservedGeneration: 1}},
	}
}

// readyPipeline gives a Pipeline the status of a reconciled one whose
// Ready condition is cond.
func readyPipeline(cond metav1.Condition, holds ...tugboatv1alpha1.HeldEnvironment) tugboatv1alpha1.PipelineStatus {
	cond.Type, cond.LastTransitionTime, cond.ObservedGeneration = "Ready", ago(time.Minute), 1
	return tugboatv1alpha1.PipelineStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond}, HeldEnvironments: holds}
}

// newPromotion creates the Promotion of version into env of p and writes
// its status.
func newPromotion(t *testing.T, p *tugboatv1alpha1.Pipeline, env, version string, status tugboatv1alpha1.PromotionStatus) *tugboatv1alpha1.Promotion {
	t.Helper()
	pr, err := request.Create(context.Background(), cluster.Client, p, env, version, tugboatv1alpha1.RequestedByCI, "ci")
	if err != nil {
		t.Fatal(err)
	}
	pr.Status = status
	if err := cluster.Client.Status().Update(context.Background(), pr); err != nil {
		t.Fatal(err)
	}
	return pr
}

// newTarget creates the PromotionTarget of pr's target spoke/namespace/
// release, owned by pr, with status st.
func newTarget(t *testing.T, pr *tugboatv1alpha1.Promotion, spoke, namespace, release string, st tugboatv1alpha1.PromotionTargetStatus) {
	t.Helper()
	ctx := context.Background()
	pt := &tugboatv1alpha1.PromotionTarget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pr.Namespace, Name: tugboatv1alpha1.PromotionTargetName(pr.Name, spoke, namespace, release),
			Labels:          map[string]string{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(pr.Name), tugboatv1alpha1.LabelSpoke: spoke},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pr, tugboatv1alpha1.GroupVersion.WithKind("Promotion"))},
		},
		Spec: tugboatv1alpha1.PromotionTargetSpec{Promotion: pr.Name, Spoke: spoke, Namespace: namespace, Release: release},
	}
	if err := cluster.Client.Create(ctx, pt); err != nil {
		t.Fatal(err)
	}
	pt.Status = st
	if err := cluster.Client.Status().Update(ctx, pt); err != nil {
		t.Fatal(err)
	}
}

func promotionCondition(status metav1.ConditionStatus, reason, msg string, since metav1.Time) []metav1.Condition {
	return []metav1.Condition{{Type: "Ready", Status: status, Reason: reason, Message: msg, LastTransitionTime: since, ObservedGeneration: 1}}
}

// newReleaseHistory creates ReleaseHistory <spoke>.apps.<release> in ns
// with a Ready condition.
func newReleaseHistory(t *testing.T, ns, spoke, release string, ready metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(spoke, "apps", release)},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: spoke, Namespace: "apps", Release: release},
	}
	if err := cluster.Client.Create(context.Background(), rh); err != nil {
		t.Fatal(err)
	}
	rh.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: ready, Reason: reason, Message: msg, LastTransitionTime: ago(time.Minute)}}
	if err := cluster.Client.Status().Update(context.Background(), rh); err != nil {
		t.Fatal(err)
	}
}

// doctorJSON runs `tugboat doctor -o json` with args and returns its
// findings and error.
func doctorJSON(t *testing.T, kubeconfig string, args ...string) ([]app.Finding, error) {
	t.Helper()
	cmd := app.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(append([]string{"doctor", "-o", "json", "--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(context.Background())
	var findings []app.Finding
	if jerr := json.Unmarshal(out.Bytes(), &findings); jerr != nil {
		t.Fatalf("doctor -o json printed no JSON list (%v): %s", jerr, out.String())
	}
	return findings, err
}

// findingsOf returns the findings of check about object.
func findingsOf(findings []app.Finding, check, object string) []app.Finding {
	var out []app.Finding
	for _, f := range findings {
		if f.Check == check && f.Object == object {
			out = append(out, f)
		}
	}
	return out
}

// severities counts findings by severity.
func severities(findings []app.Finding) map[string]int {
	n := map[string]int{}
	for _, f := range findings {
		n[string(f.Severity)]++
	}
	return n
}

// haveFinding matches a finding of severity whose message contains msg.
func haveFinding(sev, msg string) OmegaMatcher {
	return ContainElement(And(
		HaveField("Severity", BeEquivalentTo(sev)),
		HaveField("Message", ContainSubstring(msg)),
	))
}

func TestDoctor_healthyNamespaceHasNoProblems(t *testing.T) {
	g := NewWithT(t)
	withCLIVersion(t, "v0.3.0")
	ns := newNamespace(t)
	newSpoke(t, ns, "dev-1", true, readySpoke("v0.3.1", 3))
	p := newPipeline(t, ns, "web")
	writeStatus(t, p, readyPipeline(metav1.Condition{Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "every target reports"}))
	newPromotion(t, p, "staging", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionSucceeded,
		Conditions: promotionCondition(metav1.ConditionTrue, "Succeeded", "done", ago(time.Hour))})
	newReleaseHistory(t, ns, "dev-1", "web", metav1.ConditionTrue, "Current", "revision 3 (web 1.4.0) is healthy")

	findings, err := doctorJSON(t, cluster.KubeconfigPath, "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), "%+v", findings)
	g.Expect(severities(findings)).To(Equal(map[string]int{"ok": 7}), "%+v", findings)
	g.Expect(findingsOf(findings, "crds", "")).To(haveFinding("ok", "Spoke, ReleaseHistory, Pipeline, Promotion, PromotionTarget, PromotionPreview, Lifecycle, LifecycleEvent and SpokeClass are installed, established and serve tugboat.dev/v1alpha1"))
	g.Expect(findingsOf(findings, "hub", "")).To(haveFinding("ok", "the receiver records heartbeats: 1 of 1 Spoke reported in the last 10m"))
	g.Expect(findingsOf(findings, "hub", "")).To(haveFinding("ok", "the controllers reconcile: 2 of 2 Spokes and Pipelines are up to date"))
	g.Expect(findingsOf(findings, "spoke", ns+"/dev-1")).To(ConsistOf(HaveField("Message", MatchRegexp(`^Ready, last seen \d+s ago, agent v0\.3\.1, Kubernetes v1\.36\.3, 3 releases$`))))
	g.Expect(findingsOf(findings, "pipeline", ns+"/web")).To(haveFinding("ok", "Ready (Succeeded): every target reports"))
	g.Expect(findingsOf(findings, "promotion", "")).To(haveFinding("ok", "1 Promotion in namespace "+ns+": none stuck, none failed"))
	g.Expect(findingsOf(findings, "releasehistory", "")).To(haveFinding("ok", "1 ReleaseHistory in namespace "+ns+", none Ready=False"))
	for _, f := range findings {
		g.Expect(f.Hint).To(BeEmpty(), "an ok finding has no hint: %+v", f)
	}

	out, _, err := tugboat("doctor", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HavePrefix("Checking tugboat on the hub https://"))
	g.Expect(lineWith(out, "STATUS", "CHECK", "OBJECT", "FINDING")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, "ok", "spoke", ns+"/dev-1")).NotTo(BeNil(), out)
	g.Expect(strings.Index(out, "crds")).To(BeNumerically("<", strings.Index(out, "releasehistory")), "checks in order:\n%s", out)
	g.Expect(out).To(HaveSuffix("\nNo problems found.\n"))
}

func TestDoctor_reportsProblemsAndFails(t *testing.T) {
	g := NewWithT(t)
	withCLIVersion(t, "v0.3.0")
	ns := newNamespace(t)
	newSpoke(t, ns, "dev-1", true, readySpoke("v0.2.4", 0))
	newSpoke(t, ns, "prod-1", false, staleSpoke("v0.3.0"))

	web := newPipeline(t, ns, "web")
	writeStatus(t, web, readyPipeline(metav1.Condition{Status: metav1.ConditionFalse, Reason: "TargetNotFound",
		Message: "spoke prod-1 is not Ready: no heartbeat since 2026-05-01T10:00:00Z (timeout 1m30s)"},
		tugboatv1alpha1.HeldEnvironment{Name: "staging", Since: ago(3 * time.Hour), Version: "1.2.0", Message: "rolled back from 1.3.0 (revision 4) to 1.2.0 (revision 5)"}))
	api := newPipeline(t, ns, "api")
	api.Spec.Suspend = true
	g.Expect(cluster.Client.Update(context.Background(), api)).To(Succeed())
	stalled := readyPipeline(metav1.Condition{Status: metav1.ConditionFalse, Reason: "InvalidSpec", Message: `environment "qa" is listed twice`})
	stalled.ObservedGeneration = api.Generation
	stalled.Conditions[0].ObservedGeneration = api.Generation
	stalled.Conditions = append(stalled.Conditions, metav1.Condition{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "InvalidSpec",
		Message: `environment "qa" is listed twice`, LastTransitionTime: ago(time.Minute), ObservedGeneration: api.Generation})
	writeStatus(t, api, stalled)

	waiting := tugboatv1alpha1.PromotionWaitingApproval
	longWait := newPromotion(t, web, "production", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: waiting,
		Conditions: promotionCondition(metav1.ConditionUnknown, "WaitingForApproval", "waits for approval", ago(50*time.Hour))})
	newPromotion(t, web, "production", "1.4.1", tugboatv1alpha1.PromotionStatus{Phase: waiting,
		Conditions: promotionCondition(metav1.ConditionUnknown, "WaitingForApproval", "waits for approval", ago(time.Hour))})
	started := ago(27 * time.Minute)
	nearTimeout := newPromotion(t, web, "staging", "1.5.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionVerifying, StartedAt: &started})
	newTarget(t, nearTimeout, "staging-1", "apps", "web", tugboatv1alpha1.PromotionTargetStatus{Message: "runs 1.4.0"})
	startedLong := ago(2 * time.Hour)
	pastTimeout := newPromotion(t, api, "staging", "2.0.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionRunning, StartedAt: &startedLong})
	failedAt := ago(time.Hour)
	failed := newPromotion(t, api, "production", "1.9.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionFailed, CompletedAt: &failedAt,
		Conditions: promotionCondition(metav1.ConditionFalse, "StrategyFailed", "push rejected: 403", failedAt)})
	oldFailedAt, laterAt := ago(5*time.Hour), ago(4*time.Hour)
	oldFailed := newPromotion(t, web, "dev", "1.3.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionFailed, CompletedAt: &oldFailedAt,
		Conditions: promotionCondition(metav1.ConditionFalse, "TimedOut", "timed out after 30m0s waiting for dev-1/apps/web", oldFailedAt)})
	newPromotion(t, web, "dev", "1.3.1", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionSucceeded, CompletedAt: &laterAt})

	newReleaseHistory(t, ns, "dev-1", "web", metav1.ConditionFalse, "Failed", "Deployment web: ImagePullBackOff")
	newReleaseHistory(t, ns, "dev-1", "api", metav1.ConditionFalse, "Failed", "Job migrate failed")
	newReleaseHistory(t, ns, "prod-1", "old", metav1.ConditionFalse, "Uninstalled", "the release is not installed on the spoke")
	newReleaseHistory(t, ns, "prod-1", "web", metav1.ConditionTrue, "Current", "healthy")

	findings, err := doctorJSON(t, cluster.KubeconfigPath, "-n", ns)
	g.Expect(err).To(MatchError("doctor found 6 errors and 9 warnings"), "%+v", findings)
	g.Expect(severities(findings)).To(HaveKeyWithValue("error", 6))

	// The hub runs: dev-1 reported.
	g.Expect(findingsOf(findings, "hub", "")).To(haveFinding("ok", "1 of 2 Spokes reported in the last 10m"))

	dev := findingsOf(findings, "spoke", ns+"/dev-1")
	g.Expect(dev).To(ContainElement(HaveField("Message", MatchRegexp(`^Ready, last seen \d+s ago, agent v0\.2\.4, Kubernetes v1\.36\.3, 0 releases$`))))
	g.Expect(dev).To(haveFinding("warning", "agent v0.2.4, this CLI v0.3.0: versions differ in major or minor"))
	g.Expect(dev).To(haveFinding("warning", "its agent reports no Helm releases"))
	prod := findingsOf(findings, "spoke", ns+"/prod-1")
	g.Expect(prod).To(HaveLen(2), "%+v", prod)
	g.Expect(prod[0].Severity).To(BeEquivalentTo("error"))
	g.Expect(prod[0].Message).To(HavePrefix("not Ready (Unknown, AgentNotSeen): no heartbeat since "))
	g.Expect(prod[0].Hint).To(ContainSubstring("check the agent on spoke prod-1"))
	g.Expect(prod[1].Severity).To(BeEquivalentTo("error"))
	g.Expect(prod[1].Message).To(Equal("key Secret " + ns + "/prod-1-key does not exist: the hub cannot verify the agent"))

	webF := findingsOf(findings, "pipeline", ns+"/web")
	g.Expect(webF).To(haveFinding("error", "not Ready (TargetNotFound): spoke prod-1 is not Ready"))
	g.Expect(webF).To(haveFinding("warning", "automatic promotion into staging is held after a rollback, since 3h ago: rolled back from 1.3.0"))
	g.Expect(webF).To(ContainElement(HaveField("Hint", "once the rollback is dealt with: tugboat resume web --env staging -n "+ns)))
	apiF := findingsOf(findings, "pipeline", ns+"/api")
	g.Expect(apiF).To(haveFinding("error", `Stalled (InvalidSpec): environment "qa" is listed twice`))
	g.Expect(apiF).To(haveFinding("warning", "suspended: no automatic promotions"))

	g.Expect(findingsOf(findings, "promotion", ns+"/"+longWait.Name)).To(ConsistOf(And(
		HaveField("Severity", BeEquivalentTo("warning")),
		HaveField("Message", "1.4.0 into production of pipeline web has waited for approval for 2d2h"),
		HaveField("Hint", "tugboat approve "+longWait.Name+" -n "+ns+", or tugboat reject "+longWait.Name+" -n "+ns))))
	g.Expect(findingsOf(findings, "promotion", ns+"/"+nearTimeout.Name)).To(ConsistOf(HaveField("Message",
		"1.5.0 into staging of pipeline web is Verifying for 27m of its 30m timeout; waiting for staging-1/apps/web (runs 1.4.0)")))
	g.Expect(findingsOf(findings, "promotion", ns+"/"+pastTimeout.Name)).To(haveFinding("error", "is Running for 2h, past its 30m timeout, and the hub has not failed it"))
	g.Expect(findingsOf(findings, "promotion", ns+"/"+failed.Name)).To(haveFinding("error", "1.9.0 into production of pipeline api failed 1h ago (StrategyFailed): push rejected: 403"))
	g.Expect(findingsOf(findings, "promotion", ns+"/"+oldFailed.Name)).To(haveFinding("warning", "failed 5h ago (TimedOut): timed out after 30m0s waiting for dev-1/apps/web; since then 1.3.1 succeeded"))

	rh := findingsOf(findings, "releasehistory", "")
	g.Expect(rh).To(HaveLen(2))
	g.Expect(rh[0]).To(And(HaveField("Severity", BeEquivalentTo("warning")),
		HaveField("Message", "2 ReleaseHistories Ready=False (Failed): "+ns+"/dev-1.apps.api, "+ns+"/dev-1.apps.web (dev-1.apps.api: Job migrate failed)"),
		HaveField("Hint", "see what happened on the spoke: tugboat history dev-1/apps/api -n "+ns+" --events")))
	g.Expect(rh[1].Message).To(HavePrefix("1 ReleaseHistory Ready=False (Uninstalled): " + ns + "/prod-1.apps.old"))

	// Sorted: by check, then object.
	order := map[string]int{"connection": 0, "crds": 1, "hub": 2, "spoke": 3, "pipeline": 4, "promotion": 5, "releasehistory": 6}
	for i := 1; i < len(findings); i++ {
		a, b := findings[i-1], findings[i]
		g.Expect(order[a.Check] < order[b.Check] || (a.Check == b.Check && a.Object <= b.Object)).To(BeTrue(), "%+v before %+v", a, b)
	}

	// The table says the same, one line per finding, and the run fails.
	out, _, err := tugboat("doctor", "-n", ns)
	g.Expect(err).To(MatchError("doctor found 6 errors and 9 warnings"))
	g.Expect(lineWith(out, "error", "spoke", ns+"/prod-1", "key")).NotTo(BeNil(), out)
	g.Expect(out).To(ContainSubstring("does not exist: the hub cannot verify the agent; hint: the hub's Spoke controller generates it"))
	g.Expect(out).To(HaveSuffix("\n6 errors, 9 warnings.\n"))

	// Fewer failures reported with --failures 0: one error less.
	_, err = doctorJSON(t, cluster.KubeconfigPath, "-n", ns, "--failures", "0")
	g.Expect(err).To(MatchError("doctor found 5 errors and 8 warnings"))
}

func TestDoctor_hubNotRunning(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	// A Spoke that reported long ago and that no controller reconciled,
	// and a Pipeline without status.
	seen := ago(3 * time.Hour)
	newSpoke(t, ns, "dev-1", true, tugboatv1alpha1.SpokeStatus{LastSeen: &seen, AgentVersion: "v0.3.0", ReleaseCount: 2})
	newPipeline(t, ns, "web")

	findings, err := doctorJSON(t, cluster.KubeconfigPath, "-n", ns, "--reconcile-grace", "0s")
	g.Expect(err).To(HaveOccurred())
	hub := findingsOf(findings, "hub", "")
	g.Expect(hub).To(HaveLen(2), "%+v", hub)
	g.Expect(hub[0].Severity).To(BeEquivalentTo("error"))
	g.Expect(hub[0].Message).To(Equal("no Spoke has reported in the last 10m (latest: " + ns + "/dev-1, 3h ago)"))
	g.Expect(hub[0].Hint).To(ContainSubstring("kubectl -n tugboat-system logs deploy/tugboat-hub"))
	g.Expect(hub[1]).To(And(HaveField("Severity", BeEquivalentTo("error")),
		HaveField("Message", "the hub's controllers are not reconciling: none of 2 Spokes and Pipelines has status.observedGeneration up to its generation")))
	g.Expect(findingsOf(findings, "spoke", ns+"/dev-1")).To(haveFinding("warning", "no Ready condition: the hub has not reconciled it (last seen 3h ago)"))
	g.Expect(findingsOf(findings, "pipeline", ns+"/web")).To(haveFinding("warning", "no Ready condition: the hub has not reconciled it"))

	// Within the grace period nothing counts against the controllers.
	findings, _ = doctorJSON(t, cluster.KubeconfigPath, "-n", ns, "--reconcile-grace", "1h")
	g.Expect(findingsOf(findings, "hub", "")).To(HaveLen(1))
	g.Expect(findingsOf(findings, "pipeline", ns+"/web")).To(haveFinding("ok", "just created or changed"))

	// A longer --stale-after accepts the old heartbeat.
	findings, _ = doctorJSON(t, cluster.KubeconfigPath, "-n", ns, "--stale-after", "4h", "--reconcile-grace", "1h")
	g.Expect(findingsOf(findings, "hub", "")).To(haveFinding("ok", "1 of 1 Spoke reported in the last 4h"))

	// A namespace without Spokes only warns: exit status 0.
	empty := newNamespace(t)
	findings, err = doctorJSON(t, cluster.KubeconfigPath, "-n", empty)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(findingsOf(findings, "hub", "")).To(ConsistOf(And(HaveField("Severity", BeEquivalentTo("warning")),
		HaveField("Message", "no Spokes in namespace "+empty+": nothing reports to the hub"))))

	// -A covers every namespace.
	findings, _ = doctorJSON(t, cluster.KubeconfigPath, "-A", "--reconcile-grace", "1h")
	g.Expect(findingsOf(findings, "spoke", ns+"/dev-1")).NotTo(BeEmpty())
	g.Expect(findingsOf(findings, "promotion", "")).To(Or(BeEmpty(), haveFinding("ok", "in any namespace")))
}

func TestDoctor_forbiddenReadIsAFinding(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newSpoke(t, ns, "dev-1", true, readySpoke("v0.3.0", 1))
	p := newPipeline(t, ns, "web")
	writeStatus(t, p, readyPipeline(metav1.Condition{Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "every target reports"}))

	// doctor-alice may read Pipelines, Promotions and ReleaseHistories in
	// ns, not Spokes nor Secrets.
	const user = "doctor-alice"
	role := grantRead(t, user, ns, "pipelines", "promotions", "releasehistories")
	path := impersonating(t, user).kubeconfig

	var (
		findings []app.Finding
		err      error
	)
	// RBAC takes effect once the API server's informers see the binding.
	g.Eventually(func(g Gomega) {
		findings, err = doctorJSON(t, path, "-n", ns)
		g.Expect(findingsOf(findings, "pipeline", ns+"/web")).To(haveFinding("ok", "Ready (Succeeded)"))
	}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(err).To(MatchError("doctor found 1 error and 0 warnings"), "%+v", findings)
	g.Expect(findingsOf(findings, "spoke", "")).To(ConsistOf(And(
		HaveField("Severity", BeEquivalentTo("error")),
		HaveField("Message", "cannot list spokes.tugboat.dev in namespace "+ns+": forbidden"),
		HaveField("Hint", "user "+user+" needs list on spokes.tugboat.dev in namespace "+ns+" (a Role and RoleBinding in "+ns+"), or use a context that has it"))))
	g.Expect(findingsOf(findings, "crds", "")).To(haveFinding("ok", "serve tugboat.dev/v1alpha1"))
	g.Expect(findingsOf(findings, "hub", "")).To(haveFinding("ok", "the controllers reconcile: 1 of 1 Spokes and Pipelines are up to date"))

	// With Spokes readable, the Secrets they name are not: a warning.
	role.Rules[0].Resources = append(role.Rules[0].Resources, "spokes")
	g.Expect(cluster.Client.Update(ctx, role)).To(Succeed())
	g.Eventually(func(g Gomega) {
		findings, err = doctorJSON(t, path, "-n", ns)
		g.Expect(findingsOf(findings, "spoke", ns+"/dev-1")).To(haveFinding("ok", "Ready"))
	}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(err).NotTo(HaveOccurred(), "%+v", findings)
	g.Expect(findingsOf(findings, "spoke", ns)).To(ConsistOf(And(
		HaveField("Severity", BeEquivalentTo("warning")),
		HaveField("Message", "cannot check the Spokes' key Secrets in namespace "+ns+": forbidden"),
		HaveField("Hint", "user "+user+" needs get on secrets in namespace "+ns+" for doctor to check them"))))
}

func TestDoctor_crdsMissingNotEstablishedOrOtherVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const group = "doctor.tugboat.test"
	// widgets first takes its names, so that gizmos (below) conflicts with it.
	widgets := newCRD(t, group, "widgets", "Widget", "v1alpha1")
	waitCRDCondition(t, widgets.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	newCRD(t, group, "sprockets", "Sprocket", "v1beta1")
	// Same kind as widgets: its names are not accepted, so it never becomes
	// established.
	gizmos := newCRD(t, group, "gizmos", "Widget", "v1alpha1")
	waitCRDCondition(t, gizmos.Name, apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse)

	kinds := [][2]string{{"widgets", "Widget"}, {"gadgets", "Gadget"}, {"gizmos", "Gizmo"}, {"sprockets", "Sprocket"}}
	var findings []app.Finding
	g.Eventually(func(g Gomega) {
		var err error
		findings, err = app.DoctorCRDFindings(ctx, cluster.RESTConfig, group, "v1alpha1", kinds)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(findingsOf(findings, "crds", "widgets."+group)).To(BeEmpty(), "widgets is served")
		g.Expect(findingsOf(findings, "crds", "sprockets."+group)).To(haveFinding("error", "does not serve"))
		// Discovery learns the group's preferred version (v1beta1, from
		// sprockets) a moment after the CRD is served: wait for it too.
		g.Expect(findings).To(HaveLen(4), "%+v", findings)
	}).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	// The group serves v1beta1 too (sprockets), which Kubernetes prefers.
	g.Expect(findingsOf(findings, "crds", "")).To(ConsistOf(And(
		HaveField("Severity", BeEquivalentTo("warning")),
		HaveField("Message", "the hub prefers "+group+"/v1beta1; this CLI speaks "+group+"/v1alpha1"))))
	g.Expect(findingsOf(findings, "crds", "gadgets."+group)).To(ConsistOf(And(
		HaveField("Severity", BeEquivalentTo("error")),
		HaveField("Message", "Gadget is not installed: no CustomResourceDefinition gadgets."+group),
		HaveField("Hint", ContainSubstring("tugboat install hub")))))
	g.Expect(findingsOf(findings, "crds", "gizmos."+group)).To(ConsistOf(And(
		HaveField("Severity", BeEquivalentTo("error")),
		HaveField("Message", And(HavePrefix("CRD gizmos."+group+" is not established ("), ContainSubstring("Widget"))))))
	g.Expect(findingsOf(findings, "crds", "sprockets."+group)).To(ConsistOf(HaveField("Message",
		"CRD sprockets."+group+" does not serve v1alpha1 (it serves v1beta1); this CLI speaks "+group+"/v1alpha1")))

	// A group the hub does not have at all.
	findings, err := app.DoctorCRDFindings(ctx, cluster.RESTConfig, "absent.tugboat.test", "v1alpha1", [][2]string{{"spokes", "Spoke"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(findings).To(ConsistOf(HaveField("Message", "Spoke is not installed: no CustomResourceDefinition spokes.absent.tugboat.test")))
}

func TestDoctor_unreachableHub(t *testing.T) {
	g := NewWithT(t)
	path := writeKubeconfig(t, "https://127.0.0.1:1", false, func(*clientcmdapi.AuthInfo) {}) // nothing listens there
	findings, err := doctorJSON(t, path)
	g.Expect(err).To(MatchError("doctor found 1 error and 0 warnings"))
	g.Expect(findings).To(ConsistOf(And(
		HaveField("Check", "connection"),
		HaveField("Message", HavePrefix("cannot reach the hub's API server at 127.0.0.1:1: ")))))
}

func ptrTo[T any](v T) *T { return &v }
