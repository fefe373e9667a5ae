package docsexamples

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/webhook/pipelineapi"
)

// ciDoc is the page whose examples TestCIDoc_* run.
const ciDoc = docsDir + "/ci.md"

// ensureTools returns an error naming the Debian packages to install when
// a command the CI examples need is missing; as root (CI on a fresh Debian
// machine) it installs them with apt-get, as the dashboard tests install
// Chromium.
func ensureTools() error {
	packages := map[string]string{"bash": "bash", "openssl": "openssl", "curl": "curl"}
	var missing []string
	for cmd, pkg := range packages {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the CI examples need %s: sudo apt-get install -y %s", strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	fmt.Fprintln(os.Stderr, "docs examples: installing", strings.Join(missing, " "), "from Debian's packages")
	install := func() error {
		cmd := exec.Command("apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install %s: %w\n%s", strings.Join(missing, " "), err, out)
		}
		return nil
	}
	if err := install(); err != nil {
		if out, uerr := exec.Command("apt-get", "update").CombinedOutput(); uerr != nil {
			return fmt.Errorf("%w; apt-get update: %w\n%s", err, uerr, out)
		}
		return install()
	}
	return nil
}

// ciFixture is the hub side of docs/ci.md: its Secrets and Pipeline (the
// page's own YAML, created for real in a namespace of the test's) and the
// hub's pipeline API handler served over HTTPS.
type ciFixture struct {
	ns      string
	hub     string
	caFile  string
	secrets map[string]map[string]string // Secret name → its stringData
}

func newCIFixture(t *testing.T, g Gomega) *ciFixture {
	t.Helper()
	if err := ensureTools(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data, err := os.ReadFile(ciDoc)
	g.Expect(err).NotTo(HaveOccurred())
	blocks, err := ParseBlocks(ciDoc, data)
	g.Expect(err).NotTo(HaveOccurred())
	// The page's Pipeline and Secrets, created for real, in a namespace of
	// the test's own (the page says fleet; the path in the examples too).
	f := &ciFixture{ns: "fleet", secrets: map[string]map[string]string{}}
	g.Expect(ensureNamespace(ctx, f.ns)).To(Succeed())
	found := false
	for _, b := range blocks {
		if b.Lang != "yaml" || b.Marker != "" {
			continue
		}
		docs, err := yamlDocs(b.Text)
		g.Expect(err).NotTo(HaveOccurred())
		for _, doc := range docs {
			u := toUnstructured(doc)
			if u.GetKind() == "Secret" {
				sd, _ := doc["stringData"].(map[string]any)
				f.secrets[u.GetName()] = map[string]string{}
				for k, v := range sd {
					f.secrets[u.GetName()][k] = fmt.Sprint(v)
				}
			}
			g.Expect(client.IgnoreAlreadyExists(cluster.Client.Create(ctx, u))).To(Succeed(), "%s: %s %s", b.Where(), u.GetKind(), u.GetName())
			// Gone after the test: the other tests dry-run objects of the
			// same names, which an apply would merge with these.
			t.Cleanup(func() {
				if err := client.IgnoreNotFound(cluster.Client.Delete(context.Background(), u)); err != nil {
					t.Errorf("deleting %s %s: %v", u.GetKind(), u.GetName(), err)
				}
			})
			found = found || u.GetKind() == "Pipeline"
		}
	}
	g.Expect(found).To(BeTrue(), "%s has no Pipeline example", ciDoc)
	t.Cleanup(func() {
		if err := cluster.Client.DeleteAllOf(context.Background(), &tugboatv1alpha1.Promotion{}, client.InNamespace(f.ns)); err != nil {
			t.Errorf("deleting the Promotions: %v", err)
		}
	})
	g.Expect(f.secrets).To(HaveKey("web-ci"))
	g.Expect(f.secrets).To(HaveKey("web-approvals"))

	handler := pipelineapi.New(cluster.Client, cluster.Client, pipelineapi.Options{Registerer: prometheus.NewRegistry()})
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	f.hub = srv.URL
	f.caFile = filepath.Join(t.TempDir(), "hub-ca.crt")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	g.Expect(os.WriteFile(f.caFile, cert, 0o600)).To(Succeed())
	return f
}

// snippet returns the block of ci.md marked <!-- example: marker ... -->.
func snippet(g Gomega, marker string) Block { return snippetOf(g, ciDoc, marker) }

// snippetOf returns the block of page marked <!-- example: marker ... -->.
func snippetOf(g Gomega, page, marker string) Block {
	data, err := os.ReadFile(page)
	g.Expect(err).NotTo(HaveOccurred())
	blocks, err := ParseBlocks(page, data)
	g.Expect(err).NotTo(HaveOccurred())
	for _, b := range blocks {
		if b.Marker == marker {
			return b
		}
	}
	g.Expect(marker).To(BeEmpty(), "%s has no block marked <!-- example: %s -->", page, marker)
	return Block{}
}

// runBash runs script with bash -eo pipefail (as GitHub Actions runs a
// bash step), with env on top of PATH and HOME only, and curl trusting the
// test hub's certificate. It returns stdout, and an error with stderr.
func (f *ciFixture) runBash(ctx context.Context, script string, env map[string]string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "CURL_CA_BUNDLE=" + f.caFile}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func (f *ciFixture) promotion(ctx context.Context, name string) (*tugboatv1alpha1.Promotion, error) {
	pr := &tugboatv1alpha1.Promotion{}
	return pr, cluster.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, pr)
}

