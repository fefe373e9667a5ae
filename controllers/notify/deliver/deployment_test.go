package deliver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// setCurrent sets the current revision of a ReleaseHistory as the
// recorder does.
func setCurrent(g Gomega, rh *tugboatv1alpha1.ReleaseHistory, rev int32, version string, status tugboatv1alpha1.ReleaseStatus, health tugboatv1alpha1.Health) {
	setCurrentOf(g, rh, 1, rev, version, status, health)
}

// setCurrentOf is setCurrent in installation (life) life of the release.
func setCurrentOf(g Gomega, rh *tugboatv1alpha1.ReleaseHistory, life, rev int32, version string, status tugboatv1alpha1.ReleaseStatus, health tugboatv1alpha1.Health) {
	g.Eventually(func() error {
		fresh := &tugboatv1alpha1.ReleaseHistory{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(rh), fresh); err != nil {
			return err
		}
		now := metav1.Now()
		sum := tugboatv1alpha1.RevisionSummary{Revision: rev, Installation: life, Chart: "web", ChartVersion: version, Status: status, Health: health, LastDeployed: &now}
		fresh.Status.Current = &sum
		found := false
		for i := range fresh.Status.Revisions {
			if fresh.Status.Revisions[i].Same(&sum) {
				fresh.Status.Revisions[i].RevisionSummary, found = sum, true
			}
		}
		if !found {
			fresh.Status.Revisions = append([]tugboatv1alpha1.Revision{{RevisionSummary: sum, Events: []tugboatv1alpha1.ReleaseEvent{{
				ID: fmt.Sprintf("e%d%s", life, strings.ReplaceAll(version, ".", "")), Time: now, Type: tugboatv1alpha1.EventTypeNormal, Reason: "Created",
				Object: &tugboatv1alpha1.EventObjectReference{Kind: "Pod", Name: "web-1"}, Message: "Pod web-1 created",
			}}}}, fresh.Status.Revisions...)
		}
		return cluster.Client.Status().Update(context.Background(), fresh)
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
}

// TestDeliver_deploymentNotices follows a target's releases: a new
// revision is told when it starts and when it is healthy, a failed one
// when it fails, each once, and only the current revision's records stay.
func TestDeliver_deploymentNotices(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-deploy"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("deploys", url, "",
		tugboatv1alpha1.EventDeploymentStarted, tugboatv1alpha1.EventDeploymentHealthy,
		tugboatv1alpha1.EventDeploymentFailed, tugboatv1alpha1.EventDeploymentDegraded))
	startDeliverer(t, fastOptions())
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName("dev-1", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "dev-1", Namespace: "apps", Release: "web"},
	}
	must(t, cluster.Client.Create(context.Background(), rh))

	setCurrent(g, rh, 2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthInProgress)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"DeploymentStarted"}))
	setCurrent(g, rh, 2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"DeploymentStarted", "DeploymentHealthy"}))
	setCurrent(g, rh, 2, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthFailed)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"DeploymentStarted", "DeploymentHealthy", "DeploymentDegraded"}))

	setCurrent(g, rh, 3, "1.2.0", tugboatv1alpha1.ReleaseStatusFailed, tugboatv1alpha1.HealthFailed)
	want := []string{"DeploymentStarted", "DeploymentHealthy", "DeploymentDegraded", "DeploymentStarted", "DeploymentFailed"}
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal(want))
	g.Eventually(func(g Gomega) {
		fresh := &tugboatv1alpha1.ReleaseHistory{}
		g.Expect(cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(rh), fresh)).To(Succeed())
		g.Expect(fresh.Status.Notifications).To(HaveLen(2))
		for _, n := range fresh.Status.Notifications {
			g.Expect(n.Revision).To(Equal(int32(3)))
			g.Expect(n.Phase).To(Equal(tugboatv1alpha1.NotificationDelivered))
		}
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Consistently(rcv.events, 2*time.Second, 100*time.Millisecond).Should(Equal(want))
}

// TestDeliver_holdNotices: a rollback hold is told when it starts and when
// it is released, once each.
func TestDeliver_holdNotices(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-hold"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("holds", url, "", tugboatv1alpha1.EventHoldStarted, tugboatv1alpha1.EventHoldReleased))
	startDeliverer(t, fastOptions())
	setHeld := func(held []tugboatv1alpha1.HeldEnvironment) {
		g.Eventually(func() error {
			p := &tugboatv1alpha1.Pipeline{}
			if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, p); err != nil {
				return err
			}
			p.Status.HeldEnvironments = held
			return cluster.Client.Status().Update(context.Background(), p)
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	}
	setHeld([]tugboatv1alpha1.HeldEnvironment{{Name: "production", Since: metav1.Now(), Version: "1.3.0", Message: "prod-1/apps/web rolled back from revision 5 to 4"}})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"HoldStarted"}))
	setHeld(nil)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"HoldStarted", "HoldReleased"}))
	g.Consistently(rcv.events, 2*time.Second, 100*time.Millisecond).Should(Equal([]string{"HoldStarted", "HoldReleased"}))
}

