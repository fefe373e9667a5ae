package actions

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"tugboat.dev/tugboat/api/wire"
)

// Issue 12, Medium 2: what an action may not do, whatever the hub sends.

// An action may move a release to another version of its chart, never to
// another chart (the repository holds one, allowed by the limits).
func TestExecutor_refusesAnotherChartThanTheReleases(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	a := upgradeAction(ns, "web", "1.1.0")
	a.Chart.Name = otherChart
	out := execute(t, newExecutor(t, testOptions(allowAll())), a)
	g.Expect(out.Result).To(Equal(wire.ActionRefused), out.Message)
	g.Expect(out.Message).To(Equal("chart other is not the chart of release " + ns + "/web (web): an action may change the version of a release's chart, never the chart"))
	h := history(t, ns, "web")
	g.Expect(h).To(HaveLen(1), "no revision was made")
	g.Expect(h[0].Chart.Metadata.Name).To(Equal("web"))

	// The same for a Flux HelmRelease.
	g.Expect(cluster.Client.Create(ctx, helmRelease(ns, "web", "1.0.0"))).To(Succeed())
	a = upgradeAction(ns, "web", "1.1.0")
	a.Chart.Name = otherChart
	a.HelmRelease = &wire.HelmReleaseRef{Name: "web"}
	out = execute(t, newExecutor(t, testOptions(allowAll())), a)
	g.Expect(out.Result).To(Equal(wire.ActionRefused), out.Message)
	g.Expect(out.Message).To(ContainSubstring("never the chart"))
	g.Expect(nested(getHelmRelease(g, ns, "web").Object, "spec", "chart", "spec", "version")).To(Equal("1.0.0"))
}

