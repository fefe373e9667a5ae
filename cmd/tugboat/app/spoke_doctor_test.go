//go:build !agentonly

package app_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// TestDoctor_judgesAgentlessSpokesByTheirFluxEvents: a spoke fed by Flux
// notification-controller has no agent, no heartbeat and no release count;
// doctor neither calls it unseen nor asks for its agent.
func TestDoctor_judgesAgentlessSpokesByTheirFluxEvents(t *testing.T) {
	g := NewWithT(t)
	withCLIVersion(t, "v0.3.0")
	ns := newNamespace(t)
	received := ago(20 * time.Minute) // over 10m: age() prints whole minutes
	newSpoke(t, ns, "edge-1", true, tugboatv1alpha1.SpokeStatus{
		ObservedGeneration: 1,
		LastFluxEvent:      &tugboatv1alpha1.FluxEventRecord{ReceivedAt: received, Reason: "UpgradeSucceeded", Object: "HelmRelease/apps/web"},
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "FluxEventReceived",
			Message: "last Flux event received at ...", LastTransitionTime: received, ObservedGeneration: 1}},
	})
	newSpoke(t, ns, "edge-2", true, tugboatv1alpha1.SpokeStatus{
		ObservedGeneration: 1,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "NoEventSinceSetup",
			Message: "no Flux event received since setup at 2026-11-26T14:50:00Z: check ...", LastTransitionTime: received, ObservedGeneration: 1}},
	})

	findings, err := doctorJSON(t, cluster.KubeconfigPath, "-n", ns)
	g.Expect(err).To(MatchError(ContainSubstring("doctor found 1 error")), "%+v", findings)
	g.Expect(findingsOf(findings, "hub", "")).To(haveFinding("ok",
		"no agent heartbeats (agentless spokes only): the receiver records Flux events (latest from "+ns+"/edge-1, 20m ago"))
	g.Expect(findingsOf(findings, "spoke", ns+"/edge-1")).To(ConsistOf(And(
		HaveField("Severity", BeEquivalentTo("ok")),
		HaveField("Message", Equal("Ready, agentless (Flux notification-controller): last Flux event 20m ago (UpgradeSucceeded of HelmRelease/apps/web)")))))
	edge2 := findingsOf(findings, "spoke", ns+"/edge-2")
	g.Expect(edge2).To(ConsistOf(And(
		HaveField("Severity", BeEquivalentTo("error")),
		HaveField("Message", HavePrefix("not Ready (Unknown, NoEventSinceSetup): no Flux event received since setup at ")),
		HaveField("Hint", ContainSubstring("kubectl -n flux-system get providers,alerts")))))
	g.Expect(edge2[0].Hint).NotTo(ContainSubstring("agent"))
}
