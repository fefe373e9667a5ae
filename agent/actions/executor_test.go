package actions

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/wire"
)

func TestExecutor_upgradesOnceAndIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	e := newExecutor(t, testOptions(allowAll()))
	a := upgradeAction(ns, "web", "1.1.0")

	out := execute(t, e, a)
	g.Expect(out.ID).To(Equal(a.ID))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Revision).To(Equal(2))
	g.Expect(out.Message).To(ContainSubstring("upgraded release " + ns + "/web to web 1.1.0 (revision 2)"))
	g.Expect(out.Time).NotTo(BeZero())

	rel := last(t, ns, "web")
	g.Expect(rel.Version).To(Equal(2))
	g.Expect(rel.Info.Status).To(Equal(release.StatusDeployed))
	g.Expect(rel.Chart.Metadata.Version).To(Equal("1.1.0"))
	g.Expect(rel.Info.Description).To(ContainSubstring(a.ID))
	g.Expect(rel.Labels).To(HaveKeyWithValue(LabelAction, a.ID))

	// The same action again (a redelivery, or a restart after the upgrade):
	// done already, no new revision.
	again := execute(t, e, a)
	g.Expect(again.Result).To(Equal(wire.ActionSucceeded), again.Message)
	g.Expect(again.Revision).To(Equal(2))
	g.Expect(again.Message).To(ContainSubstring("already at chart version 1.1.0"))
	g.Expect(history(t, ns, "web")).To(HaveLen(2))
}

func TestExecutor_refusesOutsideTheLimits(t *testing.T) {
	ns := newNamespace(t)
	install(t, ns, "web", "1.2.0", nil)
	other := Limits{Namespaces: []string{"elsewhere"}, ChartSources: []string{"http://" + chartsHost}}
	otherSource := Limits{Namespaces: []string{ns}, ChartSources: []string{"https://charts.example.com"}}

	for _, tc := range []struct {
		name    string
		limits  Limits
		version string
		repo    string
		want    string
	}{
		{"nothing configured", Limits{}, "1.2.0", chartsURL, "namespace " + ns + " is not in --actions-allowed-namespaces"},
		{"namespace", other, "1.2.0", chartsURL, "namespace " + ns + " is not in --actions-allowed-namespaces"},
		{"chart source", otherSource, "1.2.0", chartsURL, "chart source " + chartsURL + " is not allowed"},
		// A prefix matches on a path boundary only.
		{"chart source prefix", Limits{Namespaces: []string{ns}, ChartSources: []string{chartsURL + "-other"}}, "1.2.0", chartsURL, "chart source " + chartsURL + " is not allowed"},
		{"credentials in the source", allowAll(), "1.2.0", "http://u:p@" + chartsHost + "/charts", "credentials in the URL"},
		{"downgrade", allowAll(), "1.0.0", chartsURL, "1.0.0 is a downgrade from 1.2.0 and downgrades are not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := upgradeAction(ns, "web", tc.version)
			a.Chart.Repository = tc.repo
			out := execute(t, newExecutor(t, testOptions(tc.limits)), a)
			g.Expect(out.Result).To(Equal(wire.ActionRefused))
			g.Expect(out.Message).To(ContainSubstring(tc.want))
			g.Expect(out.Revision).To(BeZero())
			// Nothing changed on the spoke.
			g.Expect(history(t, ns, "web")).To(HaveLen(1))
			g.Expect(last(t, ns, "web").Chart.Metadata.Version).To(Equal("1.2.0"))
		})
	}

	t.Run("downgrade allowed", func(t *testing.T) {
		g := NewWithT(t)
		l := allowAll()
		l.AllowDowngrades = true
		out := execute(t, newExecutor(t, testOptions(l)), upgradeAction(ns, "web", "1.0.0"))
		g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
		g.Expect(last(t, ns, "web").Chart.Metadata.Version).To(Equal("1.0.0"))
	})
}

