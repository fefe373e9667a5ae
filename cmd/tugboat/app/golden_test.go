//go:build !agentonly

package app_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

var update = flag.Bool("update", false, "rewrite the golden files of the CLI tests (testdata/golden) with what the CLI prints now")

// The fixtures' times (t0, t1) stay in the golden files; every other
// timestamp (now, when a vote or a request was recorded) and every age is
// masked.
var (
	timestampRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	// ageRE matches a duration as doctor prints an age ("3d4h", "12s").
	ageRE = regexp.MustCompile(`\b(\d+(\.\d+)?(ms|s|m|h|d))+\b`)
	// columnGapRE is the padding between a table's columns: its width
	// follows the longest cell, which may hold an age ("9s" or "10s"), so
	// it is compared as two spaces.
	columnGapRE = regexp.MustCompile(`(\S) {2,}`)
)

// goldenRun runs the CLI with args and renders what it printed, the error
// and the exit code as one deterministic text: the generated namespace,
// the kubeconfig's path, the API server's address and timestamps other
// than the fixtures' are masked.
func goldenRun(ns string, masks map[string]string, args ...string) string {
	cmd := app.NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	var b strings.Builder
	b.WriteString("$ tugboat " + strings.Join(args, " ") + "\n")
	b.WriteString(out.String())
	if errOut.Len() > 0 {
		b.WriteString("--- stderr\n" + errOut.String())
	}
	if err != nil {
		b.WriteString("--- error\ntugboat: " + err.Error() + "\n")
	}
	fmt.Fprintf(&b, "--- exit code %d\n", app.ExitCode(err))
	s := b.String()
	for from, to := range masks {
		s = strings.ReplaceAll(s, from, to)
	}
	s = strings.ReplaceAll(s, ns, "NAMESPACE")
	s = ageRE.ReplaceAllString(s, "AGE")
	s = columnGapRE.ReplaceAllString(s, "$1  ")
	return timestampRE.ReplaceAllStringFunc(s, func(ts string) string {
		if ts == t0.UTC().Format("2006-01-02T15:04:05Z") || ts == t1.UTC().Format("2006-01-02T15:04:05Z") {
			return ts
		}
		return "TIME"
	})
}

// expectGolden compares got with testdata/golden/<name>.golden (rewritten
// with -update).
func expectGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s ./cmd/tugboat/app -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -run '%s' ./cmd/tugboat/app -update rewrites it):\n--- got\n%s\n--- want\n%s", name, path, t.Name(), got, want)
	}
}

// goldenFleet writes the fixtures of the golden tests into ns: Pipelines
// web (reported, a promotion under way, production held) and api (not
// reported), Spokes dev-1 (Ready) and staging-1 (not seen yet), the
// ReleaseHistory of web on staging-1 with two revisions and events, and
// Promotions of web into production: 1.4.0 and 1.4.1 waiting for approval,
// 1.3.0 succeeded.
func goldenFleet(t *testing.T, ns string) map[string]string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	reportedPipeline(t, ns)
	newPipeline(t, ns, "api")
	deleteSpokesAtEnd(t, ns)
	reportedSpoke(t, ns, "dev-1", metav1.ConditionTrue, &t1, "v0.3.0", 2)
	reportedSpoke(t, ns, "staging-1", metav1.ConditionUnknown, nil, "", 0)
	recordRelease(t, ns, "dev-1", "apps", "api", "api", "2.0.0", tugboatv1alpha1.HealthFailed)
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName("staging-1", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "staging-1", Namespace: "apps", Release: "web"},
	}
	g.Expect(cluster.Client.Create(ctx, rh)).To(Succeed())
	r7 := tugboatv1alpha1.RevisionSummary{Revision: 7, Chart: "web", ChartVersion: "1.4.0", AppVersion: "1.4.0", ValuesDigest: "sha256:" + strings.Repeat("0a", 32),
		Status: tugboatv1alpha1.ReleaseStatusDeployed, Health: tugboatv1alpha1.HealthCurrent, FirstDeployed: &t1, LastDeployed: &t1}
	r6 := tugboatv1alpha1.RevisionSummary{Revision: 6, Chart: "web", ChartVersion: "1.3.0", AppVersion: "1.3.0",
		Status: tugboatv1alpha1.ReleaseStatusSuperseded, Health: tugboatv1alpha1.HealthFailed, HealthReason: "Deployment web: progress deadline exceeded", FirstDeployed: &t0, LastDeployed: &t0}
	rh.Status.Current = &r7
	rh.Status.Revisions = []tugboatv1alpha1.Revision{
		{RevisionSummary: r7, Events: []tugboatv1alpha1.ReleaseEvent{
			{ID: "e1", Time: t1, Type: "Normal", Reason: "ScalingReplicaSet", Object: &tugboatv1alpha1.EventObjectReference{Kind: "Deployment", Name: "web"}, Message: "Scaled up web-7d9f to 3", Count: 2},
			{ID: "e2", Time: t1, Type: "Normal", Reason: "RolloutComplete", Message: "rollout complete"},
		}},
		{RevisionSummary: r6},
	}
	g.Expect(cluster.Client.Status().Update(ctx, rh)).To(Succeed())

	p := &tugboatv1alpha1.Pipeline{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, p)).To(Succeed())
	for version, phase := range map[string]tugboatv1alpha1.PromotionPhase{
		"1.4.0": tugboatv1alpha1.PromotionWaitingApproval, "1.4.1": tugboatv1alpha1.PromotionWaitingApproval, "1.3.0": tugboatv1alpha1.PromotionSucceeded,
	} {
		pr, err := request.Create(ctx, cluster.Client, p, "production", version, tugboatv1alpha1.RequestedByCI, "ci")
		g.Expect(err).NotTo(HaveOccurred())
		setPhase(g, pr, phase)
	}
	return map[string]string{cluster.RESTConfig.Host: "https://HUB", cluster.KubeconfigPath: "KUBECONFIG"}
}

