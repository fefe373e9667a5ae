package deliver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify/deliver"
)

func fastOptions() deliver.Options {
	o := deliver.NewOptions()
	o.RetryBase, o.RetryMax = 50*time.Millisecond, 200*time.Millisecond
	return o
}

func newPromotion(t *testing.T, ns string) *tugboatv1alpha1.Promotion {
	t.Helper()
	pr := &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-production-1.4.0"},
		Spec: tugboatv1alpha1.PromotionSpec{
			Pipeline: "web", From: "dev", To: "production", Version: "1.4.0",
			RequestedBy: tugboatv1alpha1.RequestedByAuto,
		},
	}
	must(t, cluster.Client.Create(context.Background(), pr))
	return pr
}

// setStatus changes a Promotion's status as the Promotion controller does.
// setTarget creates the PromotionTarget of Promotion name's target
// spoke/namespace/release, owned by it, with status st.
func setTarget(g Gomega, ns, name, spoke, namespace, release string, st tugboatv1alpha1.PromotionTargetStatus) {
	ctx := context.Background()
	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pr)).To(Succeed())
	pt := &tugboatv1alpha1.PromotionTarget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: tugboatv1alpha1.PromotionTargetName(name, spoke, namespace, release),
			Labels:          map[string]string{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(name), tugboatv1alpha1.LabelSpoke: spoke},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pr, tugboatv1alpha1.GroupVersion.WithKind("Promotion"))},
		},
		Spec: tugboatv1alpha1.PromotionTargetSpec{Promotion: name, Spoke: spoke, Namespace: namespace, Release: release},
	}
	g.Expect(cluster.Client.Create(ctx, pt)).To(Succeed())
	pt.Status = st
	g.Expect(cluster.Client.Status().Update(ctx, pt)).To(Succeed())
}

func setStatus(g Gomega, ns, name string, mutate func(*tugboatv1alpha1.PromotionStatus)) {
	g.Eventually(func() error {
		pr := &tugboatv1alpha1.Promotion{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pr); err != nil {
			return err
		}
		if pr.Status.Strategy == nil {
			// The Promotion controller resolves it on its first reconcile.
			pr.Status.Strategy = &tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification}
		}
		mutate(&pr.Status)
		return cluster.Client.Status().Update(context.Background(), pr)
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
}

func records(g Gomega, ns, name string) []tugboatv1alpha1.NotificationDelivery {
	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pr)).To(Succeed())
	return pr.Status.Notifications
}

func ready(status metav1.ConditionStatus, reason tugboatv1alpha1.ConditionReason, msg string) []metav1.Condition {
	return []metav1.Condition{{Type: "Ready", Status: status, Reason: string(reason), Message: msg, LastTransitionTime: metav1.Now()}}
}

// TestDeliver_promotionNoticesOnceEachInOrder drives a Promotion through
// its phases as the Promotion controller would and checks that an instant
// notifier is told each event once, in order, that every delivery is
// recorded, and that a restarted controller repeats none of them.
func TestDeliver_promotionNoticesOnceEachInOrder(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-order"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("hook", url, ""))
	stop := startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)

	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated"}))
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Phase = tugboatv1alpha1.PromotionWaitingApproval
		s.Conditions = ready(metav1.ConditionUnknown, tugboatv1alpha1.WaitingForApprovalReason, "waits for approval")
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated", "PromotionWaitingApproval"}))
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		now := metav1.Now()
		// A Kubernetes voter's displayName is their own text (issue 23,
		// Low 7): no notice shows it.
		s.Approvals = []tugboatv1alpha1.ApprovalVote{{Decision: tugboatv1alpha1.DecisionApprove, User: "alice", DisplayName: "Bob (release manager)",
			Source: tugboatv1alpha1.ApprovalSourceKubernetes, Time: now}}
		s.Approval = &tugboatv1alpha1.Approval{ApprovedBy: "alice", Time: now}
		s.Phase, s.StartedAt = tugboatv1alpha1.PromotionVerifying, &now
		s.StrategyResult = &tugboatv1alpha1.StrategyResult{URL: "https://git.example.com/fleet/pulls/7", Message: "pull request opened"}
	})
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(HaveLen(3))
	running := rcv.notices()[2]
	g.Expect(running.Promotion).NotTo(BeNil())
	g.Expect(running.Promotion.Votes).To(HaveLen(1))
	g.Expect(running.Promotion.Votes[0].User).To(Equal("alice"))
	g.Expect(running.Promotion.Votes[0].DisplayName).To(BeEmpty(), "a Kubernetes vote's displayName is not shown")
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		now := metav1.Now()
		s.Phase, s.CompletedAt = tugboatv1alpha1.PromotionSucceeded, &now
		s.Conditions = ready(metav1.ConditionTrue, tugboatv1alpha1.SucceededReason, "every target of production runs 1.4.0, healthy")
	})
	want := []string{"PromotionCreated", "PromotionWaitingApproval", "PromotionRunning", "PromotionSucceeded"}
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal(want))
	g.Eventually(func(g Gomega) {
		recs := records(g, ns, pr.Name)
		g.Expect(recs).To(HaveLen(4))
		for _, r := range recs {
			g.Expect(r.Phase).To(Equal(tugboatv1alpha1.NotificationDelivered), "%s", r.Event)
			g.Expect(r.Attempts).To(Equal(int32(1)), "%s", r.Event)
		}
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())

	stop()
	startDeliverer(t, fastOptions())
	g.Consistently(rcv.events, 3*time.Second, 100*time.Millisecond).Should(Equal(want), "a restarted controller repeated a delivered notice")
}