// TestDeliver_deploymentNoticesOfASelectedSpoke: a release on a Spoke that
// production selects by label (spokeSelector) is a target like a named one:
// its deployments are told, and a Promotion's notices list it.
func TestDeliver_deploymentNoticesOfASelectedSpoke(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "notify-selector"
	rcv, url := newReceiver(t)
	p := fixture(t, ns, webhookNotifier("deploys", url, "", tugboatv1alpha1.EventDeploymentStarted, tugboatv1alpha1.EventDeploymentHealthy, tugboatv1alpha1.EventPromotionCreated))
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Environments[1].Targets = []tugboatv1alpha1.Target{{
		SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}, Namespace: "apps",
		HelmRelease: &tugboatv1alpha1.ObjectReference{Name: "web-hr"},
	}}
	must(t, cluster.Client.Patch(ctx, p, patch))
	must(t, cluster.Client.Create(ctx, &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-7", Labels: map[string]string{"env": "production"}},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "prod-7-key"}},
	}))
	startDeliverer(t, fastOptions())
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName("prod-7", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "prod-7", Namespace: "apps", Release: "web"},
	}
	must(t, cluster.Client.Create(ctx, rh))
	// (Told at least once: exactly once is TestDeliver_deploymentNotices'.)
	setCurrent(g, rh, 1, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthInProgress)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(ContainElement("DeploymentStarted"))
	setCurrent(g, rh, 1, "1.1.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(ContainElement("DeploymentHealthy"))
	g.Eventually(func(g Gomega) {
		fresh := &tugboatv1alpha1.ReleaseHistory{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(rh), fresh)).To(Succeed())
		g.Expect(fresh.Status.Notifications).NotTo(BeEmpty())
		for _, n := range fresh.Status.Notifications {
			g.Expect(n.Pipeline).To(Equal("web"))
		}
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())

	// A Promotion into production that has not started lists the selected
	// spokes as its targets.
	newPromotion(t, ns)
	g.Eventually(func(g Gomega) {
		var spokes []string
		for _, n := range rcv.notices() {
			if n.Event == "PromotionCreated" {
				for _, t := range n.Targets {
					spokes = append(spokes, t.Spoke)
				}
			}
		}
		g.Expect(spokes).NotTo(BeEmpty())
		for _, spoke := range spokes {
			g.Expect(spoke).To(Equal("prod-7"))
		}
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
}

// TestDeliver_deploymentNoticesOfAReinstall: after an uninstall and an
// install, the new life's revision 1 is a new deployment, told again,
// although the old life's revision 1 was told already.
func TestDeliver_deploymentNoticesOfAReinstall(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-reinstall"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("deploys", url, "", tugboatv1alpha1.EventDeploymentStarted, tugboatv1alpha1.EventDeploymentHealthy))
	startDeliverer(t, fastOptions())
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName("dev-1", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "dev-1", Namespace: "apps", Release: "web"},
	}
	must(t, cluster.Client.Create(context.Background(), rh))
	setCurrentOf(g, rh, 1, 1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"DeploymentStarted", "DeploymentHealthy"}))
	setCurrentOf(g, rh, 2, 1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthCurrent)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{
		"DeploymentStarted", "DeploymentHealthy", "DeploymentStarted", "DeploymentHealthy"}))
	g.Eventually(func(g Gomega) {
		fresh := &tugboatv1alpha1.ReleaseHistory{}
		g.Expect(cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(rh), fresh)).To(Succeed())
		g.Expect(fresh.Status.Notifications).To(HaveLen(2))
		for _, n := range fresh.Status.Notifications {
			g.Expect(n.Installation).To(Equal(int32(2)))
		}
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
}

// TestDeliver_untargetedReleasesCostNoAPIRead: the changes of a release no
// Pipeline targets (most of a fleet's) are not read from the API server;
// a targeted one's are (its notice records must be fresh).
func TestDeliver_untargetedReleasesCostNoAPIRead(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-untargeted"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("deploys", url, "", tugboatv1alpha1.EventDeploymentStarted))
	counter := harness.CountGets[*tugboatv1alpha1.ReleaseHistory](nil)
	startDelivererReading(t, fastOptions(), func(r client.Reader) client.Reader { counter.Reader = r; return counter })

	untargeted := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName("dev-1", "apps", "other")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "dev-1", Namespace: "apps", Release: "other"},
	}
	must(t, cluster.Client.Create(context.Background(), untargeted))
	for rev := int32(1); rev <= 3; rev++ {
		setCurrent(g, untargeted, rev, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthInProgress)
	}
	// Changed after the untargeted one: once its notice is out, the
	// controller has handled the untargeted changes queued before it.
	targeted := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName("dev-1", "apps", "web")},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "dev-1", Namespace: "apps", Release: "web"},
	}
	must(t, cluster.Client.Create(context.Background(), targeted))
	setCurrent(g, targeted, 1, "1.0.0", tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.HealthInProgress)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"DeploymentStarted"}))

	g.Expect(counter.Of(client.ObjectKeyFromObject(targeted))).To(BeNumerically(">", 0), "the targeted release is read from the API server")
	g.Expect(counter.Of(client.ObjectKeyFromObject(untargeted))).To(BeZero(), "the untargeted release is not")
}