func TestExecutor_limitsFile(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	file := t.TempDir() + "/limits.yaml"
	g.Expect(writeFile(file, "allowedNamespaces: [elsewhere]\nallowedChartSources: [\"http://"+chartsHost+"\"]\n")).To(Succeed())
	opts := testOptions(allowAll()) // replaced by the file
	opts.LimitsFile = file
	e := newExecutor(t, opts)

	out := execute(t, e, upgradeAction(ns, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionRefused))
	g.Expect(out.Message).To(ContainSubstring("namespace " + ns + " is not in allowedNamespaces of " + file))

	// Changed: re-read.
	g.Expect(writeFile(file, "allowedNamespaces: [\""+ns+"\"]\nallowedChartSources: [\"http://"+chartsHost+"/charts\"]\n")).To(Succeed())
	out = execute(t, e, upgradeAction(ns, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)

	// Unusable: everything is refused.
	g.Expect(writeFile(file, "allowedNamespace: [typo]\n")).To(Succeed())
	out = execute(t, e, upgradeAction(ns, "web", "1.2.0"))
	g.Expect(out.Result).To(Equal(wire.ActionRefused))
	g.Expect(out.Message).To(ContainSubstring("cannot be used"))
	g.Expect(history(t, ns, "web")).To(HaveLen(2))
}

func TestExecutor_installsAMissingReleaseOnce(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	opts := testOptions(allowAll())
	opts.InstallMissing = true
	e := newExecutor(t, opts)
	out := execute(t, e, upgradeAction(ns, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Message).To(ContainSubstring("installed release"))
	g.Expect(out.Revision).To(Equal(1))
	// Delivered again: already there, no second revision.
	out = execute(t, e, upgradeAction(ns, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(history(t, ns, "web")).To(HaveLen(1))
}

func TestExecutor_failsForAMissingRelease(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	noInstall := testOptions(allowAll())
	noInstall.InstallMissing = false
	out := execute(t, newExecutor(t, noInstall), upgradeAction(ns, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(Equal("release " + ns + "/web does not exist on this spoke: not installed"))

	// A version the repository does not have.
	install(t, ns, "web", "1.0.0", nil)
	out = execute(t, newExecutor(t, testOptions(allowAll())), upgradeAction(ns, "web", "1.9.0"))
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("has no chart web at version 1.9.0"))
	g.Expect(history(t, ns, "web")).To(HaveLen(1))
}

func TestExecutor_usesCredentialsFromTheSpokeSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	a := upgradeAction(ns, "web", "1.1.0")
	a.Chart.Repository = privateURL

	// Anonymous: the repository says no.
	out := execute(t, newExecutor(t, testOptions(allowAll())), a)
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("401"))

	opts := testOptions(allowAll())
	opts.CredentialsSecret = ns + "/chart-credentials"
	out = execute(t, newExecutor(t, opts), a)
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("does not exist"))

	// Credentials for another host are not sent.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chart-credentials"},
		Data:       map[string][]byte{"username": []byte(repoUser), "password": []byte(repoPassword), "host": []byte("charts.example.com")},
	}
	g.Expect(cluster.Client.Create(ctx, secret)).To(Succeed())
	out = execute(t, newExecutor(t, opts), a)
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("401"))

	secret.Data["host"] = []byte(chartsHost)
	g.Expect(cluster.Client.Update(ctx, secret)).To(Succeed())
	out = execute(t, newExecutor(t, opts), a)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Revision).To(Equal(2))
}

func TestExecutor_valuesPolicy(t *testing.T) {
	ns := newNamespace(t)
	for _, tc := range []struct {
		policy   string
		wantTier bool // the new chart's new default is used
	}{
		{"", false},
		{wire.ValuesReuse, false},
		{wire.ValuesResetThenReuse, true},
	} {
		t.Run("policy "+tc.policy, func(t *testing.T) {
			g := NewWithT(t)
			name := "web-" + randomHex(2)
			install(t, ns, name, "1.0.0", map[string]any{"replicaCount": 3})
			a := upgradeAction(ns, name, "1.1.0")
			a.ValuesPolicy = tc.policy
			out := execute(t, newExecutor(t, testOptions(allowAll())), a)
			g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)

			rel := last(t, ns, name)
			g.Expect(rel.Config).To(HaveKeyWithValue("replicaCount", BeNumerically("==", 3)), "the user's value survives")
			vals, err := chartutil.CoalesceValues(rel.Chart, rel.Config)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wantTier {
				g.Expect(vals).To(HaveKeyWithValue("tier", "frontend"))
			} else {
				g.Expect(vals).NotTo(HaveKey("tier"))
			}
			d := &appsv1.Deployment{}
			g.Expect(cluster.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":1.1.0"))
		})
	}
}

