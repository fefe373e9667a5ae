//go:build !agentonly

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// runHub runs the real hub in-process against the hub cluster until the
// test ends: its Spoke controller generates the spokes' keys.
func runHub(t *testing.T) {
	t.Helper()
	opts := hubtest.Options()
	opts.Strategies = strategy.Registry{}
	hubtest.Start(t, cluster.RESTConfig, opts)
}

func TestSpokeAdd_createsTheSpokeWaitsForItsKeyAndPrintsTheInstallCommand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	runHub(t)
	ns := newNamespace(t)

	out, stderr, err := tugboat("spoke", "add", "edge-1", "-n", ns, "--hub-url", "https://hub.example:8443")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(stderr).To(BeEmpty())
	g.Expect(out).To(ContainSubstring("Spoke " + ns + "/edge-1 created.\n"))
	g.Expect(out).To(ContainSubstring("The hub holds the spoke's key in Secret " + ns + "/edge-1-key.\n"))
	install := "  tugboat install agent --spoke edge-1 -n " + ns + " --hub-url https://hub.example:8443 --kubeconfig " +
		cluster.KubeconfigPath + " --spoke-context <spoke-context>\n"
	g.Expect(out).To(HaveSuffix(install), out)

	sp := &tugboatv1alpha1.Spoke{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge-1"}, sp)).To(Succeed())
	g.Expect(sp.Spec.KeySecretRef.Name).To(Equal("edge-1-key"))
	secret := &corev1.Secret{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge-1-key"}, secret)).To(Succeed())
	key := string(secret.Data[tugboatv1alpha1.SpokeKeySecretKey])
	g.Expect(len(key)).To(BeNumerically(">=", 32))
	g.Expect(out).NotTo(ContainSubstring(key), "the key is never printed")

	// Again: nothing changes, the command is printed again.
	out, _, err = tugboat("spoke", "add", "edge-1", "-n", ns, "--hub-url", "https://hub.example:8443")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(HavePrefix("Spoke " + ns + "/edge-1 already exists.\n"))
	g.Expect(out).To(HaveSuffix(install))
	again := &corev1.Secret{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge-1-key"}, again)).To(Succeed())
	g.Expect(again.ResourceVersion).To(Equal(secret.ResourceVersion))

	// -o json: the result on stdout, the progress on stderr.
	out, stderr, err = tugboat("spoke", "add", "edge-1", "-n", ns, "--hub-url", "https://hub.example:8443", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(stderr).To(HavePrefix("Spoke " + ns + "/edge-1 already exists.\n"))
	var added struct{ Namespace, Name, KeySecret, InstallCommand string }
	g.Expect(json.Unmarshal([]byte(out), &added)).To(Succeed(), out)
	g.Expect(added.Namespace).To(Equal(ns))
	g.Expect(added.KeySecret).To(Equal("edge-1-key"))
	g.Expect("  " + added.InstallCommand + "\n").To(Equal(install))

	// A namespace that does not exist yet is created; without --hub-url
	// the command has a placeholder; --context is passed on as --hub-context.
	fresh := ns + "-new"
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fresh}}) })
	out, _, err = tugboat("spoke", "add", "edge-2", "-n", fresh, "--context", "hub")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(HavePrefix("Namespace " + fresh + " created.\nSpoke " + fresh + "/edge-2 created.\n"))
	g.Expect(out).To(HaveSuffix("  tugboat install agent --spoke edge-2 -n " + fresh + " --hub-url <hub-url> --kubeconfig " +
		cluster.KubeconfigPath + " --hub-context hub --spoke-context <spoke-context>\n"))

	// A name used in another namespace is refused, and nothing is created.
	other := newNamespace(t)
	_, _, err = tugboat("spoke", "add", "edge-1", "-n", other)
	g.Expect(err).To(MatchError(`spoke name "edge-1" is already used by Spoke ` + ns + `/edge-1: spoke names are unique across the hub (use -n ` + ns + `, or another name)`))
	var list tugboatv1alpha1.SpokeList
	g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(other))).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
}

