package spoke_test

import (
	"context"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestReconciler_eventsWhenASpokeIsLostAndBack: a spoke whose agent is heard
// from is Ready (Event AgentReady); without a heartbeat within the timeout
// it is lost (Warning AgentLost); heard from again, ready again. On the
// real API server, as kubectl events shows them (issue 29).
func TestReconciler_eventsWhenASpokeIsLostAndBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "spoke-events-"}}
	g.Expect(cluster.Client.Create(ctx, ns)).To(Succeed())
	// A name of its own: Spoke names are unique across the hub (another
	// test's older Spoke of the same name would stall this one).
	sp := &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "events-edge"},
		Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: "events-edge-key"}}}
	g.Expect(cluster.Client.Create(ctx, sp)).To(Succeed())
	readyStatus := func() metav1.ConditionStatus {
		got := &tugboatv1alpha1.Spoke{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(sp), got)).To(Succeed())
		if c := apimeta.FindStatusCondition(got.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
			return c.Status
		}
		return ""
	}
	heartbeat := func() {
		patch := []byte(`{"status":{"lastSeen":"` + clk.now().UTC().Format(time.RFC3339) + `","agentVersion":"v1","agentProtocolVersion":1}}`)
		g.Expect(cluster.Client.Status().Patch(ctx, sp, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	}
	spokeEvents := func() []string {
		var list eventsv1.EventList
		g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Spoke" && e.Regarding.Name == sp.Name {
				out = append(out, e.Type+" "+e.Reason)
			}
		}
		return out
	}

	heartbeat()
	g.Eventually(readyStatus).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionTrue))
	g.Eventually(spokeEvents).WithTimeout(10 * time.Second).Should(Equal([]string{"Normal AgentReady"}))

	// Two minutes without a heartbeat (timeout 90s); any change of the
	// Spoke makes the controller look again.
	clk.add(2 * time.Minute)
	patch := []byte(`{"metadata":{"annotations":{"example.com/touch":"1"}}}`)
	g.Expect(cluster.Client.Patch(ctx, sp, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	g.Eventually(readyStatus).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionUnknown))
	g.Eventually(spokeEvents).WithTimeout(10 * time.Second).Should(Equal([]string{"Normal AgentReady", "Warning AgentLost"}))

	heartbeat()
	g.Eventually(readyStatus).WithTimeout(10 * time.Second).Should(Equal(metav1.ConditionTrue))
	g.Eventually(spokeEvents).WithTimeout(10 * time.Second).Should(Equal([]string{"Normal AgentReady", "Warning AgentLost", "Normal AgentReady"}))
}
