//go:build !agentonly

package app_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/e2e/harness"
)

// cluster is the hub: a real API server (etcd and kube-apiserver) with
// tugboat's CRDs. Its kubeconfig's context is "hub", user "hub-admin",
// namespace "default".
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "hub", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		return m.Run()
	}))
}

// tugboat runs the CLI in-process against the hub and returns what it
// printed.
func tugboat(args ...string) (stdout, stderr string, err error) {
	cmd := app.NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(args, "--kubeconfig", cluster.KubeconfigPath))
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// lineWith returns the fields of the first output line containing every
// one of words, or nil.
func lineWith(out string, words ...string) []string {
	for _, l := range strings.Split(out, "\n") {
		fields := strings.Fields(l)
		all := true
		for _, w := range words {
			found := false
			for _, f := range fields {
				found = found || f == w
			}
			all = all && found
		}
		if all {
			return fields
		}
	}
	return nil
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fleet-"}}
	if err := cluster.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newPipeline creates Pipeline name in ns: dev → staging → production
// (approval required), one target each.
func newPipeline(t *testing.T, ns, name string) *tugboatv1alpha1.Pipeline {
	t.Helper()
	target := func(spoke string) []tugboatv1alpha1.Target {
		return []tugboatv1alpha1.Target{{Spoke: spoke, Namespace: "apps"}}
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1alpha1.PromotionStrategy{Type: tugboatv1alpha1.StrategyNotification},
			Environments: []tugboatv1alpha1.Environment{
				{Name: "dev", Targets: target("dev-1")},
				{Name: "staging", Targets: target("staging-1")},
				{Name: "production", Targets: target("prod-1"), Gates: tugboatv1alpha1.Gates{RequireApproval: true}},
			},
		},
	}
	if err := cluster.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeStatus writes a Pipeline's status as the controller would.
func writeStatus(t *testing.T, p *tugboatv1alpha1.Pipeline, status tugboatv1alpha1.PipelineStatus) {
	t.Helper()
	p.Status = status
	if err := cluster.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func getPromotion(t *testing.T, ns, name string) *tugboatv1alpha1.Promotion {
	t.Helper()
	pr := &tugboatv1alpha1.Promotion{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pr); err != nil {
		t.Fatal(err)
	}
	return pr
}
