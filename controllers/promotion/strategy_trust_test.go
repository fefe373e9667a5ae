package promotion_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/webhook"
	"tugboat.dev/tugboat/e2e/identity"
)

// TestReconciler_runsThePipelinesStrategyNotTheOneThePromotionNames: a user
// whose only right is to create Promotions (what `tugboat promote` needs)
// writes a webhook strategy pointing at their own listener into one, with a
// secretRef to a Secret of the namespace. The hub runs the strategy the
// Pipeline defines for the environment, records it in status.strategy, and
// never calls the listener (security review 3, high finding: before, the
// hub ran whatever spec.strategy said, and could be made to send a Secret
// out as git credentials or a request anywhere). On the real API server,
// as the impersonated user, with the approval policy of the hub chart.
func TestReconciler_runsThePipelinesStrategyNotTheOneThePromotionNames(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := stagingProduction(g, "strategy-trust", nil)
	g.Expect(cluster.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "git-credentials"},
		StringData: map[string]string{"token": "s3cr3t-token", "key": "s3cr3t-key-that-is-at-least-32-bytes-long"},
	})).To(Succeed())

	// The attacker's listener.
	var heard atomic.Int32
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		heard.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer listener.Close()

	var mu sync.Mutex
	var ran []string
	notification := strategy.Func(func(_ context.Context, req strategy.Request) (strategy.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.Promotion.Namespace != ns.Name {
			return strategy.Result{Message: "another test's"}, nil // left by another test of the package
		}
		ran = append(ran, req.Promotion.Name+" "+string(req.Strategy.Type))
		return strategy.Result{Message: "notified"}, nil
	})
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{
		tugboatv1alpha1.StrategyNotification: notification,
		tugboatv1alpha1.StrategyWebhook:      webhook.New(listener.Client()),
	}
	hubtest.Start(t, identity.HubConfig(cluster.RESTConfig), opts)

	// mallory may create and read Promotions, nothing else.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "promoter"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"tugboat.dev"}, Resources: []string{"promotions"}, Verbs: []string{"create", "get"}},
	}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "promoter"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "promoter"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"}},
	}
	g.Expect(cluster.Client.Create(ctx, role)).To(Succeed())
	g.Expect(cluster.Client.Create(ctx, binding)).To(Succeed())
	mallory, err := identity.Client(cluster.RESTConfig, cluster.Client.Scheme(), "mallory")
	g.Expect(err).NotTo(HaveOccurred())

	promotion := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": tugboatv1alpha1.GroupVersion.String(), "kind": "Promotion",
			"metadata": map[string]any{"namespace": ns.Name, "name": name},
			"spec": map[string]any{
				"pipeline": "web", "from": "staging", "to": "production", "version": "6.6.6",
				"requestedBy": "user", "requester": "mallory",
				"strategy": map[string]any{"type": "webhook", "webhook": map[string]any{
					"url": listener.URL + "/steal", "secretRef": map[string]any{"name": "git-credentials"},
				}},
			},
		}}
		return u
	}

	// Unless asked strictly, the API server drops the field...
	g.Eventually(func() error {
		return mallory.Create(ctx, promotion("web-production-6.6.6"), client.FieldValidation(metav1.FieldValidationIgnore))
	}).WithTimeout(30*time.Second).Should(Succeed(), "RBAC takes effect once the API server's informers have the binding")
	// ...and asked strictly (kubectl's default), it refuses it.
	err = mallory.Create(ctx, promotion("web-production-strict"), client.FieldValidation(metav1.FieldValidationStrict))
	g.Expect(err).To(MatchError(ContainSubstring(`unknown field "spec.strategy"`)))

	g.Eventually(func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ran...)
	}).WithTimeout(30*time.Second).Should(Equal([]string{"web-production-6.6.6 notification"}), "the Pipeline's strategy runs")
	pr := &tugboatv1alpha1.Promotion{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "web-production-6.6.6"}, pr)).To(Succeed())
	g.Expect(pr.Status.Strategy).To(Equal(&tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification}))
	g.Expect(pr.Status.Phase).To(BeElementOf(tugboatv1alpha1.PromotionVerifying, tugboatv1alpha1.PromotionRunning))
	// Only one strategy runs per attempt, and it already ran.
	g.Expect(heard.Load()).To(BeZero(), "the hub never called the listener the Promotion named")
}
