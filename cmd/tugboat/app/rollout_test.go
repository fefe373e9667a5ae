//go:build !agentonly

package app_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestRollout_steersAsTheAuthenticatedUser runs `tugboat rollout
// pause|resume|abort` as people (kubeconfigs that impersonate them; $USER
// says mallory) with the policy tugboat-approvals installed: bad command
// lines, a Promotion without a rollout in progress, and a user without the
// verb each get a clear error and exit code, and nothing is written; alice
// (verb pause) pauses in her name; once the hub honored it, tugboat status
// says who paused, and a second pause is refused as already paused.
func TestRollout_steersAsTheAuthenticatedUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t.Setenv("USER", "mallory")
	ns := newNamespace(t)
	p := newPipeline(t, ns, "web")
	rollout := &tugboatv1alpha1.RolloutStatus{
		Phase:    tugboatv1alpha1.RolloutProgressing,
		Resolved: &tugboatv1alpha1.Rollout{Canary: &tugboatv1alpha1.CanaryWave{Spokes: []string{"prod-1"}}},
		Waves:    []tugboatv1alpha1.WaveStatus{{Name: "canary", Targets: 1, InProgress: 1}, {Name: "final", Targets: 2, Pending: 2}},
	}
	running := newPromotion(t, p, "production", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionRunning, Rollout: rollout})
	plain := newPromotion(t, p, "staging", "1.4.0", tugboatv1alpha1.PromotionStatus{Phase: tugboatv1alpha1.PromotionRunning})
	writeStatus(t, p, tugboatv1alpha1.PipelineStatus{Environments: []tugboatv1alpha1.EnvironmentStatus{{Name: "production", ActivePromotion: running.Name}}})

	g.Expect(identity.Install(ctx, cluster.Client)).To(Succeed())
	t.Cleanup(func() {
		if err := identity.Uninstall(ctx, cluster.Client); err != nil {
			t.Error(err)
		}
	})
	g.Expect(identity.GrantVerb(ctx, cluster.Client, ns, "alice", "pause", "web/*")).To(Succeed())
	g.Expect(identity.GrantVerb(ctx, cluster.Client, ns, "bob", "pause", "web/production")).To(Succeed())
	g.Expect(identity.GrantVerb(ctx, cluster.Client, ns, "carol", "resume", "web/production")).To(Succeed())
	as := func(user string, args ...string) (string, error) {
		kc := kubeconfigVariant(t, cluster.KubeconfigPath, func(c *clientcmdapi.Config) { c.AuthInfos["hub-admin"].Impersonate = user })
		out, _, err := run(append(args, "-n", ns, "--kubeconfig", kc)...)
		return out, err
	}

	for _, tc := range []struct {
		name string
		user string
		args []string
		err  string
		code int
	}{
		{"no verb", "", []string{"rollout"}, "name what to do: tugboat rollout pause|resume|abort <promotion>", app.ExitUsage},
		{"an unknown verb", "", []string{"rollout", "stop", running.Name}, `unknown command "stop" for "tugboat rollout"`, app.ExitUsage},
		{"no promotion", "alice", []string{"rollout", "pause"}, "name the promotion whose rollout to pause: tugboat rollout pause <promotion>", app.ExitUsage},
		{"two promotions", "alice", []string{"rollout", "resume", "a", "b"}, "name one promotion, got 2: a b", app.ExitUsage},
		{"an empty name", "alice", []string{"rollout", "pause", " "}, "the promotion's name is empty", app.ExitUsage},
		{"a bad output", "alice", []string{"rollout", "pause", running.Name, "-o", "xml"}, `unknown output format "xml": use table, wide, json or yaml`, app.ExitUsage},
		{"a message too long", "alice", []string{"rollout", "pause", running.Name, "-m", strings.Repeat("x", 1025)}, "message: at most 1024 characters, got 1025", app.ExitUsage},
		{"an unknown promotion", "alice", []string{"rollout", "pause", "web-production-0.0.1"}, "promotion " + ns + "/web-production-0.0.1 not found", app.ExitNotFound},
		{"no rollout", "alice", []string{"rollout", "pause", plain.Name},
			"promotion " + plain.Name + " has no rollout: its environment staging is promoted as one wave (spec.environments[].rollout); there is nothing to pause", app.ExitConflict},
		{"not paused", "carol", []string{"rollout", "resume", running.Name}, "promotion " + running.Name + " is not paused (Running): there is nothing to resume", app.ExitConflict},
		{"without the verb", "carol", []string{"rollout", "pause", running.Name},
			"user carol may not pause rollouts into web/production: RBAC must allow the verb pause on environments.tugboat.dev named web/production or web/* (see the ClusterRole tugboat-approver)", app.ExitForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, _, err := run(tc.args...) // the parent command takes no flag
			if tc.user != "" {
				out, err = as(tc.user, tc.args...)
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			g.Expect(app.ExitCode(err)).To(Equal(tc.code))
			g.Expect(out).To(BeEmpty())
			g.Expect(getPromotion(t, ns, running.Name).Status.RolloutRequest).To(BeNil(), "nothing is written")
		})
	}

	out, err := as("alice", "rollout", "pause", running.Name, "-m", "checking the dashboards")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("Asked the hub to pause the rollout of promotion " + running.Name + " (1.4.0 into production), as alice.\n"))
	req := getPromotion(t, ns, running.Name).Status.RolloutRequest
	g.Expect(req).NotTo(BeNil())
	g.Expect([]any{req.Action, req.Sequence, req.User, req.Message}).To(Equal([]any{tugboatv1alpha1.RolloutActionPause, int64(1), "alice", "checking the dashboards"}),
		"the API server's name, not the kubeconfig's nor $USER")
	_, err = as("alice", "rollout", "pause", running.Name)
	g.Expect(err).NotTo(HaveOccurred(), "asking again before the hub acted changes nothing")
	g.Expect(getPromotion(t, ns, running.Name).Status.RolloutRequest.Sequence).To(Equal(int64(1)))
	_, err = as("bob", "rollout", "pause", running.Name)
	g.Expect(err).To(MatchError("promotion " + running.Name + " is already paused (alice asked to pause it)"))
	g.Expect(app.ExitCode(err)).To(Equal(app.ExitConflict))

	// The hub honors it (written here as the hub's ServiceAccount).
	hubc, err := client.New(identity.HubConfig(cluster.RESTConfig), client.Options{Scheme: cluster.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	pr := getPromotion(t, ns, running.Name)
	orig := pr.DeepCopy()
	pr.Status.Phase = tugboatv1alpha1.PromotionPaused
	pr.Status.Rollout.Phase, pr.Status.Rollout.PausedBy, pr.Status.Rollout.ObservedRequest = tugboatv1alpha1.RolloutPaused, "alice", 1
	g.Expect(hubc.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(Succeed())

	out, _, err = tugboat("status", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(running.Name+" (Paused by alice: wave 1/2 (canary), 0/3 succeeded, 0 failed of 0 allowed)"), out)
	_, err = as("bob", "rollout", "pause", running.Name)
	g.Expect(err).To(MatchError("promotion " + running.Name + " is already paused (by alice)"))

	out, err = as("carol", "rollout", "resume", running.Name, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`"rolloutRequest": {`))
	req = getPromotion(t, ns, running.Name).Status.RolloutRequest
	g.Expect([]any{req.Action, req.Sequence, req.User}).To(Equal([]any{tugboatv1alpha1.RolloutActionResume, int64(2), "carol"}))

	// rollout abort is tugboat abort.
	g.Expect(identity.GrantAbort(ctx, cluster.Client, ns, "dave", "web/production")).To(Succeed())
	out, err = as("dave", "rollout", "abort", running.Name, "-m", "wrong build")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("Asked the hub to abort promotion " + running.Name + " (1.4.0 into production), as dave.\n"))
	g.Expect(getPromotion(t, ns, running.Name).Status.AbortRequest.User).To(Equal("dave"))
}