// TestDeliver_retriesServerErrorsGivesUpOnClientErrors: a 5xx is retried
// until delivered; a 4xx is recorded Failed at once and shows in the
// Pipeline's Notified condition, without the URL.
func TestDeliver_retriesServerErrorsGivesUpOnClientErrors(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-retry"
	flaky, flakyURL := newReceiver(t, 500, 503)
	broken, brokenURL := newReceiver(t, 400, 400, 400, 400)
	fixture(t, ns,
		webhookNotifier("flaky", flakyURL, "", tugboatv1alpha1.EventPromotionCreated),
		webhookNotifier("broken", brokenURL+"?token=s3cr3t", "", tugboatv1alpha1.EventPromotionCreated))
	startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)

	g.Eventually(flaky.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated"}))
	g.Eventually(func(g Gomega) {
		byName := map[string]tugboatv1alpha1.NotificationDelivery{}
		for _, r := range records(g, ns, pr.Name) {
			byName[r.Notifier] = r
		}
		g.Expect(byName["flaky"].Phase).To(Equal(tugboatv1alpha1.NotificationDelivered))
		g.Expect(byName["flaky"].Attempts).To(Equal(int32(3)))
		g.Expect(byName["broken"].Phase).To(Equal(tugboatv1alpha1.NotificationFailed))
		g.Expect(byName["broken"].Attempts).To(Equal(int32(1)))
		g.Expect(byName["broken"].Error).To(ContainSubstring("400"))
		g.Expect(byName["broken"].Error).NotTo(ContainSubstring("s3cr3t"))
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(broken.events()).To(BeEmpty())

	g.Eventually(func(g Gomega) {
		p := &tugboatv1alpha1.Pipeline{}
		g.Expect(cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, p)).To(Succeed())
		c := apimeta.FindStatusCondition(p.Status.Conditions, tugboatv1alpha1.NotifiedCondition.String())
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("broken"))
		g.Expect(c.Message).NotTo(ContainSubstring("s3cr3t"))
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
}

// TestDeliver_summaryOnceAfterCompletionAcrossRestart: a summary notifier
// is told nothing until the promotion completes, then once, with the
// timeline. A hub that died before it could deliver (the destination was
// down) delivers after the restart, once.
func TestDeliver_summaryOnceAfterCompletionAcrossRestart(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-summary"
	rcv, url := newReceiver(t, 503)
	fixture(t, ns, webhookNotifier("summary", url, tugboatv1alpha1.NotifySummary))
	opts := fastOptions()
	opts.RetryBase, opts.RetryMax = time.Minute, time.Minute // the first hub never retries
	stop := startDeliverer(t, opts)
	pr := newPromotion(t, ns)
	now := metav1.Now()
	setTarget(g, ns, pr.Name, "prod-1", "apps", "web", tugboatv1alpha1.PromotionTargetStatus{Version: "1.4.0", Revision: 4,
		Health: tugboatv1alpha1.HealthCurrent, Done: true, LastTransitionTime: &now})
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		s.Phase, s.StartedAt = tugboatv1alpha1.PromotionVerifying, &now
	})
	g.Consistently(rcv.events, 2*time.Second, 100*time.Millisecond).Should(BeEmpty(), "a summary before completion")
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		now := metav1.Now()
		s.Phase, s.CompletedAt = tugboatv1alpha1.PromotionSucceeded, &now
		s.Conditions = ready(metav1.ConditionTrue, tugboatv1alpha1.SucceededReason, "every target of production runs 1.4.0, healthy")
	})
	// The destination answers 503 once: the attempt is recorded Pending.
	g.Eventually(func(g Gomega) {
		recs := records(g, ns, pr.Name)
		g.Expect(recs).To(HaveLen(1))
		g.Expect(recs[0].Phase).To(Equal(tugboatv1alpha1.NotificationPending))
		g.Expect(recs[0].Attempts).To(Equal(int32(1)))
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	stop()

	startDeliverer(t, fastOptions())
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionSucceeded"}))
	n := rcv.notices()[0]
	g.Expect(n.Summary).To(BeTrue())
	var lines []string
	for _, s := range n.Timeline {
		lines = append(lines, s.Source+": "+s.Text)
	}
	all := strings.Join(lines, "\n")
	g.Expect(all).To(ContainSubstring("created, requested by auto"))
	g.Expect(all).To(ContainSubstring("prod-1/apps/web: runs 1.4.0, Current"))
	g.Expect(all).To(ContainSubstring("Succeeded: every target of production runs 1.4.0"))
	g.Consistently(rcv.events, 2*time.Second, 100*time.Millisecond).Should(HaveLen(1))
}

// TestDeliver_oldPromotionsAreNotAnnounced: a notifier added to a Pipeline
// does not announce promotions that ended long ago; it records why.
func TestDeliver_oldPromotionsAreNotAnnounced(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-old"
	rcv, url := newReceiver(t)
	fixture(t, ns, webhookNotifier("hook", url, ""))
	pr := newPromotion(t, ns)
	setStatus(g, ns, pr.Name, func(s *tugboatv1alpha1.PromotionStatus) {
		long := metav1.NewTime(time.Now().Add(-3 * time.Hour))
		s.Phase, s.CompletedAt = tugboatv1alpha1.PromotionSucceeded, &long
	})
	startDeliverer(t, fastOptions())
	g.Eventually(func(g Gomega) {
		recs := records(g, ns, pr.Name)
		g.Expect(recs).NotTo(BeEmpty())
		for _, r := range recs {
			g.Expect(r.Phase).To(Equal(tugboatv1alpha1.NotificationFailed))
			g.Expect(r.Error).To(ContainSubstring("not sent"))
		}
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(rcv.events()).To(BeEmpty())
}

// TestDeliver_webhookAddressFromSecret: a webhook URL that carries a secret
// lives in the Secret's key "address", and never reaches status.
func TestDeliver_webhookAddressFromSecret(t *testing.T) {
	g := NewWithT(t)
	ns := "notify-address"
	rcv, url := newReceiver(t)
	n := webhookNotifier("hook", "", "", tugboatv1alpha1.EventPromotionCreated)
	n.Webhook.SecretRef = &tugboatv1alpha1.LocalSecretReference{Name: "hook-address"}
	fixture(t, ns, n)
	must(t, cluster.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook-address"},
		Data:       map[string][]byte{"key": webhookKey, "address": []byte(url + "/t0ken-in-path")},
	}))
	startDeliverer(t, fastOptions())
	pr := newPromotion(t, ns)
	g.Eventually(rcv.events, 20*time.Second, 50*time.Millisecond).Should(Equal([]string{"PromotionCreated"}))
	g.Eventually(func(g Gomega) {
		recs := records(g, ns, pr.Name)
		g.Expect(recs).To(HaveLen(1))
		g.Expect(recs[0].Phase).To(Equal(tugboatv1alpha1.NotificationDelivered))
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
}