func TestSpokeVerbs_refuseBadInput(t *testing.T) {
	ns := newNamespace(t)
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"add: no name", []string{"spoke", "add"}, "accepts 1 arg(s), received 0"},
		{"add: bad name", []string{"spoke", "add", "Edge_1"}, `"Edge_1" is not a valid spoke name (an RFC 1123 label`},
		{"add: name with a dot", []string{"spoke", "add", "edge.1"}, `"edge.1" is not a valid spoke name`},
		{"add: hub URL not http(s)", []string{"spoke", "add", "edge-1", "--hub-url", "ftp://hub"}, `--hub-url "ftp://hub" must be an absolute http(s) URL`},
		{"add: hub URL relative", []string{"spoke", "add", "edge-1", "--hub-url", "/v1"}, `--hub-url "/v1" must be an absolute http(s) URL`},
		{"add: timeout zero", []string{"spoke", "add", "edge-1", "--timeout", "0s"}, "--timeout must be positive"},
		{"add --flux: no hub URL", []string{"spoke", "add", "edge-1", "--flux"}, "--flux needs --hub-url: the Provider posts to <hub-url>/v1/flux/<spoke>"},
		{"add --flux: output json", []string{"spoke", "add", "edge-1", "--flux", "--hub-url", "https://hub", "-o", "json"}, `unknown output format "json" for --flux: use yaml`},
		{"add --flux: bad namespace", []string{"spoke", "add", "edge-1", "--flux", "--hub-url", "https://hub", "--flux-namespace", "Flux_System"}, `"Flux_System" is not a valid namespace`},
		{"add --flux: bad source namespace", []string{"spoke", "add", "edge-1", "--flux", "--hub-url", "https://hub", "--helmrelease-namespaces", "apps,-x"}, `"-x" is not a valid namespace`},
		{"add --flux --cluster with a spoke context", []string{"spoke", "add", "edge-1", "--flux", "--hub-url", "https://hub", "--cluster", "edge", "--spoke-context", "edge"}, "--cluster reaches the spoke through Cluster API's kubeconfig"},
		{"add --flux --cluster not a name", []string{"spoke", "add", "edge-1", "--flux", "--hub-url", "https://hub", "--cluster", "Edge_1"}, `--cluster "Edge_1" is not a valid Cluster name`},
		{"add --cluster without --flux", []string{"spoke", "add", "edge-1", "--cluster", "edge"}, "--cluster, --spoke-kubeconfig"},
		{"add --flux -o yaml with a spoke", []string{"spoke", "add", "edge-1", "--flux", "--hub-url", "https://hub", "-o", "yaml", "--spoke-context", "edge"}, "-o yaml prints the objects and applies nothing"},
		{"add: --spoke-context without --flux", []string{"spoke", "add", "edge-1", "--spoke-context", "x"}, "--cluster, --spoke-kubeconfig, --spoke-context and --helmrelease-namespaces go with --flux"},
		{"add: unknown output", []string{"spoke", "add", "edge-1", "-o", "csv"}, `unknown output format "csv": use table, wide, json or yaml`},
		{"list: unknown output", []string{"spoke", "list", "-o", "xml"}, `unknown output format "xml": use table, wide, json or yaml`},
		{"list: arguments", []string{"spoke", "list", "edge-1"}, `unknown command "edge-1" for "tugboat spoke list"`},
		{"rotate-key: unknown spoke", []string{"spoke", "rotate-key", "nope"}, "spoke " + ns + "/nope not found (tugboat spoke list -n " + ns + " shows the spokes there)"},
		{"rotate-key: bad name", []string{"spoke", "rotate-key", "No"}, `"No" is not a valid spoke name`},
		{"rotate-key: timeout zero", []string{"spoke", "rotate-key", "edge-1", "--timeout", "0s"}, "--timeout must be positive"},
		{"rotate-key: bad key Secret name", []string{"spoke", "rotate-key", "edge-1", "--key-secret", "Bad_Name"}, `--key-secret "Bad_Name" is not a valid Secret name`},
		{"rotate-key: bad key namespace", []string{"spoke", "rotate-key", "edge-1", "--key-namespace", "a.b"}, `--key-namespace "a.b" is not a valid namespace`},
		{"rotate-key: negative cache TTL", []string{"spoke", "rotate-key", "edge-1", "--hub-key-cache-ttl", "-1s"}, "--hub-key-cache-ttl must not be negative"},
		{"remove: unknown spoke", []string{"spoke", "remove", "nope"}, "spoke " + ns + "/nope not found"},
		{"remove: two names", []string{"spoke", "remove", "a", "b"}, "accepts 1 arg(s), received 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, _, err := tugboat(append(tc.args, "-n", ns)...)
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			g.Expect(out).NotTo(ContainSubstring("created"))
		})
	}
	g := NewWithT(t)
	root := app.NewRootCommand()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"spoke", "rename", "a"})
	err := root.ExecuteContext(context.Background())
	g.Expect(err).To(MatchError(ContainSubstring(`unknown command "rename" for "tugboat spoke"`)))
	var list tugboatv1alpha1.SpokeList
	g.Expect(cluster.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(BeEmpty(), "bad input changes nothing")
}

// reportedSpoke creates Spoke name in ns with a status, as the hub writes
// it.
func reportedSpoke(t *testing.T, ns, name string, ready metav1.ConditionStatus, seen *metav1.Time, agent string, releases int32) {
	t.Helper()
	sp := &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
	}
	if err := cluster.Client.Create(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
	reason, msg := "AgentConnected", "agent "+agent+" is sending heartbeats"
	if ready != metav1.ConditionTrue {
		reason, msg = "AgentNotSeen", "waiting for the agent's first heartbeat"
	}
	sp.Status = tugboatv1alpha1.SpokeStatus{LastSeen: seen, AgentVersion: agent, KubernetesVersion: "v1.36.3", ReleaseCount: releases}
	apimeta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{Type: "Ready", Status: ready, Reason: reason, Message: msg, LastTransitionTime: t0})
	if err := cluster.Client.Status().Update(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
}

