package actions

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/wire"
)

// rollbackAction is the rollback of upgrade up (from version, at revision
// rev) that a promotion's hub queues.
func rollbackAction(up wire.Action, rev int, version string) wire.Action {
	return wire.Action{
		ID:        wire.NewRollbackActionID(randomHex(8), "spoke", up.Namespace, up.Release),
		Type:      wire.ActionRollback,
		Promotion: up.Promotion,
		Namespace: up.Namespace,
		Release:   up.Release,
		Rollback:  &wire.RollbackAction{Revision: rev, Version: version, From: up.Version, Undoes: up.ID},
		Created:   time.Now(),
	}
}

func TestExecutor_rollsBackTheUpgradeOnceWithHelm(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	// Downgrades are not allowed: a rollback returns to what the spoke ran.
	e := newExecutor(t, testOptions(allowAll()))
	up := upgradeAction(ns, "web", "1.1.0")
	g.Expect(execute(t, e, up).Result).To(Equal(wire.ActionSucceeded))

	rb := rollbackAction(up, 1, "1.0.0")
	out := execute(t, e, rb)
	g.Expect(out.ID).To(Equal(rb.ID))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Revision).To(Equal(3))
	g.Expect(out.Message).To(Equal("rolled back release " + ns + "/web to revision 1, chart version 1.0.0 (revision 3)"))

	h := history(t, ns, "web")
	g.Expect(h).To(HaveLen(3))
	g.Expect(h[1].Info.Status).To(Equal(release.StatusSuperseded))
	g.Expect(h[2].Info.Status).To(Equal(release.StatusDeployed))
	g.Expect(h[2].Info.Description).To(Equal("Rollback to 1"))
	g.Expect(h[2].Chart.Metadata.Version).To(Equal("1.0.0"))
	g.Expect(h[2].Manifest).To(Equal(h[0].Manifest))

	// Delivered again (or after a restart): done, no fourth revision.
	again := execute(t, e, rb)
	g.Expect(again.Result).To(Equal(wire.ActionSucceeded), again.Message)
	g.Expect(again.Revision).To(Equal(3))
	g.Expect(again.Message).To(ContainSubstring("already runs chart version 1.0.0 (revision 3): nothing to roll back"))
	g.Expect(history(t, ns, "web")).To(HaveLen(3))
}

// TestExecutor_keepsAtMostHistoryMaxRevisions: the agent's upgrades and
// rollbacks prune a release's history as helm --history-max does, oldest
// superseded revisions first, and a rollback still finds its revision.
func TestExecutor_keepsAtMostHistoryMaxRevisions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	opts := testOptions(allowAll())
	opts.HistoryMax = 2
	e := newExecutor(t, opts)

	g.Expect(execute(t, e, upgradeAction(ns, "web", "1.1.0")).Result).To(Equal(wire.ActionSucceeded))
	up := upgradeAction(ns, "web", "1.2.0")
	g.Expect(execute(t, e, up).Result).To(Equal(wire.ActionSucceeded))
	revisions := func() []int {
		var out []int
		for _, r := range history(t, ns, "web") {
			out = append(out, r.Version)
		}
		return out
	}
	g.Expect(revisions()).To(Equal([]int{2, 3}), "revision 1 pruned by the upgrade")

	out := execute(t, e, rollbackAction(up, 2, "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Revision).To(Equal(4))
	g.Expect(revisions()).To(Equal([]int{3, 4}), "revision 2 pruned by the rollback")
	g.Expect(last(t, ns, "web").Chart.Metadata.Version).To(Equal("1.1.0"))
}

func TestExecutor_refusesARollbackOverAnotherChange(t *testing.T) {
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	e := newExecutor(t, testOptions(allowAll()))
	up := upgradeAction(ns, "web", "1.1.0")
	if out := execute(t, e, up); out.Result != wire.ActionSucceeded {
		t.Fatalf("upgrade: %+v", out)
	}

	for _, tc := range []struct {
		name    string
		limits  Limits
		mutate  func(*wire.Action)
		result  string
		message string
	}{{
		name:    "a namespace outside the limits",
		limits:  Limits{Namespaces: []string{"elsewhere"}},
		result:  wire.ActionRefused,
		message: "namespace " + ns + " is not in --actions-allowed-namespaces",
	}, {
		name:    "a revision that runs another version than the hub recorded",
		limits:  allowAll(),
		mutate:  func(a *wire.Action) { a.Rollback.Version = "0.9.0" },
		result:  wire.ActionRefused,
		message: "revision 1 of release " + ns + "/web runs chart version 1.0.0, not 0.9.0 as the hub recorded",
	}, {
		name:    "a revision the history no longer holds",
		limits:  allowAll(),
		mutate:  func(a *wire.Action) { a.Rollback.Revision = 7 },
		result:  wire.ActionFailed,
		message: "release " + ns + "/web has no revision 7 to roll back to",
	}, {
		name:    "another upgrade's revision",
		limits:  allowAll(),
		mutate:  func(a *wire.Action) { a.Rollback.Undoes = "another-action" },
		result:  wire.ActionRefused,
		message: "release " + ns + "/web changed since the promotion's upgrade: its latest revision 2 (chart version 1.1.0, deployed) is not the one action another-action made",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rb := rollbackAction(up, 1, "1.0.0")
			if tc.mutate != nil {
				tc.mutate(&rb)
			}
			out := execute(t, newExecutor(t, testOptions(tc.limits)), rb)
			g.Expect(out.Result).To(Equal(tc.result), out.Message)
			g.Expect(out.Message).To(ContainSubstring(tc.message))
			g.Expect(history(t, ns, "web")).To(HaveLen(2), "nothing was rolled back")
		})
	}

	// A person upgraded since: the rollback never overwrites their change.
	t.Run("a person's upgrade since", func(t *testing.T) {
		g := NewWithT(t)
		u := action.NewUpgrade(helmConfig(t, ns))
		u.Namespace, u.ReuseValues = ns, true
		_, err := u.RunWithContext(context.Background(), "web", webChart(t, "1.2.0"), nil)
		g.Expect(err).NotTo(HaveOccurred())
		out := execute(t, e, rollbackAction(up, 1, "1.0.0"))
		g.Expect(out.Result).To(Equal(wire.ActionRefused), out.Message)
		g.Expect(out.Message).To(ContainSubstring("its latest revision 3 (chart version 1.2.0, deployed) is not the one action " + up.ID + " made"))
		g.Expect(history(t, ns, "web")).To(HaveLen(3))
		g.Expect(last(t, ns, "web").Chart.Metadata.Version).To(Equal("1.2.0"))
	})
}