// deletePromotions removes the Promotions of the namespace, so each example
// creates its own.
func (f *ciFixture) deletePromotions(ctx context.Context, g Gomega) {
	g.Expect(cluster.Client.DeleteAllOf(ctx, &tugboatv1alpha1.Promotion{}, client.InNamespace(f.ns))).To(Succeed())
	g.Eventually(func() int {
		var list tugboatv1alpha1.PromotionList
		_ = cluster.Client.List(ctx, &list, client.InNamespace(f.ns))
		return len(list.Items)
	}, 10*time.Second, 50*time.Millisecond).Should(BeZero())
}

// TestCIDoc_curlAndGitHubActionsExamplesAreAccepted runs the examples of
// docs/ci.md (and the signed call of docs/ci-api.md) as written, against the hub's pipeline API handler on a real
// API server with the page's own Pipeline and Secrets: the bearer-token
// call, the signed script, the GitHub Actions step and the approval. Each
// must be accepted and create (or approve) the Promotion it says.
func TestCIDoc_curlAndGitHubActionsExamplesAreAccepted(t *testing.T) {
	g := NewWithT(t)
	f := newCIFixture(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Bearer token.
	out, err := f.runBash(ctx, snippet(g, "ci-bearer").Text, map[string]string{
		"TUGBOAT_HUB": f.hub, "TUGBOAT_TOKEN": f.secrets["web-ci"]["token"],
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(`{"promotion":"web-production-1.4.0"}`))
	pr, err := f.promotion(ctx, "web-production-1.4.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Spec.RequestedBy).To(Equal(tugboatv1alpha1.RequestedByCI))
	g.Expect(pr.Spec.Requester).To(Equal("ci-job-123"))

	// Approval, with the approval credential, of the Promotion just made.
	out, err = f.runBash(ctx, snippet(g, "ci-approve").Text, map[string]string{
		"TUGBOAT_HUB": f.hub, "TUGBOAT_APPROVAL_TOKEN": f.secrets["web-approvals"]["release-bot"],
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(`{"promotion":"web-production-1.4.0","decision":"approved","decidedBy":"release-bot","gate":"1 of 1 approval (release-bot)"}`))
	pr, err = f.promotion(ctx, "web-production-1.4.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Status.Approvals).To(ContainElement(And(
		HaveField("User", "release-bot"), HaveField("Source", tugboatv1alpha1.ApprovalSource("CI")))))

	// The signed script.
	f.deletePromotions(ctx, g)
	script := snippet(g, "ci-signed").Text
	env := map[string]string{
		"TUGBOAT_HUB": f.hub, "TUGBOAT_KEY": f.secrets["web-ci"]["key"],
		"NAMESPACE": "fleet", "PIPELINE": "web", "ENVIRONMENT": "production", "VERSION": "1.5.0", "REQUESTER": "https://ci.example.com/job/42",
	}
	out, err = f.runBash(ctx, script, env)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(`{"promotion":"web-production-1.5.0"}`))
	pr, err = f.promotion(ctx, "web-production-1.5.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Spec.Requester).To(Equal("https://ci.example.com/job/42"))

	// docs/ci-api.md's signed call.
	out, err = f.runBash(ctx, snippetOf(g, docsDir+"/ci-api.md", "ci-api-signed").Text, map[string]string{
		"HUB": f.hub, "TUGBOAT_KEY": f.secrets["web-ci"]["key"],
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(`{"promotion":"web-production-1.4.0"}`), "the Promotions of the bearer call were deleted")

	// The same script with a wrong key is refused, and fails.
	env["TUGBOAT_KEY"] = strings.Repeat("0", 64)
	env["VERSION"] = "1.5.1"
	_, err = f.runBash(ctx, script, env)
	g.Expect(err).To(MatchError(ContainSubstring("request not authenticated")))
	_, err = f.promotion(ctx, "web-production-1.5.1")
	g.Expect(err).To(HaveOccurred(), "a refused request created nothing")

	// The GitHub Actions step, with GitHub's expressions replaced by what
	// GitHub would put there.
	f.deletePromotions(ctx, g)
	step := githubStep(t, g, snippet(g, "not-kubernetes"))
	stepEnv := map[string]string{}
	expressions := map[string]string{
		"vars.TUGBOAT_HUB":    f.hub,
		"secrets.TUGBOAT_KEY": f.secrets["web-ci"]["key"],
		"github.ref_name":     "v1.6.0",
		"github.server_url":   "https://github.com",
		"github.repository":   "acme/web",
		"github.run_id":       "4242",
	}
	exprRE := regexp.MustCompile(`\$\{\{\s*([^}]+?)\s*\}\}`)
	for k, v := range step.Env {
		stepEnv[k] = exprRE.ReplaceAllStringFunc(v, func(m string) string {
			e := exprRE.FindStringSubmatch(m)[1]
			val, ok := expressions[e]
			g.Expect(ok).To(BeTrue(), "the step uses the expression %s, which the test does not know", e)
			return val
		})
	}
	g.Expect(step.Shell).To(Equal("bash"))
	out, err = f.runBash(ctx, step.Run, stepEnv)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(`{"promotion":"web-production-1.6.0"}`))
	pr, err = f.promotion(ctx, "web-production-1.6.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Spec.Requester).To(Equal("https://github.com/acme/web/actions/runs/4242"))
}

// ghStep is the part of a GitHub Actions step the test runs.
type ghStep struct {
	Name  string            `json:"name"`
	Shell string            `json:"shell"`
	Env   map[string]string `json:"env"`
	Run   string            `json:"run"`
}

// githubStep returns the one step with run: of the workflow in b.
func githubStep(t *testing.T, g Gomega, b Block) ghStep {
	t.Helper()
	var wf struct {
		Jobs map[string]struct {
			Steps []ghStep `json:"steps"`
		} `json:"jobs"`
	}
	g.Expect(sigsyaml.Unmarshal([]byte(b.Text), &wf)).To(Succeed(), b.Where())
	var steps []ghStep
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if s.Run != "" {
				steps = append(steps, s)
			}
		}
	}
	if len(steps) != 1 {
		t.Fatal(errors.New(b.Where() + ": want exactly one step with run: in the workflow"))
	}
	return steps[0]
}