// An agent killed mid-upgrade leaves the new revision pending: either before
// it applied anything, or after it applied the resources but before it
// recorded the revision as deployed (with the old one superseded already).
// The next agent finds its own pending revision, replaces it and upgrades:
// one new revision in the end.
func TestExecutor_completesAnUpgradeKilledMidway(t *testing.T) {
	for _, applied := range []bool{false, true} {
		name := "before apply"
		if applied {
			name = "after apply"
		}
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			install(t, ns, "web", "1.0.0", nil)
			a := upgradeAction(ns, "web", "1.1.0")
			cfg := helmConfig(t, ns)
			if applied {
				up := action.NewUpgrade(cfg)
				up.Namespace, up.ReuseValues, up.Labels = ns, true, map[string]string{LabelAction: a.ID}
				_, err := up.Run("web", webChart(t, "1.1.0"), nil)
				g.Expect(err).NotTo(HaveOccurred())
				rel := last(t, ns, "web")
				rel.Info.Status, rel.Info.Description = release.StatusPendingUpgrade, "Preparing upgrade"
				rel.Info.LastDeployed = helmTime(time.Now().Add(-time.Hour))
				g.Expect(cfg.Releases.Update(rel)).To(Succeed())
			} else {
				up := action.NewUpgrade(cfg)
				up.Namespace, up.ReuseValues, up.DryRun, up.Labels = ns, true, true, map[string]string{LabelAction: a.ID}
				rel, err := up.Run("web", webChart(t, "1.1.0"), nil)
				g.Expect(err).NotTo(HaveOccurred())
				rel.Info.Status, rel.Info.Description = release.StatusPendingUpgrade, "Preparing upgrade"
				rel.Info.LastDeployed = helmTime(time.Now().Add(-time.Hour))
				g.Expect(cfg.Releases.Create(rel)).To(Succeed())
			}
			g.Expect(last(t, ns, "web").Info.Status).To(Equal(release.StatusPendingUpgrade))

			out := execute(t, newExecutor(t, testOptions(allowAll())), a)
			g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
			g.Expect(out.Revision).To(Equal(2))
			h := history(t, ns, "web")
			g.Expect(h).To(HaveLen(2))
			g.Expect(h[0].Info.Status).To(Equal(release.StatusSuperseded))
			g.Expect(h[1].Info.Status).To(Equal(release.StatusDeployed))
			g.Expect(h[1].Chart.Metadata.Version).To(Equal("1.1.0"))
		})
	}
}

// An agent stopped (its context canceled) while its upgrade runs lets the
// upgrade finish; the next agent finds the action done.
func TestExecutor_canceledMidUpgradeMakesOneRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	a := upgradeAction(ns, "web", "1.1.0")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out wire.ActionOutcome
		err error
	}
	done := make(chan result, 1)
	e := newExecutor(t, testOptions(allowAll()))
	go func() {
		out, err := e.Execute(ctx, a)
		done <- result{out, err}
	}()
	// Cancel as soon as the new revision's record exists.
	g.Eventually(func() error {
		s := &corev1.Secret{}
		return cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sh.helm.release.v1.web.v2"}, s)
	}).WithTimeout(30 * time.Second).WithPolling(5 * time.Millisecond).Should(Succeed())
	cancel()
	first := <-done
	g.Expect(first.err).NotTo(HaveOccurred(), "the upgrade had begun: it finishes")
	g.Expect(first.out.Result).To(Equal(wire.ActionSucceeded), first.out.Message)

	// A new agent gets the same action (the first never reported it).
	out := execute(t, newExecutor(t, testOptions(allowAll())), a)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Revision).To(Equal(2))
	g.Expect(history(t, ns, "web")).To(HaveLen(2))
	g.Expect(last(t, ns, "web").Info.Status).To(Equal(release.StatusDeployed))
}

