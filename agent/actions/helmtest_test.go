package actions

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

// helmTestAction is the helm test a promotion's hub queues for revision
// rev of ns/name at version.
func helmTestAction(ns, name string, rev int, version string) wire.Action {
	return wire.Action{
		ID:        wire.NewHelmTestActionID(randomHex(8), "smoke", 1, "spoke", ns, name),
		Type:      wire.ActionHelmTest,
		Promotion: "pipelines/web-" + version,
		Namespace: ns,
		Release:   name,
		HelmTest:  &wire.HelmTestAction{Revision: rev, Version: version, TimeoutSeconds: 30},
		Created:   time.Now(),
	}
}

// The web chart has no test hooks: the action passes, saying so, on the
// revision the promotion's upgrade made. (Test Pods that run, pass and
// fail need a node: e2e's TestHelmTestStep_* run them on kwok.)
func TestExecutor_helmTestOfAReleaseWithoutTestsPasses(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	e := newExecutor(t, testOptions(allowAll()))
	up := upgradeAction(ns, "web", "1.1.0")
	g.Expect(execute(t, e, up).Revision).To(Equal(2))

	ht := helmTestAction(ns, "web", 2, "1.1.0")
	out := execute(t, e, ht)
	g.Expect(out.ID).To(Equal(ht.ID))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Revision).To(Equal(2))
	g.Expect(out.Message).To(Equal("release " + ns + "/web (revision 2, chart version 1.1.0) has no test hooks: nothing to test"))
	g.Expect(history(t, ns, "web")).To(HaveLen(2), "a helm test makes no revision")
}

// A helm test runs within the spoke's limits and only on the revision the
// promotion produced; a malformed one is Failed as invalid.
func TestExecutor_helmTestLimits(t *testing.T) {
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	e := newExecutor(t, testOptions(allowAll()))
	if out := execute(t, e, upgradeAction(ns, "web", "1.1.0")); out.Result != wire.ActionSucceeded {
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
		name:    "a revision the release no longer runs",
		mutate:  func(a *wire.Action) { a.HelmTest.Revision = 1 },
		result:  wire.ActionRefused,
		message: "release " + ns + "/web changed since the promotion: its latest revision is 2 (chart version 1.1.0, deployed), not revision 1 at 1.1.0",
	}, {
		name:    "another version",
		mutate:  func(a *wire.Action) { a.HelmTest.Version = "1.2.0" },
		result:  wire.ActionRefused,
		message: "not revision 2 at 1.2.0 that the promotion produced",
	}, {
		name:    "no helmTest",
		mutate:  func(a *wire.Action) { a.HelmTest = nil },
		result:  wire.ActionFailed,
		message: "invalid action: helmTest is required",
	}, {
		name:    "a version set",
		mutate:  func(a *wire.Action) { a.Version = "1.1.0" },
		result:  wire.ActionFailed,
		message: "a helm test sets no version",
	}, {
		name:    "no revision",
		mutate:  func(a *wire.Action) { a.HelmTest.Revision = 0 },
		result:  wire.ActionFailed,
		message: "helmTest.revision must be at least 1",
	}, {
		name:    "a negative timeout",
		mutate:  func(a *wire.Action) { a.HelmTest.TimeoutSeconds = -1 },
		result:  wire.ActionFailed,
		message: "helmTest.timeoutSeconds must not be negative",
	}, {
		name:    "a release that does not exist",
		mutate:  func(a *wire.Action) { a.Release = "nope" },
		result:  wire.ActionFailed,
		message: "release " + ns + "/nope does not exist on this spoke",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ee := e
			if tc.limits.Namespaces != nil {
				tc.limits.ChartSources = allowAll().ChartSources
				ee = newExecutor(t, testOptions(tc.limits))
			}
			a := helmTestAction(ns, "web", 2, "1.1.0")
			if tc.mutate != nil {
				tc.mutate(&a)
			}
			out := execute(t, ee, a)
			g.Expect(out.Result).To(Equal(tc.result), out.Message)
			g.Expect(out.Message).To(ContainSubstring(tc.message))
		})
	}
	if h := history(t, ns, "web"); len(h) != 2 {
		t.Fatalf("a refused or invalid helm test changed the release: %d revisions", len(h))
	}
}

// An upgrade action carrying helmTest is invalid: only a helm test action
// may.
func TestExecutor_anUpgradeWithHelmTestIsInvalid(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	e := newExecutor(t, testOptions(allowAll()))
	up := upgradeAction(ns, "web", "1.1.0")
	up.HelmTest = &wire.HelmTestAction{Revision: 1, Version: "1.1.0"}
	out := execute(t, e, up)
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("helmTest is set only on a helm test action"))
}
