//go:build !agentonly

package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/controllers/promotion"
)

// want is a finding a fault must produce. object, message and hint may
// say {ns} for the fault's namespace; message and hint are substrings.
type want struct {
	code, severity, object, message, hint string
}

// faultRun says how to run doctor on an injected fault: through the CLI
// (access, args), or direct (another API group than tugboat.dev's).
type faultRun struct {
	access hubAccess
	args   []string
	direct func(failOn string) ([]app.Finding, error)
}

// doctorFault is one fault injected on the hub, and exactly the problems
// (warnings and errors) doctor must report for it, plus ok findings it
// must also report.
type doctorFault struct {
	name   string
	inject func(t *testing.T, ns string, crds *faultCRDs) faultRun
	want   []want
}

func ok(code string) want { return want{code: code, severity: "ok"} }

// onFleet injects a fault in a healthy fleet (see fleet).
func onFleet(inject func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline)) func(*testing.T, string, *faultCRDs) faultRun {
	return func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		p := fleet(t, ns)
		inject(t, ns, p)
		return faultRun{}
	}
}

// crdRun runs doctor directly, expecting group/v1alpha1 to serve kinds.
func crdRun(access func(t *testing.T) hubAccess, group string, kinds ...[2]string) func(*testing.T, string, *faultCRDs) faultRun {
	return func(t *testing.T, _ string, crds *faultCRDs) faultRun {
		crds.ensure()
		a := hubAccess{config: cluster.RESTConfig}
		if access != nil {
			a = access(t)
		}
		return faultRun{direct: func(failOn string) ([]app.Finding, error) {
			return app.DoctorRun(context.Background(), a.config, "", group, "v1alpha1", kinds, failOn)
		}}
	}
}

func promotionIn(t *testing.T, p *tugboatv1alpha1.Pipeline, env, version string, st tugboatv1alpha1.PromotionStatus) string {
	return newPromotion(t, p, env, version, st).Name
}

