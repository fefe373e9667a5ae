package tiltfile_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/devenv"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := bins.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// find returns the object of kind and name among objs, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (o.GetName() == name || kind == "ConfigMap" && strings.HasPrefix(o.GetName(), name+"-")) {
			return o
		}
	}
	return nil
}

// container returns a Deployment's container called name.
func container(g Gomega, d *unstructured.Unstructured, name string) map[string]any {
	g.ExpectWithOffset(1, d).NotTo(BeNil())
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if c.(map[string]any)["name"] == name {
			return c.(map[string]any)
		}
	}
	g.ExpectWithOffset(1, name).To(BeEmpty(), "no container %s in %s", name, d.GetName())
	return nil
}

func stringsOf(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestTiltfile_realClusterBuildsBothImagesAndWiresTheAgentToTheHub runs the
// Tiltfile's default mode and checks what Tilt would build and deploy: both
// Dockerfile targets, every built image used by a Deployment, the hub
// port-forwarded on its receiver, and an agent reporting to the hub's
// Service as the Spoke the Tiltfile registers, with the key the hub
// generates for it.
func TestTiltfile_realClusterBuildsBothImagesAndWiresTheAgentToTheHub(t *testing.T) {
	g := NewWithT(t)
	root := repoRoot(t)
	tl := run(t, root, "--version=v0.0.0-tilt", "--allow-k8s-contexts=gke_dev")

	g.Expect(tl.locals).To(BeEmpty())
	g.Expect(tl.contexts).To(Equal([]string{"gke_dev"}))
	g.Expect(tl.helmed).To(Equal([]string{"config/charts/tugboat-hub", "config/charts/tugboat-agent"}))

	// Images: the Dockerfile's two final stages, with the version.
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	stages := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^FROM .* AS (\S+)$`).FindAllStringSubmatch(string(dockerfile), -1) {
		stages[m[1]] = true
	}
	g.Expect(tl.docker).To(HaveLen(2))
	built := map[string]string{}
	for _, d := range tl.docker {
		built[d.Ref] = d.Target
		g.Expect(d.Context).To(Equal("."))
		g.Expect(d.Dockerfile).To(Equal("Dockerfile"))
		g.Expect(stages).To(HaveKey(d.Target), "docker_build %s: the Dockerfile has no stage %q", d.Ref, d.Target)
		g.Expect(d.BuildArgs).To(HaveKeyWithValue("VERSION", "v0.0.0-tilt"))
		// Everything the Dockerfile copies is in the context Tilt sends.
		for _, m := range regexp.MustCompile(`(?m)^COPY (\S+) `).FindAllStringSubmatch(string(dockerfile), -1) {
			if m[1] != "go.mod" && !strings.HasPrefix(m[1], "--from") {
				g.Expect(d.Only).To(ContainElement(m[1]), "docker_build %s leaves out %s, which the Dockerfile copies", d.Ref, m[1])
			}
		}
		for _, p := range d.Only {
			g.Expect(filepath.Join(root, p)).To(BeAnExistingFile())
		}
	}
	g.Expect(built).To(Equal(map[string]string{"ghcr.io/tugboat-dev/tugboat": "tugboat", "ghcr.io/tugboat-dev/tugboat-agent": "agent"}))

	// Every image built runs somewhere (Tilt injects it by repository).
	hub := find(tl.yaml, "Deployment", "tugboat-hub")
	agent := find(tl.yaml, "Deployment", "tugboat-agent")
	hubC, agentC := container(g, hub, "hub"), container(g, agent, "agent")
	repo := func(image any) string { s, _ := image.(string); return strings.SplitN(s, ":", 2)[0] }
	g.Expect(repo(hubC["image"])).To(Equal("ghcr.io/tugboat-dev/tugboat"))
	g.Expect(repo(agentC["image"])).To(Equal("ghcr.io/tugboat-dev/tugboat-agent"))

	// The hub serves plain HTTP in the dev cluster, and mounts no TLS Secret.
	for _, a := range stringsOf(hubC["args"]) {
		g.Expect(a).NotTo(HavePrefix("--receiver-tls-"))
	}
	g.Expect(stringsOf(hubC["args"])).To(ContainElement("--receiver-bind-address=:9443"))
	vols, _, _ := unstructured.NestedSlice(hub.Object, "spec", "template", "spec", "volumes")
	g.Expect(vols).To(BeEmpty())

	// The agent: spoke "tilt", the hub's Service (its receiver port), plain
	// HTTP allowed, and the key Secret of the Spoke the Tiltfile creates.
	g.Expect(stringsOf(agentC["args"])).To(ContainElements("--hub-insecure-http", "--spoke=tilt"))
	svc := find(tl.yaml, "Service", "tugboat-hub")
	g.Expect(svc).NotTo(BeNil())
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var receiverPort int64
	for _, p := range ports {
		if p.(map[string]any)["name"] == "receiver" {
			receiverPort = p.(map[string]any)["port"].(int64)
		}
	}
	g.Expect(receiverPort).NotTo(BeZero())
	var hubURLs []string
	for _, a := range stringsOf(agentC["args"]) {
		if strings.HasPrefix(a, "--hub-url=") {
			hubURLs = append(hubURLs, strings.TrimPrefix(a, "--hub-url="))
		}
	}
	g.Expect(hubURLs).To(Equal([]string{"http://tugboat-hub." + svc.GetNamespace() + ".svc:" + itoa(receiverPort)}))
	spoke := find(tl.yaml, "Spoke", "tilt")
	g.Expect(spoke).NotTo(BeNil())
	g.Expect(spoke.GetAPIVersion()).To(Equal("tugboat.dev/v1alpha1"))
	g.Expect(spoke.GetNamespace()).To(Equal(agent.GetNamespace()))
	keySecret, _, _ := unstructured.NestedString(spoke.Object, "spec", "keySecretRef", "name")
	agentVols, _, _ := unstructured.NestedSlice(agent.Object, "spec", "template", "spec", "volumes")
	var mounted []string
	for _, v := range agentVols {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
		mounted = append(mounted, name)
	}
	g.Expect(mounted).To(ContainElement(keySecret))

	// Resources: the hub port-forwards its receiver, the Spoke object is
	// its own resource after the hub, the agent waits for it.
	names := map[string]k8sResource{}
	for _, r := range tl.resources {
		name := r.Workload
		if r.NewName != "" {
			name = r.NewName
		}
		names[name] = r
		if r.Workload != "" {
			g.Expect(find(tl.yaml, "Deployment", r.Workload)).NotTo(BeNil(), "k8s_resource %s names no Deployment", r.Workload)
		}
	}
	for _, r := range tl.resources {
		for _, d := range r.ResourceDeps {
			g.Expect(names).To(HaveKey(d), "resource_deps names %s", d)
		}
	}
	g.Expect(names["tugboat-hub"].PortForwards).To(ContainElement("9443:9443"))
	hubPorts := map[string]bool{}
	cports, _ := hubC["ports"].([]any)
	for _, p := range cports {
		hubPorts[itoa(p.(map[string]any)["containerPort"].(int64))] = true
	}
	for _, pf := range names["tugboat-hub"].PortForwards {
		g.Expect(hubPorts).To(HaveKey(strings.SplitN(pf, ":", 2)[1]), "port-forward %s: the hub has no such container port", pf)
	}
	g.Expect(names["spoke-tilt"].Objects).To(Equal([]string{"tilt:spoke:" + spoke.GetNamespace()}))
	g.Expect(names["tugboat-agent"].ResourceDeps).To(Equal([]string{"spoke-tilt"}))
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// TestTiltfile_noDockerRunsHubAndAgentsAgainstDevUp runs the Tiltfile's
// no-Docker mode with three spokes and checks the local resources: one
// build, `tugboat dev up --external-controllers`, the hub and one agent per
// spoke as `tugboat dev run` serve commands named as dev up names the
// spokes, every dependency defined. Then it runs each command as Tilt
// would, dry (make -n, --help), with a freshly built tugboat.
func TestTiltfile_noDockerRunsHubAndAgentsAgainstDevUp(t *testing.T) {
	g := NewWithT(t)
	root := repoRoot(t)
	tl := run(t, root, "--no-docker", "--spokes=3", "--dev-dir=/tmp/tugboat-tilt")

	g.Expect(tl.docker).To(BeEmpty())
	g.Expect(tl.yaml).To(BeEmpty())
	g.Expect(tl.resources).To(BeEmpty())

	byName := map[string]localResource{}
	var order []string
	for _, r := range tl.locals {
		byName[r.Name] = r
		order = append(order, r.Name)
	}
	want := []string{"build", "dev-up", "hub"}
	for i := range 3 {
		want = append(want, "agent-"+devenv.SpokeName(i, 3))
	}
	g.Expect(order).To(Equal(want))
	for _, r := range tl.locals {
		for _, d := range r.ResourceDeps {
			g.Expect(byName).To(HaveKey(d), "%s depends on %s", r.Name, d)
			g.Expect(slices.Index(order, d)).To(BeNumerically("<", slices.Index(order, r.Name)))
		}
		for _, d := range r.Deps {
			if d != "bin/tugboat" {
				g.Expect(filepath.Join(root, d)).To(BeAnExistingFile())
			}
		}
	}
	g.Expect(byName["build"].Cmd).To(Equal("make build VERSION=dev"))
	g.Expect(byName["dev-up"].ServeCmd).To(Equal([]string{"bin/tugboat", "dev", "up", "--external-controllers", "--spokes", "3", "--dir", "/tmp/tugboat-tilt"}))
	g.Expect(byName["dev-up"].Deps).To(BeEmpty(), "a rebuild must not restart the clusters")
	g.Expect(byName["hub"].ServeCmd).To(Equal([]string{"bin/tugboat", "dev", "run", "hub", "--dir", "/tmp/tugboat-tilt"}))
	g.Expect(byName["hub"].Deps).To(Equal([]string{"bin/tugboat"}))
	for i := range 3 {
		name := "agent-" + devenv.SpokeName(i, 3)
		g.Expect(byName[name].ServeCmd).To(Equal([]string{"bin/tugboat", "dev", "run", name, "--dir", "/tmp/tugboat-tilt"}))
		g.Expect(byName[name].ResourceDeps).To(ContainElement("hub"))
	}

	// The commands exist: make's target (dry run), and the tugboat
	// subcommands and flags (--help with the same arguments).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mk := exec.CommandContext(ctx, "sh", "-c", byName["build"].Cmd+" -n")
	mk.Dir = root
	out, err := mk.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("go build"))
	g.Expect(string(out)).To(ContainSubstring("app.Version=dev"))

	bin := filepath.Join(t.TempDir(), "tugboat")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tugboat")
	build.Dir = root
	out, err = build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	for _, name := range order[1:] {
		argv := byName[name].ServeCmd
		g.Expect(argv[0]).To(Equal("bin/tugboat"))
		cmd := exec.CommandContext(ctx, bin, append(slices.Clone(argv[1:]), "--help")...)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s: %v\n%s", name, argv, out)
		for _, a := range argv[1:] {
			if strings.HasPrefix(a, "--") {
				g.Expect(string(out)).To(ContainSubstring(a+" "), "%s: tugboat %s has no flag %s", name, strings.Join(argv[1:3], " "), a)
			}
		}
	}
	// An unknown resource name is refused at once once dev up is ready;
	// with no environment, dev run gives up after --wait.
	out, err = exec.CommandContext(ctx, bin, "dev", "run", "hub", "--dir", t.TempDir(), "--wait", "300ms").CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("no environment became ready"))
}