func TestSpokeList_showsEverySpokeInEachFormat(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reportedSpoke(t, ns, "staging-1", metav1.ConditionTrue, &t1, "v0.3.0", 12)
	reportedSpoke(t, ns, "dev-1", metav1.ConditionUnknown, nil, "", 0)

	out, _, err := tugboat("spoke", "list", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(
		"NAME       READY    LAST SEEN             AGENT   RELEASES\n" +
			"dev-1      Unknown  -                     -       -\n" +
			"staging-1  True     2026-05-01T11:30:00Z  v0.3.0  12\n"))

	out, _, err = tugboat("spoke", "list", "-n", ns, "-o", "wide")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "NAME", "READY", "KUBERNETES", "REASON", "MESSAGE")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, "staging-1")).To(Equal([]string{"staging-1", "True", "2026-05-01T11:30:00Z", "v0.3.0", "12", "v1.36.3", "staging-1-key",
		"AgentConnected", "agent", "v0.3.0", "is", "sending", "heartbeats"}), out)

	out, _, err = tugboat("spoke", "list", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var list struct {
		Spokes []struct {
			Namespace, Name, Ready, Reason, AgentVersion, KeySecret string
			LastSeen                                                *string
			Releases                                                int
		}
	}
	g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed(), out)
	g.Expect(list.Spokes).To(HaveLen(2))
	g.Expect(list.Spokes[0].Name).To(Equal("dev-1"))
	g.Expect(list.Spokes[0].LastSeen).To(BeNil())
	g.Expect(list.Spokes[1].Namespace).To(Equal(ns))
	g.Expect(list.Spokes[1].Ready).To(Equal("True"))
	g.Expect(list.Spokes[1].Reason).To(Equal("AgentConnected"))
	g.Expect(*list.Spokes[1].LastSeen).To(Equal("2026-05-01T11:30:00Z"))
	g.Expect(list.Spokes[1].Releases).To(Equal(12))
	g.Expect(list.Spokes[1].KeySecret).To(Equal("staging-1-key"))

	out, _, err = tugboat("spoke", "list", "-n", ns, "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var y struct {
		Spokes []struct {
			Name         string `yaml:"name"`
			Ready        string `yaml:"ready"`
			AgentVersion string `yaml:"agentVersion"`
			Releases     int    `yaml:"releases"`
		} `yaml:"spokes"`
	}
	g.Expect(yaml.Unmarshal([]byte(out), &y)).To(Succeed(), out)
	g.Expect(y.Spokes).To(HaveLen(2))
	g.Expect(y.Spokes[1].Name).To(Equal("staging-1"))
	g.Expect(y.Spokes[1].AgentVersion).To(Equal("v0.3.0"))
	g.Expect(y.Spokes[0].Ready).To(Equal("Unknown"))

	// -A: every namespace, with a NAMESPACE column.
	other := newNamespace(t)
	reportedSpoke(t, other, "prod-1", metav1.ConditionTrue, &t0, "v0.3.0", 3)
	out, _, err = tugboat("spoke", "list", "-A")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "NAMESPACE", "NAME", "READY")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, ns, "staging-1")).To(Equal([]string{ns, "staging-1", "True", "2026-05-01T11:30:00Z", "v0.3.0", "12"}), out)
	g.Expect(lineWith(out, other, "prod-1")).To(Equal([]string{other, "prod-1", "True", "2026-05-01T10:00:00Z", "v0.3.0", "3"}), out)

	// An empty namespace says so; JSON gives an empty list.
	empty := newNamespace(t)
	out, _, err = tugboat("spoke", "list", "-n", empty)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("No spokes in namespace " + empty + ".\n"))
	out, _, err = tugboat("spoke", "list", "-n", empty, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(out)).To(Equal(`{
  "spokes": []
}`))
}

func TestSpoke_completesSpokeNamesFromTheHub(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reportedSpoke(t, ns, "staging-1", metav1.ConditionTrue, &t1, "v0.3.0", 1)
	reportedSpoke(t, ns, "staging-2", metav1.ConditionTrue, &t1, "v0.3.0", 1)
	reportedSpoke(t, ns, "prod-1", metav1.ConditionTrue, &t1, "v0.3.0", 1)

	// cobra's hidden __complete command is what the shell scripts call; the
	// word to complete comes last.
	complete := func(args ...string) (string, string, error) {
		root := app.NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"__complete", "--kubeconfig", cluster.KubeconfigPath}, args...))
		err := root.ExecuteContext(context.Background())
		return out.String(), "", err
	}
	out, _, err := complete("spoke", "remove", "-n", ns, "stag")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("staging-1\nstaging-2\n:4\n"))
	out, _, err = complete("spoke", "rotate-key", "-n", ns, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HavePrefix("prod-1\nstaging-1\nstaging-2\n:4\n"))
	out, _, err = complete("spoke", "remove", "-n", ns, "prod-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HavePrefix(":4\n"), "one name only")
}
