package request_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

var (
	// hub is a real API server (etcd and kube-apiserver) with tugboat's
	// CRDs and the approval policy of the hub chart; hub.Client is its
	// administrator, whom the policy restricts like any person.
	hub *harness.Cluster
	// hubc acts as the hub's ServiceAccount, which the policy exempts: it
	// creates CI and automatic Promotions and writes their phase.
	hubc client.Client
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		hub = c
		if err := identity.Install(context.Background(), c.Client); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var err error
		if hubc, err = client.New(identity.HubConfig(c.RESTConfig), client.Options{Scheme: c.Client.Scheme()}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}))
}

// as returns a client acting as user.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	c, err := identity.Client(hub.RESTConfig, hub.Client.Scheme(), user)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newNamespace creates a namespace of its own for t.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "request-"}}
	if err := hub.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newPipeline creates Pipeline "web" in ns: dev → staging (kubernetes
// strategy, overriding the default notification one) → production (approval
// required).
func newPipeline(t *testing.T, ns string) *tugboatv1alpha1.Pipeline {
	t.Helper()
	target := func(spoke string) []tugboatv1alpha1.Target {
		return []tugboatv1alpha1.Target{{Spoke: spoke, Namespace: "apps"}}
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "dev", Targets: target("dev-1")},
				{Name: "staging", Targets: target("staging-1"), Promotion: &tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyKubernetes}},
				{Name: "production", Targets: target("prod-1"), Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
			},
		},
	}
	if err := hub.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// setPhase writes a Promotion's status.phase, as the controller (the hub's
// ServiceAccount) would.
func setPhase(t *testing.T, pr *tugboatv1alpha1.Promotion, phase tugboatv1alpha1.PromotionPhase) {
	t.Helper()
	orig := pr.DeepCopy()
	pr.Status.Phase = phase
	if err := hubc.Status().Patch(context.Background(), pr, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func promotions(t *testing.T, ns string) []tugboatv1alpha1.Promotion {
	t.Helper()
	var list tugboatv1alpha1.PromotionList
	if err := hub.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