// A rollback the agent was killed in (Helm's pending-rollback revision
// left behind) is replaced and done once.
func TestExecutor_completesARollbackKilledMidway(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	e := newExecutor(t, testOptions(allowAll()))
	up := upgradeAction(ns, "web", "1.1.0")
	g.Expect(execute(t, e, up).Result).To(Equal(wire.ActionSucceeded))

	cfg := helmConfig(t, ns)
	rb := action.NewRollback(cfg)
	rb.Version, rb.DryRun = 1, true
	g.Expect(rb.Run("web")).To(Succeed())
	first := history(t, ns, "web")[0]
	left := *first
	left.Version, left.Labels = 3, nil
	left.Info = &release.Info{
		FirstDeployed: first.Info.FirstDeployed, LastDeployed: helmTime(time.Now().Add(-time.Hour)),
		Status: release.StatusPendingRollback, Description: "Rollback to 1",
	}
	g.Expect(cfg.Releases.Create(&left)).To(Succeed())

	out := execute(t, e, rollbackAction(up, 1, "1.0.0"))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Revision).To(Equal(3))
	h := history(t, ns, "web")
	g.Expect(h).To(HaveLen(3))
	g.Expect(h[2].Info.Status).To(Equal(release.StatusDeployed))
	g.Expect(h[2].Chart.Metadata.Version).To(Equal("1.0.0"))
}

func TestExecutor_restoresAFluxHelmReleaseVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(helmRelease(ns, "web", "1.0.0")), client.FieldOwner("flux-test"))).To(Succeed())
	up := upgradeAction(ns, "web", "1.1.0")
	up.Chart = wire.ChartSource{}
	up.HelmRelease = &wire.HelmReleaseRef{Namespace: ns, Name: "web"}
	// Downgrades are not allowed; only the namespace limit applies.
	e := newExecutor(t, testOptions(Limits{Namespaces: []string{ns}}))
	g.Expect(execute(t, e, up).Result).To(Equal(wire.ActionSucceeded))

	rb := rollbackAction(up, 1, "1.0.0")
	rb.HelmRelease = up.HelmRelease
	out := execute(t, e, rb)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Message).To(ContainSubstring("spec.chart.spec.version to 1.0.0 (was 1.1.0)"))
	g.Expect(nested(getHelmRelease(g, ns, "web").Object, "spec", "chart", "spec", "version")).To(Equal("1.0.0"))

	out = execute(t, e, rb)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded))
	g.Expect(out.Message).To(ContainSubstring("already at chart version 1.0.0"))

	// Someone set another version since: refused, left as it is.
	g.Expect(cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(helmRelease(ns, "web", "1.2.0")), client.FieldOwner(FieldManager), client.ForceOwnership)).To(Succeed())
	out = execute(t, e, rb)
	g.Expect(out.Result).To(Equal(wire.ActionRefused), out.Message)
	g.Expect(out.Message).To(ContainSubstring("asks for chart version 1.2.0, not 1.1.0 that the promotion set"))
	g.Expect(nested(getHelmRelease(g, ns, "web").Object, "spec", "chart", "spec", "version")).To(Equal("1.2.0"))
}