func TestExecutor_failsWhileSomeoneElseKeepsTheReleasePending(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	cfg := helmConfig(t, ns)
	up := action.NewUpgrade(cfg)
	up.Namespace, up.DryRun = ns, true
	rel, err := up.Run("web", webChart(t, "1.2.0"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	rel.Info.Status = release.StatusPendingUpgrade
	g.Expect(cfg.Releases.Create(rel)).To(Succeed())

	out := execute(t, newExecutor(t, testOptions(allowAll())), upgradeAction(ns, "web", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("has another operation in progress (pending-upgrade at revision 2)"))
	g.Expect(history(t, ns, "web")).To(HaveLen(2))
	g.Expect(last(t, ns, "web").Info.Status).To(Equal(release.StatusPendingUpgrade), "somebody else's pending revision is left alone")
}

func TestExecutor_abandonsWhenStoppedBeforeActing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newExecutor(t, testOptions(allowAll())).Execute(ctx, upgradeAction(ns, "web", "1.1.0"))
	g.Expect(err).To(MatchError(ErrAbandoned))
	g.Expect(history(t, ns, "web")).To(HaveLen(1))
}

func TestExecutor_setsAFluxHelmReleaseVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	hr := helmRelease(ns, "web", "1.0.0")
	g.Expect(cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(hr), client.FieldOwner("flux-test"))).To(Succeed())

	a := upgradeAction(ns, "web", "1.1.0")
	a.Chart = wire.ChartSource{} // the HelmRelease's own source
	a.HelmRelease = &wire.HelmReleaseRef{Namespace: ns, Name: "web"}
	// Only the namespace limit applies.
	e := newExecutor(t, testOptions(Limits{Namespaces: []string{ns}}))
	out := execute(t, e, a)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Message).To(ContainSubstring("(was 1.0.0)"))

	got := getHelmRelease(g, ns, "web")
	g.Expect(nested(got.Object, "spec", "chart", "spec", "version")).To(Equal("1.1.0"))
	g.Expect(nested(got.Object, "spec", "interval")).To(Equal("5m"))
	var tugboat, flux string
	for _, m := range got.GetManagedFields() {
		switch m.Manager {
		case FieldManager:
			tugboat = m.FieldsV1.GetRawString()
		case "flux-test":
			flux = m.FieldsV1.GetRawString()
		}
	}
	g.Expect(tugboat).To(ContainSubstring(`"f:version"`))
	g.Expect(tugboat).NotTo(ContainSubstring(`"f:interval"`))
	g.Expect(flux).To(ContainSubstring(`"f:interval"`))
	g.Expect(flux).NotTo(ContainSubstring(`"f:version"`))

	// Again: nothing to do.
	out = execute(t, e, a)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded))
	g.Expect(out.Message).To(ContainSubstring("already at chart version 1.1.0"))

	// A downgrade is refused and changes nothing.
	down := a
	down.Version = "1.0.0"
	out = execute(t, e, down)
	g.Expect(out.Result).To(Equal(wire.ActionRefused))
	g.Expect(out.Message).To(ContainSubstring("1.0.0 is a downgrade from 1.1.0 and downgrades are not allowed"))
	g.Expect(nested(getHelmRelease(g, ns, "web").Object, "spec", "chart", "spec", "version")).To(Equal("1.1.0"))

	// Another namespace is refused.
	other := a
	other.HelmRelease = &wire.HelmReleaseRef{Namespace: "flux-system", Name: "web"}
	out = execute(t, e, other)
	g.Expect(out.Result).To(Equal(wire.ActionRefused))
	g.Expect(out.Message).To(ContainSubstring("namespace flux-system is not in --actions-allowed-namespaces"))

	// A missing HelmRelease fails and is not created.
	missing := a
	missing.HelmRelease = &wire.HelmReleaseRef{Namespace: ns, Name: "api"}
	out = execute(t, e, missing)
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(Equal("HelmRelease " + ns + "/api does not exist on this spoke"))
	err := cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "api"}, helmRelease(ns, "api", ""))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
}
