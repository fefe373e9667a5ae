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
	// Another chart (the web chart renamed) under the same release name.
	other := loadChart(t, "2.0.0")
	other.Metadata.Name = "webapp"
	_, err := helm.tryInstall(context.Background(), "web", other, nil)
	g.Expect(err).NotTo(HaveOccurred())
	deployed("2.0.0")

	// Every reinstall's InstallStarted, Deployed, RolloutComplete and
	// Uninstalled reached the hub as new events.
	g.Expect(accepted() - accBefore).To(BeNumerically(">=", 3*3+2*1))
	g.Expect(duplicates()-dupBefore).To(BeZero(), "no event of a reinstall was taken for a redelivery")
}
