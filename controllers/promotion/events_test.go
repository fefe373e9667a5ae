package promotion_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// promotionEvents lists the Events (events.k8s.io/v1, what kubectl events
// and kubectl describe show) regarding Promotion name in ns, as
// "Type Reason: note", oldest first.
func promotionEvents(g Gomega, ns, name string) []string {
	var list eventsv1.EventList
	g.Expect(cluster.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Promotion" && e.Regarding.Name == name {
			g.Expect(e.ReportingController).NotTo(BeEmpty())
			out = append(out, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	return out
}

// TestReconciler_emitsAnEventForEveryTransition: waiting for approval,
// approved (by whom), started, and for another promotion rejected, are
// Kubernetes Events on the Promotion, on the real API server, written by
// the hub as its ServiceAccount (issue 29: tugboat emitted none, so
// kubectl events and kubectl describe showed nothing).
func TestReconciler_emitsAnEventForEveryTransition(t *testing.T) {
	g := NewWithT(t)
	f := newApprovalFixture(t)
	name := f.request("2.0.0")
	g.Eventually(f.state(name), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))
	f.vote(name, "alice", tugboatv1alpha1.DecisionApprove, "")
	f.vote(name, "bob", tugboatv1alpha1.DecisionApprove, "go")
	g.Eventually(func() []string { return promotionEvents(g, f.ns, name) }).WithTimeout(30 * time.Second).Should(ContainElements(
		HavePrefix("Normal WaitingForApproval: promotion of 2.0.0 into production has 0 of 2 approvals"),
		Equal("Normal Approved: approved by alice, bob: go"),
		HavePrefix("Normal Started: promoting 2.0.0 into production with strategy notification (approved by alice, bob)"),
	))
}

// TestReconciler_emitsAWarningForARejection: a rejection is a Warning
// Event naming who rejected and why, and nothing says it was approved or
// started.
func TestReconciler_emitsAWarningForARejection(t *testing.T) {
	g := NewWithT(t)
	f := newApprovalFixture(t)
	rejected := f.request("2.1.0")
	g.Eventually(f.state(rejected), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))
	f.vote(rejected, "bob", tugboatv1alpha1.DecisionReject, "not today")
	g.Eventually(func() []string { return promotionEvents(g, f.ns, rejected) }).WithTimeout(30 * time.Second).Should(
		ContainElement("Warning Rejected: rejected by bob: not today"))
	for _, e := range promotionEvents(g, f.ns, rejected) {
		g.Expect(strings.HasPrefix(e, "Normal Approved") || strings.HasPrefix(e, "Normal Started")).To(BeFalse(), e)
	}
}
