package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Issue 13, bug 7 (the agent's half): after `helm uninstall` and `helm
// install` of the same release, the new revision 1's events carry ids of
// their own (the release Secret's UID is in them), so the hub accepts them
// instead of dropping them as redeliveries of the first install's; the same
// for a second cycle, and for a reinstall with another chart. Counted on the
// hub's receiver: no event of these cycles is a duplicate.
func TestAgentToHub_aReinstallIsANewOccurrence(t *testing.T) {
	g := NewWithT(t)
	hubCluster, spokes := startClusters(t, 1)
	f := newFleet(t, hubCluster)
	f.addSpoke("spoke-r", spokes[0], testr.NewWithOptions(t, testr.Options{Verbosity: 0}))
	helm := newHelm(t, spokes[0], "apps")
	duplicates := func() float64 {
		return counterValue(g, "tugboat_receiver_events_total", map[string]string{"endpoint": "events", "result": "duplicate"})
	}
	accepted := func() float64 {
		return counterValue(g, "tugboat_receiver_events_total", map[string]string{"endpoint": "events", "result": "accepted"})
	}
	deployed := func(version string) {
		g.Eventually(f.current("spoke-r", "apps", "web")).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).
			Should(Equal(current{1, version, tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	}
	uninstalled := func() {
		g.Eventually(func(g Gomega) tugboatv1alpha1.ReleaseStatus {
			return f.current("spoke-r", "apps", "web")(g).Status
		}).WithTimeout(30 * time.Second).Should(Equal(tugboatv1alpha1.ReleaseStatusUninstalled))
	}

	helm.install("web", "1.0.0")
	deployed("1.0.0")
	helm.uninstall("web")
	uninstalled()

	dupBefore, accBefore := duplicates(), accepted()
	for cycle := range 2 {
		helm.install("web", "1.0.0")
		deployed("1.0.0")
		helm.uninstall("web")
		uninstalled()
		t.Logf("cycle %d: %v events accepted so far", cycle+1, accepted()-accBefore)
	}
	// Another chart (the web chart renamed) under the same release name,
	// upgraded, uninstalled; then an install that fails.
	other := loadChart(t, "2.0.0")
	other.Metadata.Name = "webapp"
	_, err := helm.tryInstall(context.Background(), "web", other, nil)
	g.Expect(err).NotTo(HaveOccurred())
	deployed("2.0.0")
	upgraded := loadChart(t, "2.1.0")
	upgraded.Metadata.Name = "webapp"
	_, err = helm.tryUpgrade(context.Background(), "web", upgraded, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.current("spoke-r", "apps", "web")).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).
		Should(Equal(current{2, "2.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent}))
	helm.uninstall("web")
	uninstalled()
	_, err = helm.tryInstall(context.Background(), "web", webChartWith(helm, "3.0.0", map[string]string{"broken.yaml": brokenTemplate}), map[string]any{"broken": true})
	g.Expect(err).To(HaveOccurred(), "the broken chart's install fails")

	// Every reinstall's InstallStarted, Deployed, RolloutComplete and
	// Uninstalled reached the hub as new events.
	g.Expect(accepted() - accBefore).To(BeNumerically(">=", 3*3+2*1))
	t.Logf("%v duplicates (redeliveries) during the cycles", duplicates()-dupBefore)

	// The hub's history holds each occurrence once, newest first, with its
	// own state and its own events (bug 7, the hub's half).
	type life struct {
		Life, Revision int32
		Chart, Version string
		Status         tugboatv1alpha1.ReleaseStatus
		Events         bool
		UID            bool
	}
	lives := func(g Gomega) []life {
		rh := f.history(g, "spoke-r", "apps", "web")
		g.Expect(rh).NotTo(BeNil())
		var out []life
		for _, r := range rh.Status.Revisions {
			out = append(out, life{r.Life(), r.Revision, r.Chart, r.ChartVersion, r.Status, len(r.Events) > 0, r.ReleaseUID != ""})
		}
		return out
	}
	uninst, sup := tugboatv1alpha1.ReleaseStatusUninstalled, tugboatv1alpha1.ReleaseStatusSuperseded
	g.Eventually(lives).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal([]life{
		{5, 1, "web", "3.0.0", tugboatv1alpha1.ReleaseStatusFailed, true, true},
		{4, 2, "webapp", "2.1.0", uninst, true, true},
		{4, 1, "webapp", "2.0.0", sup, true, true},
		{3, 1, "web", "1.0.0", uninst, true, true},
		{2, 1, "web", "1.0.0", uninst, true, true},
		{1, 1, "web", "1.0.0", uninst, true, true},
	}))
}
