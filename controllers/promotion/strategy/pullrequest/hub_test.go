package pullrequest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

// The hub's API server (etcd and kube-apiserver with tugboat's CRDs and the
// hub chart's RBAC) is shared by the tests that need one and started on
// first use, as Gitea is.
var (
	hubOnce    sync.Once
	hubCluster *harness.Cluster
	hubErr     error
)

// realHub returns, for namespace ns (created, with the git-credentials
// Secret holding secret), a client acting as the hub's ServiceAccount with
// the RBAC the hub chart ships.
func realHub(t *testing.T, ns string, secret map[string]string) client.Client {
	t.Helper()
	hubOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		hubCluster, hubErr = harness.Start(ctx, harness.Options{Name: "pr-hub", ControlPlaneOnly: true, TugboatCRDs: true})
		if hubErr == nil {
			hubErr = identity.Install(ctx, hubCluster.Client)
		}
	})
	if hubErr != nil {
		t.Fatalf("starting the hub's API server: %v", hubErr)
	}
	ctx := context.Background()
	admin := hubCluster.Client
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	data := map[string][]byte{}
	for k, v := range secret {
		data[k] = []byte(v)
	}
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-credentials"}, Data: data}); err != nil {
		t.Fatal(err)
	}
	hub, err := client.New(identity.HubConfig(hubCluster.RESTConfig), client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return hub
}
