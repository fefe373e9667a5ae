//go:build !agentonly

package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestLifecycle_doneAndErrorRecordTheAuthenticatedUser runs `tugboat
// lifecycle` as people (kubeconfigs impersonating alice or carol; $USER
// says mallory) with the chart's policies installed: alice, bound to the
// ClusterRole tugboat-step-controller, lists the events the hub published,
// marks one Done and another Error, and claims the Lifecycle, each in the
// name the API server authenticated; carol, without the RBAC, is refused
// (exit code 4); a finished event cannot be finished again (5); an unknown
// event is not found (3); bad input is a usage error (2).
func TestLifecycle_doneAndErrorRecordTheAuthenticatedUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(identity.Install(ctx, cluster.Client)).To(Succeed())
	t.Cleanup(func() {
		if err := identity.Uninstall(ctx, cluster.Client); err != nil {
			t.Error(err)
		}
	})
	t.Setenv("USER", "mallory")
	ns := newNamespace(t)
	g.Expect(cluster.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-steps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tugboat-step-controller"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	})).To(Succeed())
	g.Eventually(func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch", Group: "tugboat.dev", Resource: "lifecycleevents", Subresource: "status"}}}
		g.Expect(cluster.Client.Create(ctx, sar)).To(Succeed())
		return sar.Status.Allowed
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	hubc, err := client.New(identity.HubConfig(cluster.RESTConfig), client.Options{Scheme: cluster.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Client.Create(ctx, &tugboatv1alpha1.Lifecycle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-migrate"}, Spec: tugboatv1alpha1.LifecycleSpec{EventKey: "db-migrate"},
	})).To(Succeed())
	deadline := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	publish := func(name, step string) {
		// As the hub publishes them: only it may.
		g.Expect(hubc.Create(ctx, &tugboatv1alpha1.LifecycleEvent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: tugboatv1alpha1.LifecycleEventSpec{Lifecycle: "db-migrate", EventKey: "db-migrate", Promotion: "web-production-1.4.0", Pipeline: "web",
				Environment: "production", Version: "1.4.0", Step: step, Stage: tugboatv1alpha1.StepStagePre, Attempt: 1, Deadline: deadline},
		})).To(Succeed())
	}
	publish("web-production-1.4.0-migrate-1", "migrate")
	publish("web-production-1.4.0-seed-1", "seed")
	as := func(user string, args ...string) (string, error) {
		kc := kubeconfigVariant(t, cluster.KubeconfigPath, func(c *clientcmdapi.Config) { c.AuthInfos["hub-admin"].Impersonate = user })
		out, _, err := run(append(args, "-n", ns, "--kubeconfig", kc)...)
		return out, err
	}
	event := func(name string) *tugboatv1alpha1.LifecycleEvent {
		ev := &tugboatv1alpha1.LifecycleEvent{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ev)).To(Succeed())
		return ev
	}

	out, err := as("alice", "lifecycle", "list")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "web-production-1.4.0-migrate-1")).To(Equal([]string{"web-production-1.4.0-migrate-1", "db-migrate", "web-production-1.4.0",
		"Pre/migrate", "1", "Pending", "2030-01-02T03:04:05Z", "-", "-"}))

	_, err = as("carol", "lifecycle", "done", "web-production-1.4.0-migrate-1")
	g.Expect(app.ExitCode(err)).To(Equal(app.ExitForbidden), "no RBAC: %v", err)
	g.Expect(event("web-production-1.4.0-migrate-1").Phase()).To(Equal(tugboatv1alpha1.EventPending))

	out, err = as("alice", "lifecycle", "done", "web-production-1.4.0-migrate-1", "-m", "schema v42")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("Marked lifecycle event web-production-1.4.0-migrate-1 Done (step migrate of promotion web-production-1.4.0), as alice.\n"))
	ev := event("web-production-1.4.0-migrate-1")
	g.Expect([]string{string(ev.Status.Phase), ev.Status.FinishedBy, ev.Status.Message}).To(Equal([]string{"Done", "alice", "schema v42"}),
		"the API server's name, not the kubeconfig's nor $USER")

	_, err = as("alice", "lifecycle", "error", "web-production-1.4.0-migrate-1")
	g.Expect(err).To(MatchError("lifecycle event already finished: lifecycleevent " + ns + "/web-production-1.4.0-migrate-1 is Done (by alice): schema v42"))
	g.Expect(app.ExitCode(err)).To(Equal(app.ExitConflict))

	out, err = as("alice", "lifecycle", "error", "web-production-1.4.0-seed-1", "--message", "seed data missing", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(And(ContainSubstring(`"phase": "Error"`), ContainSubstring(`"finishedBy": "alice"`), ContainSubstring(`"message": "seed data missing"`)))
	g.Expect(event("web-production-1.4.0-seed-1").Status.FinishedBy).To(Equal("alice"))

	out, err = as("alice", "lifecycle", "list", "--pending")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("No lifecycle events in namespace " + ns + ".\n"))

	out, err = as("alice", "lifecycle", "claim", "db-migrate")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("Claimed lifecycle db-migrate (event key db-migrate), as alice.\n"))
	lc := &tugboatv1alpha1.Lifecycle{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-migrate"}, lc)).To(Succeed())
	g.Expect(lc.Status.ClaimedBy).To(Equal("alice"))
	g.Expect(lc.Status.LastClaimedAt.Time).To(BeTemporally("~", time.Now(), time.Minute))

	// Bad input.
	_, err = as("alice", "lifecycle", "done", "web-production-1.4.0-nothing-1")
	g.Expect(err).To(MatchError(ContainSubstring("lifecycleevent " + ns + "/web-production-1.4.0-nothing-1 not found")))
	g.Expect(app.ExitCode(err)).To(Equal(app.ExitNotFound))
	for _, args := range [][]string{
		{"lifecycle", "done"},
		{"lifecycle", "done", "a", "b"},
		{"lifecycle", "error", "web-production-1.4.0-seed-1", "-m", strings.Repeat("m", 1025)},
		{"lifecycle", "done", "web-production-1.4.0-seed-1", "-o", "xml"},
		{"lifecycle", "list", "extra"},
		{"lifecycle", "done", "web-production-1.4.0-seed-1", "--finished-by", "bob"},
	} {
		_, err = as("alice", args...)
		g.Expect(app.ExitCode(err)).To(Equal(app.ExitUsage), "%v: %v", args, err)
	}
}

