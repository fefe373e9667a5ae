//go:build !agentonly

package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestAbort_recordsTheAuthenticatedUser runs `tugboat abort` as people
// (kubeconfigs whose user impersonates alice or carol; $USER says
// mallory) with the policy tugboat-approvals installed and the hub running
// in-process as its ServiceAccount: alice, who has the RBAC verb abort on
// web/*, aborts a Promotion waiting for approval, and the hub moves it to
// Aborted naming her; carol, without the verb, is refused (exit code 4);
// a request written directly in someone else's name is refused; a
// finished Promotion cannot be aborted (exit code 5).
func TestAbort_recordsTheAuthenticatedUser(t *testing.T) {
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
	p := newPipeline(t, ns, "web")
	g.Expect(identity.GrantAbort(ctx, cluster.Client, ns, "alice", "web/*")).To(Succeed())
	g.Expect(identity.GrantAbort(ctx, cluster.Client, ns, "carol")).To(Succeed())
	hubc, err := client.New(identity.HubConfig(cluster.RESTConfig), client.Options{Scheme: cluster.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{tugboatv1alpha1.StrategyNotification: strategy.Func(func(context.Context, strategy.Request) (strategy.Result, error) {
		return strategy.Result{Message: "no-op"}, nil
	})}
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts)
	as := func(user string, args ...string) (string, error) {
		kc := kubeconfigVariant(t, cluster.KubeconfigPath, func(c *clientcmdapi.Config) { c.AuthInfos["hub-admin"].Impersonate = user })
		out, _, err := run(append(args, "-n", ns, "--kubeconfig", kc)...)
		return out, err
	}
	ready := func(name string) func() string {
		return func() string {
			pr := getPromotion(t, ns, name)
			msg := ""
			if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
				msg = c.Message
			}
			return string(pr.Status.Phase) + ": " + msg
		}
	}
	pr, err := request.Create(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(ready(pr.Name), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))

	_, err = as("carol", "abort", pr.Name)
	g.Expect(err).To(MatchError(ContainSubstring("not allowed to abort promotion " + pr.Name + ": ")))
	g.Expect(err).To(MatchError(ContainSubstring("user carol may not abort promotions into web/production: RBAC must allow the verb abort on environments.tugboat.dev named web/production or web/*")))
	g.Expect(app.ExitCode(err)).To(Equal(app.ExitForbidden))

	// The CLI always names the user the API server authenticated; a
	// client that writes another name is refused by the API server.
	alice, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "alice")
	g.Expect(err).NotTo(HaveOccurred())
	forged := getPromotion(t, ns, pr.Name)
	orig := forged.DeepCopy()
	forged.Status.AbortRequest = &tugboatv1alpha1.AbortRequest{User: "bob", Time: metav1.Now()}
	err = alice.Status().Patch(ctx, forged, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("status.abortRequest must name you (user alice), the user the API server authenticated")))
	g.Expect(getPromotion(t, ns, pr.Name).Status.AbortRequest).To(BeNil())

	out, err := as("alice", "abort", pr.Name, "-m", "wrong build")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("Asked the hub to abort promotion " + pr.Name + " (1.4.0 into production), as alice.\n"))
	g.Eventually(ready(pr.Name), 30*time.Second, 50*time.Millisecond).Should(Equal("Aborted: aborted by alice: wrong build"))
	got := getPromotion(t, ns, pr.Name).Status.AbortRequest
	g.Expect(got.User).To(Equal("alice"), "the API server's name, not the kubeconfig's nor $USER")
	g.Expect(got.Message).To(Equal("wrong build"))

	_, err = as("alice", "abort", pr.Name)
	g.Expect(err).NotTo(HaveOccurred(), "asking again changes nothing")

	// Another user: the request stands, the promotion is finished.
	g.Expect(identity.GrantAbort(ctx, cluster.Client, ns, "dave", "web/production")).To(Succeed())
	_, err = as("dave", "abort", pr.Name)
	g.Expect(err).To(MatchError("promotion " + pr.Name + " was already asked to abort by alice"))
	g.Expect(app.ExitCode(err)).To(Equal(app.ExitConflict))

	finished, err := request.Create(ctx, hubc, p, "production", "1.5.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	// Once the hub has taken it up, it finishes (as the hub's
	// ServiceAccount, since the hub does not touch a finished Promotion).
	g.Eventually(ready(finished.Name), 30*time.Second, 50*time.Millisecond).Should(HavePrefix("WaitingApproval: "))
	finished = getPromotion(t, ns, finished.Name)
	orig = finished.DeepCopy()
	now := metav1.Now()
	finished.Status.Phase, finished.Status.CompletedAt = tugboatv1alpha1.PromotionSucceeded, &now
	g.Expect(hubc.Status().Patch(ctx, finished, client.MergeFrom(orig))).To(Succeed())
	_, err = as("alice", "abort", finished.Name)
	g.Expect(err).To(MatchError("promotion " + finished.Name + " has already finished (Succeeded): there is nothing to abort"))
	g.Expect(app.ExitCode(err)).To(Equal(app.ExitConflict))

	out, err = as("alice", "abort", "web-production-0.0.1", "-o", "json")
	g.Expect(err).To(MatchError("promotion " + ns + "/web-production-0.0.1 not found"))
	g.Expect(app.ExitCode(err)).To(Equal(app.ExitNotFound))
	g.Expect(out).To(BeEmpty())

	// -o json prints the Promotion acted on.
	third, err := request.Create(ctx, hubc, p, "production", "1.6.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	out, err = as("alice", "abort", third.Name, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var view struct {
		Name         string
		AbortRequest struct{ User string }
	}
	g.Expect(json.Unmarshal([]byte(out), &view)).To(Succeed(), out)
	g.Expect(view.Name).To(Equal(third.Name))
	g.Expect(view.AbortRequest.User).To(Equal("alice"))
	g.Eventually(ready(third.Name), 30*time.Second, 50*time.Millisecond).Should(Equal("Aborted: aborted by alice"))
}
