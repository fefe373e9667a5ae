//go:build !agentonly

package app_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// exitCode is the status `tugboat` exits with for err (main calls
// app.ExitCode).
func exitCode(err error) int { return app.ExitCode(err) }

// Every kind of failure exits with its documented code (docs/cli.md#exit-codes).
func TestExitCodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns, "web")
	running, err := request.Create(ctx, cluster.Client, p, "production", "1.5.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(g, running, tugboatv1alpha1.PromotionRunning)
	kc := cluster.KubeconfigPath
	nobody := kubeconfigVariant(t, kc, func(c *clientcmdapi.Config) { c.AuthInfos["hub-admin"].Impersonate = "nobody" })

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"status", "-n", ns, "--kubeconfig", kc}, app.ExitOK, ""},
		{[]string{"status", "-n", ns, "--kubeconfig", kc, "-o", "wide"}, app.ExitOK, ""},
		{[]string{"nonsense"}, app.ExitUsage, `unknown command "nonsense" for "tugboat"`},
		{[]string{"status", "--bogus"}, app.ExitUsage, "unknown flag: --bogus"},
		{[]string{"status", "a", "b"}, app.ExitUsage, "accepts at most 1 arg(s), received 2"},
		{[]string{"abort"}, app.ExitUsage, "accepts 1 arg(s), received 0"},
		{[]string{"status", "-o", "csv"}, app.ExitUsage, `unknown output format "csv": use table, wide, json or yaml`},
		{[]string{"releases", "-o", "xml"}, app.ExitUsage, `unknown output format "xml": use table, wide, json or yaml`},
		{[]string{"history", "web"}, app.ExitUsage, `"web" is not <spoke>/<namespace>/<release>`},
		{[]string{"promote", "web", "-n", ns, "--kubeconfig", kc}, app.ExitUsage, "give --to and --version to promote, or --resume to lift a hold"},
		{[]string{"resume", "web", "-n", ns, "--kubeconfig", kc}, app.ExitUsage, "name the environment to resume: --env <environment>"},
		{[]string{"spoke", "add", "Bad_Name", "-n", ns, "--kubeconfig", kc}, app.ExitUsage, ""},
		{[]string{"spoke", "add", "edge-1", "--flux", "--hub-url", "https://hub", "-o", "json", "-n", ns, "--kubeconfig", kc}, app.ExitUsage, `unknown output format "json" for --flux: use yaml (or nothing, to apply)`},
		{[]string{"spoke", "rotate-key", "edge-1", "--timeout", "0s", "-n", ns, "--kubeconfig", kc}, app.ExitUsage, "--timeout must be positive"},
		{[]string{"status", "nope", "-n", ns, "--kubeconfig", kc}, app.ExitNotFound, "pipeline " + ns + "/nope not found"},
		{[]string{"history", "s-1/apps/web", "-n", ns, "--kubeconfig", kc}, app.ExitNotFound, "no history of release apps/web on spoke s-1 in namespace " + ns + " (ReleaseHistory s-1.apps.web not found)"},
		{[]string{"approve", "nope", "-n", ns, "--kubeconfig", kc}, app.ExitNotFound, "promotion " + ns + "/nope not found"},
		{[]string{"spoke", "remove", "nope", "-n", ns, "--kubeconfig", kc}, app.ExitNotFound, "spoke " + ns + "/nope not found (tugboat spoke list -n " + ns + " shows the spokes there)"},
		{[]string{"promote", "web", "--to", "qa", "--version", "1.0.0", "-n", ns, "--kubeconfig", kc}, app.ExitNotFound, `environment: pipeline ` + ns + `/web has no environment "qa" (it has dev, staging, production)`},
		{[]string{"resume", "web", "--env", "qa", "-n", ns, "--kubeconfig", kc}, app.ExitNotFound, `environment: pipeline ` + ns + `/web has no environment "qa"`},
		{[]string{"status", "-n", ns, "--kubeconfig", nobody}, app.ExitForbidden, `listing pipelines in ` + ns + `: pipelines.tugboat.dev is forbidden: User "nobody" cannot list resource "pipelines" in API group "tugboat.dev" in the namespace "` + ns + `"`},
		{[]string{"approve", running.Name, "-n", ns, "--kubeconfig", kc}, app.ExitConflict, "promotion " + running.Name + " is Running, not waiting for approval"},
		{[]string{"status", "--kubeconfig", "/nonexistent/kubeconfig"}, app.ExitError, ""},
	} {
		_, _, err := run(tc.args...)
		g.Expect(exitCode(err)).To(Equal(tc.code), "%v: %v", tc.args, err)
		if tc.msg != "" {
			g.Expect(err).To(MatchError(tc.msg), "%v", tc.args)
		}
	}
}