// TestStatus_showsTheActivePromotionsSteps: `tugboat status PIPELINE`
// lists each lifecycle step of an environment's active promotion (as the
// hub wrote status.steps), in table and YAML.
func TestStatus_showsTheActivePromotionsSteps(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns, "web")
	pr := &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-production-1.4.0"},
		Spec: tugboatv1alpha1.PromotionSpec{Pipeline: "web", From: "staging", To: "production", Version: "1.4.0",
			RequestedBy: tugboatv1alpha1.RequestedByAuto},
	}
	g.Expect(cluster.Client.Create(ctx, pr)).To(Succeed())
	pr.Status.Phase = tugboatv1alpha1.PromotionRunning
	pr.Status.Steps = []tugboatv1alpha1.StepStatus{
		{Name: "migrate", Stage: tugboatv1alpha1.StepStagePre, Type: tugboatv1alpha1.StepExternal, Phase: tugboatv1alpha1.StepRunning, Attempts: 1,
			LifecycleEvent: "web-production-1.4.0-migrate-1", Message: "waiting"},
		{Name: "qa", Stage: tugboatv1alpha1.StepStagePost, Type: tugboatv1alpha1.StepWebhook, Phase: tugboatv1alpha1.StepPending, Message: "not started"},
	}
	g.Expect(cluster.Client.Status().Update(ctx, pr)).To(Succeed())
	writeStatus(t, p, tugboatv1alpha1.PipelineStatus{Environments: []tugboatv1alpha1.EnvironmentStatus{
		{Name: "production", ActivePromotion: pr.Name},
	}})

	out, _, err := tugboat("status", "web", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "migrate")).To(Equal([]string{"production", pr.Name, "migrate", "Pre", "external", "Running", "1", "web-production-1.4.0-migrate-1", "waiting"}), out)
	g.Expect(lineWith(out, "qa")).To(Equal([]string{"production", pr.Name, "qa", "Post", "webhook", "Pending", "0", "-", "not", "started"}), out)

	out, _, err = tugboat("status", "web", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`"lifecycleEvent": "web-production-1.4.0-migrate-1"`))
}