var doctorFaults = []doctorFault{
	// A healthy fleet: every ok finding of a working hub.
	{name: "healthy fleet", inject: onFleet(func(*testing.T, string, *tugboatv1alpha1.Pipeline) {}),
		want: []want{ok("crds-ok"), ok("hub-heartbeats-ok"), ok("hub-controllers-ok"), ok("spoke-ready"), ok("pipeline-ready"), ok("promotions-ok"), ok("releasehistories-ok")}},

	// connection
	{name: "hub unreachable", inject: func(t *testing.T, _ string, _ *faultCRDs) faultRun {
		return faultRun{access: accessFrom(t, writeKubeconfig(t, "https://127.0.0.1:1", false, func(*clientcmdapi.AuthInfo) {}))}
	}, want: []want{{code: "connection-unreachable", severity: "error", message: "cannot reach the hub's API server at 127.0.0.1:1: ", hint: "check --kubeconfig and --context"}}},
	{name: "credentials rejected", inject: func(t *testing.T, _ string, _ *faultCRDs) faultRun {
		return faultRun{access: withBadToken(t)}
	}, want: []want{{code: "connection-unauthorized", severity: "error", message: "rejected your credentials (401)", hint: "refresh the kubeconfig's credentials"}}},
	{name: "discovery forbidden", inject: func(t *testing.T, _ string, _ *faultCRDs) faultRun {
		// An anonymous user may not list API groups (system:discovery is
		// bound to system:authenticated only).
		return faultRun{access: impersonating(t, "system:anonymous", "system:unauthenticated")}
	}, want: []want{{code: "connection-forbidden", severity: "error", message: "forbids discovery", hint: "system:discovery"}}},

	// crds
	{name: "CRD missing", inject: crdRun(nil, faultGroup, [2]string{"widgets", "Widget"}, [2]string{"gadgets", "Gadget"}),
		want: []want{{code: "crd-missing", severity: "error", object: "gadgets." + faultGroup, message: "Gadget is not installed: no CustomResourceDefinition gadgets." + faultGroup, hint: "tugboat install hub"}}},
	{name: "CRD not established", inject: crdRun(nil, faultGroup, [2]string{"widgets", "Widget"}, [2]string{"gizmos", "Gizmo"}),
		want: []want{{code: "crd-not-established", severity: "error", object: "gizmos." + faultGroup, message: "CRD gizmos." + faultGroup + " is not established (", hint: "kubectl describe crd gizmos." + faultGroup}}},
	{name: "CRD of another version", inject: crdRun(nil, faultNewerGroup, [2]string{"sprockets", "Sprocket"}),
		want: []want{
			{code: "crd-version-not-served", severity: "error", object: "sprockets." + faultNewerGroup, message: "does not serve v1alpha1 (it serves v1beta1)", hint: "use the tugboat CLI of the hub's release"},
			{code: "crds-newer-version-preferred", severity: "warning", message: "the hub prefers " + faultNewerGroup + "/v1beta1", hint: "use the tugboat CLI of the hub's release"},
		}},
	{name: "hub prefers a newer version", inject: crdRun(nil, faultNewerGroup, [2]string{"bolts", "Bolt"}),
		want: []want{ok("crds-ok"), {code: "crds-newer-version-preferred", severity: "warning", message: "this CLI speaks " + faultNewerGroup + "/v1alpha1", hint: "use the tugboat CLI of the hub's release"}}},
	{name: "CRD not readable", inject: crdRun(func(t *testing.T) hubAccess { return impersonating(t, "doctor-nobody") }, faultGroup, [2]string{"gadgets", "Gadget"}),
		want: []want{{code: "crd-unreadable", severity: "error", object: "gadgets." + faultGroup, message: "you may not read its CRD", hint: "ask a cluster administrator"}}},
	{name: "CRD read fails", inject: crdRun(func(t *testing.T) hubAccess {
		return faultyHub(t, failing("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets."+faultGroup))
	}, faultGroup, [2]string{"gadgets", "Gadget"}),
		want: []want{{code: "crd-read-failed", severity: "error", object: "gadgets." + faultGroup, message: "reading its CRD failed: ", hint: "tugboat install hub"}}},
	{name: "CRD not discovered yet", inject: crdRun(func(t *testing.T) hubAccess {
		return faultyHub(t, func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/apis/"+faultGroup+"/v1alpha1" {
				return false
			}
			// What an API server answers in the moment after a CRD is
			// established and before its discovery lists it.
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"%s/v1alpha1","resources":[]}`, faultGroup)
			return true
		})
	}, faultGroup, [2]string{"widgets", "Widget"}),
		want: []want{{code: "crd-not-discovered-yet", severity: "warning", object: "widgets." + faultGroup, message: "is established but the API server does not list", hint: "retry in a few seconds"}}},
	{name: "discovery of the group fails", inject: crdRun(func(t *testing.T) hubAccess {
		return faultyHub(t, failing("/apis/"+faultGroup+"/v1alpha1"))
	}, faultGroup, [2]string{"widgets", "Widget"}),
		want: []want{{code: "crds-discovery-failed", severity: "error", message: "cannot discover the resources of " + faultGroup + "/v1alpha1", hint: "retry"}}},

	// hub
	{name: "no spokes", inject: func(*testing.T, string, *faultCRDs) faultRun { return faultRun{} },
		want: []want{{code: "hub-no-spokes", severity: "warning", message: "no Spokes in namespace {ns}: nothing reports to the hub", hint: "register each leaf cluster"}}},
	{name: "no spoke ever reported", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		newSpoke(t, ns, "dev-1", true, tugboatv1alpha1.SpokeStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionUnknown,
			Reason: "AgentNotSeen", Message: "no heartbeat yet", LastTransitionTime: ago(time.Hour), ObservedGeneration: 1}}})
		return faultRun{}
	}, want: []want{
		{code: "hub-never-reported", severity: "warning", message: "no Spoke has ever reported (1 Spoke registered in namespace {ns})", hint: "--hub-url"},
		{code: "spoke-agent-not-seen", severity: "error", object: "{ns}/dev-1", message: "not Ready (Unknown, AgentNotSeen): its agent never reported", hint: "check the agent on spoke dev-1"},
	}},
	{name: "every heartbeat stale: receiver down", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		newSpoke(t, ns, "dev-1", true, staleSpoke("v0.3.0"))
		return faultRun{}
	}, want: []want{
		{code: "hub-heartbeats-stale", severity: "error", message: "no Spoke has reported in the last 10m (latest: {ns}/dev-1, 2h ago)", hint: "the hub's receiver is down"},
		{code: "spoke-agent-not-seen", severity: "error", object: "{ns}/dev-1", message: "not Ready (Unknown, AgentNotSeen): no heartbeat since", hint: "check the agent on spoke dev-1"},
	}},
	{name: "a live spoke's lastSeen one hub refresh old is no stale heartbeat", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		// The hub writes lastSeen every --spoke-heartbeat-refresh (5m): a
		// live spoke's may be 5m plus a snapshot interval old.
		st := readySpoke("v0.3.0", 2)
		seen := ago(5*time.Minute + 30*time.Second)
		st.LastSeen = &seen
		newSpoke(t, ns, "dev-1", true, st)
		return faultRun{}
	}, want: []want{ok("hub-heartbeats-ok"), ok("spoke-ready")}},
	{name: "controllers not running", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		seen := ago(10 * time.Second)
		newSpoke(t, ns, "dev-1", true, tugboatv1alpha1.SpokeStatus{LastSeen: &seen, AgentVersion: "v0.3.0", ReleaseCount: 2})
		return faultRun{args: []string{"--reconcile-grace", "0s"}}
	}, want: []want{
		ok("hub-heartbeats-ok"),
		{code: "hub-controllers-not-reconciling", severity: "error", message: "none of 1 Spokes and Pipelines has status.observedGeneration up to its generation", hint: "leader election"},
		{code: "spoke-unreconciled", severity: "warning", object: "{ns}/dev-1", message: "no Ready condition: the hub has not reconciled it (last seen", hint: "see the hub check"},
	}},
	{name: "controllers behind on a changed Pipeline", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		p := fleet(t, ns)
		p.Spec.Environments[0].Gates.RequireHealthy = ptrTo(true)
		if err := cluster.Client.Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		return faultRun{args: []string{"--reconcile-grace", "0s"}}
	}, want: []want{
		{code: "hub-controllers-behind", severity: "warning", message: "1 of 4 Spokes and Pipelines are not reconciled since their last change: {ns}/web", hint: "logs deploy/tugboat-hub"},
		{code: "pipeline-generation-behind", severity: "warning", object: "{ns}/web", message: "not reconciled since its last change (generation 2, observed 1)", hint: "logs deploy/tugboat-hub"},
	}},
	{name: "agentless spokes only", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		received := ago(20 * time.Minute)
		newSpoke(t, ns, "edge-1", true, tugboatv1alpha1.SpokeStatus{ObservedGeneration: 1,
			LastFluxEvent: &tugboatv1alpha1.FluxEventRecord{ReceivedAt: received, Reason: "UpgradeSucceeded", Object: "HelmRelease/apps/web"},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "FluxEventReceived", Message: "last Flux event received",
				LastTransitionTime: received, ObservedGeneration: 1}}})
		return faultRun{}
	}, want: []want{ok("hub-flux-events-ok"), ok("spoke-agentless-ready")}},

	// spoke
	{name: "agentless spoke without Flux events", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "edge-2", true, tugboatv1alpha1.SpokeStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionUnknown,
			Reason: "NoEventSinceSetup", Message: "no Flux event received since setup", LastTransitionTime: ago(time.Hour), ObservedGeneration: 1}}})
	}), want: []want{{code: "spoke-agentless-not-ready", severity: "error", object: "{ns}/edge-2", message: "not Ready (Unknown, NoEventSinceSetup)", hint: "kubectl -n flux-system get providers,alerts"}}},
	{name: "spoke suspended", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		updateSpoke(t, ns, "staging-1", func(sp *tugboatv1alpha1.Spoke) { sp.Spec.Suspend = true }, readySpoke("v0.3.0", 3))
	}), want: []want{{code: "spoke-suspended", severity: "warning", object: "{ns}/staging-1", message: "suspended: the hub rejects its agent", hint: "set spec.suspend to false"}}},
	{name: "spoke just created", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "qa-1", true, tugboatv1alpha1.SpokeStatus{})
	}), want: []want{ok("spoke-just-changed")}},
	{name: "agent sees no releases", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "qa-1", true, readySpoke("v0.3.0", 0))
	}), want: []want{{code: "spoke-no-releases", severity: "warning", object: "{ns}/qa-1", message: "its agent reports no Helm releases", hint: "--watch-namespaces"}}},
	{name: "spoke name taken in another namespace", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "qa-1", true, notReadySpoke("DuplicateName", "spoke name \"qa-1\" is already used by an older Spoke in another namespace"))
	}), want: []want{{code: "spoke-duplicate-name", severity: "error", object: "{ns}/qa-1", message: "not Ready (DuplicateName): spoke name \"qa-1\" is already used by an older Spoke", hint: "spoke names are unique across the hub"}}},
	{name: "spoke key too short", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "qa-1", true, notReadySpoke("InvalidSpec", `key "key" of Secret qa-1-key is 8 bytes; at least 32 are needed`))
	}), want: []want{{code: "spoke-invalid-key", severity: "error", object: "{ns}/qa-1", message: "not Ready (InvalidSpec): ", hint: "put keys of at least 32 bytes (openssl rand -hex 32) in Secret {ns}/qa-1-key"}}},
	{name: "agent bootstrap refused", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		st := readySpoke("v0.3.0", 3)
		msg := "spec.agentBootstrap.values sets image.repository, which the hub does not allow (its --bootstrap-allowed-values: replicas)"
		for _, c := range []string{"AgentInstalled", "Stalled"} {
			status := metav1.ConditionFalse
			if c == "Stalled" {
				status = metav1.ConditionTrue
			}
			st.Conditions = append(st.Conditions, metav1.Condition{Type: c, Status: status, Reason: "ValuesNotAllowed", Message: msg,
				LastTransitionTime: st.Conditions[0].LastTransitionTime, ObservedGeneration: 1})
		}
		newSpoke(t, ns, "qa-1", true, st)
	}), want: []want{{code: "spoke-bootstrap-refused", severity: "error", object: "{ns}/qa-1",
		message: "agent bootstrap refused (ValuesNotAllowed): spec.agentBootstrap.values sets image.repository", hint: "--bootstrap-allowed-values"}}},
	{name: "spoke not Ready for another reason", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "qa-1", true, notReadySpoke("OlderProtocol", "agent v0.1.0 speaks protocol v0"))
	}), want: []want{{code: "spoke-not-ready", severity: "error", object: "{ns}/qa-1", message: "not Ready (OlderProtocol): agent v0.1.0 speaks protocol v0", hint: "kubectl describe spoke qa-1 -n {ns}"}}},
	{name: "one agent stale", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "qa-1", true, staleSpoke("v0.3.0"))
	}), want: []want{ok("hub-heartbeats-ok"), {code: "spoke-agent-not-seen", severity: "error", object: "{ns}/qa-1", message: "not Ready (Unknown, AgentNotSeen): no heartbeat since", hint: "Secret {ns}/qa-1-key"}}},
	{name: "outdated agent", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "qa-1", true, readySpoke("v0.2.4", 3))
	}), want: []want{{code: "spoke-version-skew", severity: "warning", object: "{ns}/qa-1", message: "agent v0.2.4, this CLI v0.3.0: versions differ in major or minor", hint: "upgrade the older side"}}},
	{name: "key Secret missing", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newSpoke(t, ns, "qa-1", false, readySpoke("v0.3.0", 3))
	}), want: []want{{code: "spoke-key-secret-missing", severity: "error", object: "{ns}/qa-1", message: "key Secret {ns}/qa-1-key does not exist", hint: "the hub's Spoke controller generates it"}}},
	{name: "key Secrets not readable", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		fleet(t, ns)
		grantRead(t, "doctor-carol", ns, "spokes", "pipelines", "promotions", "releasehistories")
		return faultRun{access: impersonating(t, "doctor-carol")}
	}, want: []want{{code: "spoke-key-secret-forbidden", severity: "warning", object: "{ns}", message: "cannot check the Spokes' key Secrets in namespace {ns}: forbidden", hint: "user doctor-carol needs get on secrets in namespace {ns}"}}},
	{name: "key Secret read fails", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		fleet(t, ns)
		return faultRun{access: faultyHub(t, failing("/api/v1/namespaces/"+ns+"/secrets/prod-1-key"))}
	}, want: []want{{code: "spoke-key-secret-read-failed", severity: "warning", object: "{ns}/prod-1", message: "cannot read key Secret {ns}/prod-1-key: ", hint: "retry"}}},

	// reads
	{name: "Spokes not readable", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		fleet(t, ns)
		grantRead(t, "doctor-dave", ns, "pipelines", "promotions", "releasehistories")
		return faultRun{access: impersonating(t, "doctor-dave")}
	}, want: []want{{code: "read-forbidden", severity: "error", message: "cannot list spokes.tugboat.dev in namespace {ns}: forbidden",
		hint: "user doctor-dave needs list on spokes.tugboat.dev in namespace {ns} (a Role and RoleBinding in {ns})"}}},
	{name: "ReleaseHistory list fails", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		fleet(t, ns)
		return faultRun{access: faultyHub(t, failing("/apis/tugboat.dev/v1alpha1/namespaces/"+ns+"/releasehistories"))}
	}, want: []want{{code: "read-failed", severity: "error", message: "cannot list releasehistories.tugboat.dev in namespace {ns}: ", hint: "retry; if it persists"}}},

	// pipeline
	{name: "Pipeline stalled", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		msg := `environment "qa" is listed twice`
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionFalse, Reason: "InvalidSpec", Message: msg},
			[]metav1.Condition{{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "InvalidSpec", Message: msg}})
	}), want: []want{{code: "pipeline-stalled", severity: "error", object: "{ns}/web", message: `Stalled (InvalidSpec): environment "qa" is listed twice`, hint: "kubectl edit pipeline web -n {ns}"}}},
	{name: "Pipeline never reconciled", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		for _, s := range []string{"dev-1", "staging-1", "prod-1"} {
			newSpoke(t, ns, s, true, readySpoke("v0.3.0", 3))
		}
		newPipeline(t, ns, "web")
		return faultRun{args: []string{"--reconcile-grace", "0s"}}
	}, want: []want{
		{code: "hub-controllers-behind", severity: "warning", message: "1 of 4 Spokes and Pipelines are not reconciled since their last change: {ns}/web", hint: "the hub's controllers may be failing on them"},
		{code: "pipeline-unreconciled", severity: "warning", object: "{ns}/web", message: "no Ready condition: the hub has not reconciled it", hint: "see the hub check"},
	}},
	{name: "Pipeline just created", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		for _, s := range []string{"dev-1", "staging-1", "prod-1"} {
			newSpoke(t, ns, s, true, readySpoke("v0.3.0", 3))
		}
		newPipeline(t, ns, "web")
		return faultRun{}
	}, want: []want{ok("pipeline-just-changed")}},
	{name: "Pipeline names an unknown spoke, not yet reconciled", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		newSpoke(t, ns, "dev-1", true, readySpoke("v0.3.0", 3))
		newPipeline(t, ns, "web") // staging-1 and prod-1 are not registered
		return faultRun{}
	}, want: []want{
		ok("pipeline-just-changed"),
		{code: "pipeline-unknown-spoke", severity: "error", object: "{ns}/web", message: "environment staging targets Spoke staging-1, not registered in namespace {ns}", hint: "tugboat spoke add NAME -n {ns}"},
		{code: "pipeline-unknown-spoke", severity: "error", object: "{ns}/web", message: "environment production targets Spoke prod-1, not registered in namespace {ns}", hint: "fix the target's spoke name"},
	}},
	{name: "Pipeline names an unknown spoke, as the hub reports", inject: func(t *testing.T, ns string, _ *faultCRDs) faultRun {
		newSpoke(t, ns, "dev-1", true, readySpoke("v0.3.0", 3))
		newSpoke(t, ns, "prod-1", true, readySpoke("v0.3.0", 3))
		p := newPipeline(t, ns, "web")
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionFalse, Reason: "TargetNotFound", Message: "spoke staging-1 is not registered in namespace " + ns}, nil)
		return faultRun{}
	}, want: []want{{code: "pipeline-target-not-found", severity: "error", object: "{ns}/web", message: "not Ready (TargetNotFound): spoke staging-1 is not registered in namespace {ns}", hint: "register the missing Spokes"}}},
	{name: "Pipeline reconcile fails", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionFalse, Reason: "ReconciliationFailed", Message: "promotion web-staging-1.4.0 belongs to pipeline api"}, nil)
	}), want: []want{{code: "pipeline-reconcile-failed", severity: "error", object: "{ns}/web", message: "not Ready (ReconciliationFailed): promotion web-staging-1.4.0 belongs", hint: "the hub retries with back-off"}}},
	{name: "Pipeline not Ready for another reason", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionFalse, Reason: "NotificationFailed", Message: "slack: invalid_auth"}, nil)
	}), want: []want{{code: "pipeline-not-ready", severity: "error", object: "{ns}/web", message: "not Ready (NotificationFailed): slack: invalid_auth", hint: "kubectl describe pipeline web -n {ns}"}}},
	{name: "Pipeline Ready unknown", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionUnknown, Reason: "Progressing", Message: "reading targets"}, nil)
	}), want: []want{{code: "pipeline-ready-unknown", severity: "warning", object: "{ns}/web", message: "Ready is Unknown (Progressing): reading targets", hint: "kubectl describe pipeline web -n {ns}"}}},
	{name: "Pipeline reconciling for long", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "every target reports"},
			[]metav1.Condition{{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Progressing", Message: "opening the pull request", LastTransitionTime: ago(10 * time.Minute)}})
	}), want: []want{{code: "pipeline-reconciling-long", severity: "warning", object: "{ns}/web", message: "Reconciling for 10m (Progressing): opening the pull request", hint: "kubectl describe pipeline web -n {ns}"}}},
	{name: "Pipeline suspended", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		p.Spec.Suspend = true
		if err := cluster.Client.Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "every target reports"}, nil)
	}), want: []want{{code: "pipeline-suspended", severity: "warning", object: "{ns}/web", message: "suspended: no automatic promotions", hint: "set spec.suspend to false"}}},
	{name: "rollback hold", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionTrue, Reason: "HeldAfterRollback", Message: "held"}, nil,
			tugboatv1alpha1.HeldEnvironment{Name: "staging", Reason: tugboatv1alpha1.HoldRollback, Since: ago(3 * time.Hour), Version: "1.2.0", Message: "staging-1/apps/web rolled back from 1.3.0 to 1.2.0"})
	}), want: []want{{code: "pipeline-held-rollback", severity: "warning", object: "{ns}/web", message: "automatic promotion into staging is held after a rollback, since 3h ago: staging-1/apps/web rolled back",
		hint: "once the rollback is dealt with: tugboat resume web --env staging -n {ns}"}}},
	{name: "failed rollout hold", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionTrue, Reason: "HeldAfterRolloutFailed", Message: "held"}, nil,
			tugboatv1alpha1.HeldEnvironment{Name: "production", Reason: tugboatv1alpha1.HoldRolloutFailed, Since: ago(2 * time.Hour), Version: "1.4.0",
				Message: "the rollout of 1.4.0 (promotion web-production-1.4.0) spent its failure budget and was rolled back"})
	}), want: []want{{code: "pipeline-held-rollback", severity: "warning", object: "{ns}/web",
		message: "automatic promotion into production is held after a failed rollout was rolled back, since 2h ago: the rollout of 1.4.0",
		hint:    "once the failed version is understood (tugboat status web -n {ns}): tugboat resume web --env production -n {ns}"}}},
	{name: "uninstall hold", inject: onFleet(func(t *testing.T, ns string, p *tugboatv1alpha1.Pipeline) {
		reconciledPipeline(t, p, metav1.Condition{Status: metav1.ConditionTrue, Reason: "HeldAfterUninstall", Message: "held"}, nil,
			tugboatv1alpha1.HeldEnvironment{Name: "production", Reason: tugboatv1alpha1.HoldUninstall, Since: ago(time.Hour), Message: "prod-1/apps/web was uninstalled"})
	}), want: []want{{code: "pipeline-held-uninstall", severity: "warning", object: "{ns}/web", message: "automatic promotion into production is held after an uninstall, since 1h ago: prod-1/apps/web was uninstalled",
		hint: "reinstall the release on the target, or drop the target from environment production of the Pipeline if it is gone for good; then: tugboat resume web --env production -n {ns}"}}},

	// promotion
	{name: "Promotion waits for approval", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		promotionIn(t, p, "production", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionWaitingApproval,
			Conditions: promotionCondition(metav1.ConditionUnknown, "WaitingForApproval", "waits for approval", ago(50*time.Hour))})
	}), want: []want{{code: "promotion-awaiting-approval", severity: "warning", object: "{ns}/web-production-1.4.0", message: "1.4.0 into production of pipeline web has waited for approval for 2d2h",
		hint: "tugboat approve web-production-1.4.0 -n {ns}, or tugboat reject web-production-1.4.0 -n {ns}"}}},
	{name: "Promotion pending", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		promotionIn(t, p, "staging", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionPending,
			Conditions: promotionCondition(metav1.ConditionUnknown, "Pending", "waits for web-staging-1.3.9", ago(20*time.Minute))})
	}), want: []want{{code: "promotion-pending", severity: "warning", object: "{ns}/web-staging-1.4.0", message: "1.4.0 into staging of pipeline web is Pending for 20m: waits for web-staging-1.3.9", hint: "see the hub check"}}},
	{name: "Promotion past its timeout", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		started := ago(2 * time.Hour)
		promotionIn(t, p, "staging", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionRunning, StartedAt: &started})
	}), want: []want{{code: "promotion-past-timeout", severity: "error", object: "{ns}/web-staging-1.4.0", message: "1.4.0 into staging of pipeline web is Running for 2h, past its 30m timeout, and the hub has not failed it", hint: "see the hub check"}}},
	{name: "Promotion near its timeout", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		started := ago(27 * time.Minute)
		pr := newPromotion(t, p, "staging", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionVerifying, StartedAt: &started})
		newTarget(t, pr, "staging-1", "apps", "web", tugboatv1alpha1.PromotionTargetStatus{Message: "runs 1.3.0"})
	}), want: []want{{code: "promotion-near-timeout", severity: "warning", object: "{ns}/web-staging-1.4.0", message: "is Verifying for 27m of its 30m timeout; waiting for staging-1/apps/web (runs 1.3.0)", hint: "tugboat status web -n {ns}"}}},
	{name: "Promotion rolling out past the Pipeline's timeout", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		// Its waves' progress deadlines bound a rollout, not the timeout.
		started := ago(2 * time.Hour)
		promotionIn(t, p, "staging", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionVerifying, StartedAt: &started,
			Rollout: &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutProgressing, Resolved: &tugboatv1alpha1.Rollout{SoakTime: &metav1.Duration{Duration: time.Hour}}}})
	}), want: []want{ok("promotions-ok")}},
	{name: "Promotion rollout paused", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		started := ago(2 * time.Hour)
		promotionIn(t, p, "production", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionPaused, StartedAt: &started,
			Rollout:    &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutPaused, Resolved: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Spokes: []string{"prod-1"}}}},
			Conditions: promotionCondition(metav1.ConditionFalse, "RolloutPaused", "rollout of 1.4.0 into production paused in wave canary: the failure budget is spent", ago(time.Hour))})
	}), want: []want{{code: "promotion-rollout-paused", severity: "warning", object: "{ns}/web-production-1.4.0",
		message: "1.4.0 into production of pipeline web is Paused: rollout of 1.4.0 into production paused in wave canary: the failure budget is spent",
		hint:    "the Promotion holds production until it is resumed and finishes (tugboat rollout resume web-production-1.4.0 -n {ns}) or is aborted (tugboat rollout abort web-production-1.4.0 -n {ns})"}}},
	{name: "Promotion rolling back", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		started := ago(2 * time.Hour)
		promotionIn(t, p, "production", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionRollingBack, StartedAt: &started,
			Rollout:    &tugboatv1alpha1.RolloutStatus{Phase: tugboatv1alpha1.RolloutRollingBack, Resolved: &tugboatv1alpha1.Rollout{OnFailure: tugboatv1alpha1.RolloutRollback}},
			Conditions: promotionCondition(metav1.ConditionUnknown, "RollingBack", "rollout of 1.4.0 into production stopped in wave canary: the failure budget is spent", ago(time.Minute))})
	}), want: []want{{code: "promotion-rolling-back", severity: "warning", object: "{ns}/web-production-1.4.0",
		message: "1.4.0 into production of pipeline web is RollingBack: rollout of 1.4.0 into production stopped in wave canary",
		hint:    "then it fails and production stays held until resumed"}}},
	{name: "Promotion failed", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		at := ago(time.Hour)
		promotionIn(t, p, "production", "1.9.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionFailed, CompletedAt: &at,
			Conditions: promotionCondition(metav1.ConditionFalse, "StrategyFailed", "push rejected: 403", at)})
	}), want: []want{{code: "promotion-failed", severity: "error", object: "{ns}/web-production-1.9.0", message: "1.9.0 into production of pipeline web failed 1h ago (StrategyFailed): push rejected: 403",
		hint: "tugboat promote web --to production --version 1.9.0 -n {ns}"}}},
	{name: "Promotion failed, then a later one succeeded", inject: onFleet(func(t *testing.T, _ string, p *tugboatv1alpha1.Pipeline) {
		failedAt, laterAt := ago(5*time.Hour), ago(4*time.Hour)
		promotionIn(t, p, "dev", "1.3.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionFailed, CompletedAt: &failedAt,
			Conditions: promotionCondition(metav1.ConditionFalse, "TimedOut", "timed out after 30m0s", failedAt)})
		promotionIn(t, p, "dev", "1.3.1", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionSucceeded, CompletedAt: &laterAt})
	}), want: []want{{code: "promotion-failed-superseded", severity: "warning", object: "{ns}/web-dev-1.3.0", message: "failed 5h ago (TimedOut): timed out after 30m0s; since then 1.3.1 succeeded (web-dev-1.3.1)", hint: "fix what the message names"}}},

	{name: "Lifecycle no controller claimed recently", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newLifecycle(t, ns, "db-migrate", "", nil)
		recently, long := ago(time.Minute), ago(2*time.Hour)
		newLifecycle(t, ns, "smoke", "smoke-bot", &recently) // handled: no finding
		newLifecycle(t, ns, "qa", "qa-bot", &long)
	}), want: []want{
		{code: "lifecycle-unclaimed", severity: "warning", object: "{ns}/db-migrate",
			message: "Lifecycle db-migrate (event key db-migrate-key) has never been claimed: no controller says it handles it",
			hint:    "run the controller that handles event key db-migrate-key; it claims the Lifecycle (tugboat lifecycle claim db-migrate -n {ns}) at least every 5m"},
		{code: "lifecycle-unclaimed", severity: "warning", object: "{ns}/qa",
			message: "Lifecycle qa (event key qa-key) was last claimed 2h ago by qa-bot: its controller may have stopped",
			hint:    "tugboat lifecycle claim qa -n {ns}"},
	}},

	{name: "Lifecycle whose last events all timed out", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		recently := ago(time.Minute)
		newLifecycle(t, ns, "db-migrate", "migrator", &recently) // claimed, yet it does not answer
		newLifecycle(t, ns, "smoke", "smoke-bot", &recently)
		newLifecycleEvent(t, ns, "web-production-1.4.0-migrate-1", "db-migrate", tugboatv1alpha1.EventTimedOut, ago(3*time.Hour))
		newLifecycleEvent(t, ns, "web-production-1.4.1-migrate-1", "db-migrate", tugboatv1alpha1.EventTimedOut, ago(2*time.Hour))
		newLifecycleEvent(t, ns, "web-production-1.4.1-migrate-2", "db-migrate", tugboatv1alpha1.EventTimedOut, ago(time.Hour))
		// smoke answered once among its last three: no finding.
		newLifecycleEvent(t, ns, "web-production-1.4.0-smoke-1", "smoke", tugboatv1alpha1.EventTimedOut, ago(3*time.Hour))
		newLifecycleEvent(t, ns, "web-production-1.4.1-smoke-1", "smoke", tugboatv1alpha1.EventDone, ago(2*time.Hour))
		newLifecycleEvent(t, ns, "web-production-1.4.2-smoke-1", "smoke", tugboatv1alpha1.EventTimedOut, ago(time.Hour))
	}), want: []want{
		{code: "lifecycle-steps-time-out", severity: "warning", object: "{ns}/db-migrate",
			message: "the last 3 events of lifecycle db-migrate (event key db-migrate-key) timed out, unanswered: web-production-1.4.1-migrate-2, web-production-1.4.1-migrate-1, web-production-1.4.0-migrate-1",
			hint:    "kubectl get lifecycleevents -n {ns} -l tugboat.dev/lifecycle=db-migrate"},
	}},
	{name: "webhook steps whose 202s are never reported", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		for i, name := range []string{"web-production-1.4.0-qa-1", "web-production-1.4.1-qa-1", "web-production-1.4.2-qa-1"} {
			newLifecycleEvent(t, ns, name, promotion.WebhookLifecycle, tugboatv1alpha1.EventTimedOut, ago(time.Duration(3-i)*time.Hour))
		}
	}), want: []want{
		{code: "lifecycle-steps-time-out", severity: "warning", object: "{ns}/" + promotion.WebhookLifecycle,
			message: "the last 3 webhook steps that answered 202 Accepted got no report before their timeout: web-production-1.4.2-qa-1, web-production-1.4.1-qa-1, web-production-1.4.0-qa-1",
			hint:    "docs/ci-api.md#report-a-webhook-step"},
	}},

	// releasehistory
	{name: "release failed on a spoke", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newReleaseHistory(t, ns, "dev-1", "web", metav1.ConditionFalse, "Failed", "Deployment web: ImagePullBackOff")
	}), want: []want{{code: "releasehistory-failed", severity: "warning", message: "1 ReleaseHistory Ready=False (Failed): {ns}/dev-1.apps.web (dev-1.apps.web: Deployment web: ImagePullBackOff)", hint: "tugboat history dev-1/apps/web -n {ns} --events"}}},
	{name: "release uninstalled from a spoke", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newReleaseHistory(t, ns, "prod-1", "old", metav1.ConditionFalse, "Uninstalled", "the release is not installed on the spoke")
	}), want: []want{{code: "releasehistory-uninstalled", severity: "warning", message: "1 ReleaseHistory Ready=False (Uninstalled): {ns}/prod-1.apps.old", hint: "delete their ReleaseHistories if that is for good"}}},
	{name: "release not Ready for another reason", inject: onFleet(func(t *testing.T, ns string, _ *tugboatv1alpha1.Pipeline) {
		newReleaseHistory(t, ns, "dev-1", "api", metav1.ConditionFalse, "Degraded", "1 of 3 Pods Ready")
	}), want: []want{{code: "releasehistory-not-ready", severity: "warning", message: "1 ReleaseHistory Ready=False (Degraded): {ns}/dev-1.apps.api", hint: "kubectl describe releasehistory dev-1.apps.api -n {ns}"}}},
}

// notReadySpoke is the status of a Spoke the hub judged not Ready.
func notReadySpoke(reason, msg string) tugboatv1alpha1.SpokeStatus {
	st := readySpoke("v0.3.0", 3)
	st.Conditions[0].Status, st.Conditions[0].Reason, st.Conditions[0].Message = metav1.ConditionFalse, reason, msg
	return st
}

// TestDoctor_detectsEachFault injects each fault on the hub and checks
// that doctor reports exactly its problems (code, severity, object,
// message and fix), and that its exit status says so: 1 on an error, and
// on a warning with --fail-on warning.
func TestDoctor_detectsEachFault(t *testing.T) {
	withCLIVersion(t, "v0.3.0")
	crds := &faultCRDs{t: t}
	for _, f := range doctorFaults {
		t.Run(f.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			run := f.inject(t, ns, crds)
			doctor := func(failOn string) ([]app.Finding, error) {
				if run.direct != nil {
					return run.direct(failOn)
				}
				kc := run.access.kubeconfig
				if kc == "" {
					kc = cluster.KubeconfigPath
				}
				return doctorJSON(t, kc, append([]string{"-n", ns, "--fail-on", failOn}, run.args...)...)
			}
			expand := func(s string) string { return strings.ReplaceAll(s, "{ns}", ns) }

			findings, err := doctor("error")
			var problems []app.Finding
			for _, fd := range findings {
				if fd.Severity != "ok" {
					problems = append(problems, fd)
				}
			}
			var wantProblems []OmegaMatcher
			errs, warns := 0, 0
			for _, w := range f.want {
				m := And(HaveField("Code", BeEquivalentTo(w.code)), HaveField("Severity", BeEquivalentTo(w.severity)),
					HaveField("Object", expand(w.object)), HaveField("Message", ContainSubstring(expand(w.message))),
					HaveField("Hint", ContainSubstring(expand(w.hint))))
				switch w.severity {
				case "ok":
					// ok findings are about many objects: the code says enough.
					g.Expect(findings).To(ContainElement(And(HaveField("Code", BeEquivalentTo(w.code)), HaveField("Severity", BeEquivalentTo("ok")))), "%+v", findings)
					continue
				case "error":
					errs++
				case "warning":
					warns++
				}
				g.Expect(w.hint).NotTo(BeEmpty(), "a problem's fix must be asserted")
				wantProblems = append(wantProblems, m)
			}
			g.Expect(problems).To(ConsistOf(wantProblems), "exactly the fault's problems; all findings: %+v", findings)

			// Exit status 1 on an error; warnings fail with --fail-on warning.
			found := fmt.Sprintf("doctor found %s and %s", count(errs, "error"), count(warns, "warning"))
			if errs > 0 {
				g.Expect(err).To(MatchError(found))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			_, err = doctor("warning")
			if errs+warns > 0 {
				g.Expect(err).To(MatchError(found))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
		})
	}
}

func count(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// TestDoctor_everyFindingCodeHasAFaultAndDocs: every code doctor's source
// can emit is asserted by a fault above (so a new finding without a test
// fails here) and has a line in docs/troubleshooting.md.
func TestDoctor_everyFindingCodeHasAFaultAndDocs(t *testing.T) {
	g := NewWithT(t)
	codes, err := app.DoctorSourceCodes()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(codes)).To(BeNumerically(">", 50), "the source scan finds doctor's codes")
	tested := map[string]bool{}
	for _, f := range doctorFaults {
		for _, w := range f.want {
			tested[w.code] = true
		}
	}
	doc, err := os.ReadFile("../../../docs/troubleshooting.md")
	g.Expect(err).NotTo(HaveOccurred())
	var untested, undocumented []string
	for _, c := range codes {
		if !tested[c] {
			untested = append(untested, c)
		}
		if !strings.Contains(string(doc), "`"+c+"`") {
			undocumented = append(undocumented, c)
		}
		delete(tested, c)
	}
	g.Expect(untested).To(BeEmpty(), "finding codes no fault test asserts")
	g.Expect(undocumented).To(BeEmpty(), "finding codes without a line in docs/troubleshooting.md")
	stale := make([]string, 0, len(tested))
	for c := range tested {
		stale = append(stale, c)
	}
	sort.Strings(stale)
	g.Expect(stale).To(BeEmpty(), "fault tests assert codes doctor does not have")
}