// By default an action for a release that is not on the spoke fails: the
// hub cannot install new software on a spoke unless the spoke opts in.
func TestExecutor_doesNotInstallAMissingReleaseByDefault(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(NewOptions().InstallMissing).To(BeFalse())
	out := execute(t, newExecutor(t, testOptions(allowAll())), upgradeAction(ns, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(Equal("release " + ns + "/web does not exist on this spoke: not installed"))
	_, err := helmConfig(t, ns).Releases.History("web")
	g.Expect(err).To(HaveOccurred(), "nothing was installed")

	// Opted in, it installs, into an existing namespace only.
	opts := testOptions(allowAll())
	opts.InstallMissing = true
	out = execute(t, newExecutor(t, opts), upgradeAction(ns+"-absent", "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("not found"))
	g.Expect(cluster.Client.Get(context.Background(), types.NamespacedName{Name: ns + "-absent"}, &corev1.Namespace{})).NotTo(Succeed(), "no namespace was created")
}

// Credentials go only to the host the Secret names; a Secret without a host
// is refused with a clear error and its credentials are sent nowhere.
func TestExecutor_sendsCredentialsOnlyToTheirHost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	a := upgradeAction(ns, "web", "1.1.0")
	a.Chart.Repository = privateURL
	opts := testOptions(allowAll())
	opts.CredentialsSecret = ns + "/chart-credentials"
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chart-credentials"},
		Data:       map[string][]byte{"username": []byte(repoUser), "password": []byte(repoPassword)},
	}
	g.Expect(cluster.Client.Create(ctx, secret)).To(Succeed())

	before := credentialsSeen.Load()
	out := execute(t, newExecutor(t, opts), a)
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(Equal("the chart credentials Secret " + ns + "/chart-credentials must name, in its key host, the host (host[:port]) the credentials are for; they are sent nowhere else"))
	g.Expect(credentialsSeen.Load()).To(Equal(before), "the repository received no credentials")
	g.Expect(history(t, ns, "web")).To(HaveLen(1))

	// Named: sent to that host, and the upgrade goes through.
	secret.Data["host"] = []byte(chartsHost)
	g.Expect(cluster.Client.Update(ctx, secret)).To(Succeed())
	out = execute(t, newExecutor(t, opts), a)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(credentialsSeen.Load()).To(BeNumerically(">", before))
}

// The chart a HelmRelease runs: what helm-controller recorded, else the
// spec's chart, whose last path element names it for a Git source.
func TestHelmReleaseChart(t *testing.T) {
	g := NewWithT(t)
	hr := helmRelease("apps", "web", "1.0.0")
	g.Expect(helmReleaseChart(hr)).To(Equal("web"))
	g.Expect(unstructured.SetNestedField(hr.Object, "./charts/web", "spec", "chart", "spec", "chart")).To(Succeed())
	g.Expect(helmReleaseChart(hr)).To(Equal("web"))
	g.Expect(unstructured.SetNestedSlice(hr.Object, []any{map[string]any{"chartName": "web-app"}}, "status", "history")).To(Succeed())
	g.Expect(helmReleaseChart(hr)).To(Equal("web-app"))
	g.Expect(checkChartName(helmReleaseChart(hr), "web-app", "HelmRelease apps/web")).To(Succeed())
	g.Expect(checkChartName("", "web", "release apps/web")).To(Succeed(), "nothing to compare with")
}

// An action of a type this agent does not know is never carried out as an
// upgrade, and an action of another type without a version is invalid even
// to an agent that predates the type field (which ignores it).
func TestCheckAction_typesThisAgentDoesNotKnowAreInvalid(t *testing.T) {
	upgrade := wire.Action{ID: "a", Namespace: "apps", Release: "demo", Version: "1.1.0", Chart: wire.ChartSource{Repository: "https://charts.example", Name: "demo"}}
	for _, tc := range []struct {
		name    string
		mutate  func(*wire.Action)
		wantErr string
	}{
		{name: "an upgrade without a type", mutate: func(*wire.Action) {}},
		{name: "an upgrade by type", mutate: func(a *wire.Action) { a.Type = wire.ActionUpgrade }},
		{name: "a rollback with an upgrade's fields", mutate: func(a *wire.Action) { a.Type = wire.ActionRollback }, wantErr: "a rollback sets no version"},
		{name: "a rollback", mutate: func(a *wire.Action) {
			a.Type, a.Version, a.Chart = wire.ActionRollback, "", wire.ChartSource{}
			a.Rollback = &wire.RollbackAction{Revision: 1, Version: "1.0.0", From: "1.1.0", Undoes: "b"}
		}},
		{name: "a rollback without its field", mutate: func(a *wire.Action) { a.Type, a.Version = wire.ActionRollback, "" }, wantErr: "rollback is required"},
		{name: "a rollback to no revision", mutate: func(a *wire.Action) {
			a.Type, a.Version = wire.ActionRollback, ""
			a.Rollback = &wire.RollbackAction{Version: "1.0.0", Undoes: "b"}
		}, wantErr: "rollback.revision must be at least 1"},
		{name: "a HelmRelease rollback without from", mutate: func(a *wire.Action) {
			a.Type, a.Version, a.HelmRelease = wire.ActionRollback, "", &wire.HelmReleaseRef{Name: "demo"}
			a.Rollback = &wire.RollbackAction{Version: "1.0.0"}
		}, wantErr: "rollback.from is required for a HelmRelease"},
		{name: "an upgrade carrying a rollback", mutate: func(a *wire.Action) { a.Rollback = &wire.RollbackAction{Version: "1.0.0"} }, wantErr: "rollback is set only on a rollback action"},
		{name: "an unknown type", mutate: func(a *wire.Action) { a.Type = "delete" }, wantErr: `does not carry out "delete" actions`},
		{name: "another type as an older agent reads it", mutate: func(a *wire.Action) { a.Type, a.Version = "", "" }, wantErr: "version is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := upgrade
			tc.mutate(&a)
			err := checkAction(a)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("checkAction: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("checkAction = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