// TestGolden runs every user verb against the harness, in table, wide,
// JSON and YAML, with unknown names, and compares what it prints, its
// error and its exit code with testdata/golden. The verbs that change
// something run last, in order. Color never reaches a buffer.
func TestGolden(t *testing.T) {
	ns := newNamespace(t)
	masks := goldenFleet(t, ns)
	kc := []string{"-n", ns, "--kubeconfig", cluster.KubeconfigPath}
	formats := []string{"table", "wide", "json", "yaml"}
	cases := []struct {
		name string
		args []string
		// formats: each of these is a case of its own (-o F).
		formats []string
	}{
		{"status", []string{"status"}, formats},
		{"status-web", []string{"status", "web"}, formats},
		{"status-unknown", []string{"status", "nope"}, nil},
		{"history", []string{"history", "staging-1/apps/web"}, formats},
		{"history-events", []string{"history", "staging-1/apps/web", "--events"}, nil},
		{"history-unknown", []string{"history", "staging-1/apps/nope"}, nil},
		{"releases", []string{"releases"}, formats},
		{"releases-unknown-spoke", []string{"releases", "--spoke", "nope"}, nil},
		{"spoke-list", []string{"spoke", "list"}, formats},
		{"spoke-remove-unknown", []string{"spoke", "remove", "nope"}, nil},
		{"spoke-rotate-key-unknown", []string{"spoke", "rotate-key", "nope"}, nil},
		{"target", []string{"target"}, formats},
		// Generous graces: the findings do not depend on how fast this runs.
		{"doctor", []string{"doctor", "--reconcile-grace", "1h", "--approval-age", "1h"}, formats},
		{"bad-output", []string{"status", "-o", "csv"}, nil},
		{"promote-unknown", []string{"promote", "nope", "--to", "production", "--version", "1.5.0"}, nil},
		{"promote-unknown-environment", []string{"promote", "web", "--to", "qa", "--version", "1.5.0"}, nil},
		{"approve-unknown", []string{"approve", "nope"}, nil},
		{"approve-finished", []string{"approve", "web-production-1.3.0"}, nil},
		{"abort-unknown", []string{"abort", "nope"}, nil},
		{"abort-finished", []string{"abort", "web-production-1.3.0"}, nil},
		{"resume-unknown", []string{"resume", "nope", "--env", "production"}, nil},
		// Changes: the first of each prints the change, the same again in
		// JSON and YAML prints the unchanged result.
		{"promote", []string{"promote", "web", "--to", "production", "--version", "1.5.0"}, formats},
		{"approve", []string{"approve", "web-production-1.4.0", "-m", "canary is fine"}, formats},
		{"reject", []string{"reject", "web-production-1.4.1", "-m", "freeze"}, formats},
		{"abort", []string{"abort", "web-production-1.5.0", "-m", "wrong build"}, formats},
		{"resume", []string{"resume", "web", "--env", "production"}, formats},
	}
	// version reads no hub.
	for _, f := range formats {
		expectGolden(t, "version."+f, goldenRun(ns, masks, "version", "-o", f))
	}
	for _, c := range cases {
		if c.formats == nil {
			expectGolden(t, c.name, goldenRun(ns, masks, append(c.args, kc...)...))
			continue
		}
		for _, f := range c.formats {
			expectGolden(t, c.name+"."+f, goldenRun(ns, masks, append(append(c.args, kc...), "-o", f)...))
		}
	}
}

// Without -n, the namespace is the kubeconfig context's, as for kubectl:
// the same output as with -n.
func TestGolden_namespaceFromTheContext(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	masks := goldenFleet(t, ns)
	inContext := kubeconfigVariant(t, cluster.KubeconfigPath, func(c *clientcmdapi.Config) { c.Contexts[c.CurrentContext].Namespace = ns })
	for _, args := range [][]string{{"status"}, {"status", "web", "-o", "yaml"}, {"releases"}, {"spoke", "list", "-o", "json"}, {"history", "staging-1/apps/web"}} {
		withFlag := goldenRun(ns, masks, append(args, "-n", ns, "--kubeconfig", cluster.KubeconfigPath)...)
		fromContext := goldenRun(ns, masks, append(args, "--kubeconfig", inContext)...)
		// Only the command lines differ.
		cut := func(s string) string { return s[strings.Index(s, "\n")+1:] }
		g.Expect(cut(fromContext)).To(Equal(cut(withFlag)), "%v", args)
		g.Expect(cut(fromContext)).To(ContainSubstring("exit code 0"))
	}
	out := goldenRun(ns, masks, "target", "--kubeconfig", inContext, "-o", "json")
	g.Expect(out).To(ContainSubstring(`"namespace": "NAMESPACE"`))
	g.Expect(out).To(ContainSubstring(`"namespaceFrom": "context"`))
}
