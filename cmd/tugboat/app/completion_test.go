//go:build !agentonly

package app_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// complete asks the CLI, as the shell scripts do (cobra's __complete), to
// complete the last of args, and returns the candidates and the directive
// line.
func complete(g Gomega, args ...string) ([]string, string) {
	out, _, err := run(append([]string{"__complete"}, args...)...)
	g.Expect(err).NotTo(HaveOccurred())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// Names are completed from the hub: Pipelines for status, promote and
// resume; Promotions that can still take a decision for approve and
// reject, unfinished ones for abort; Spokes for spoke remove and
// rotate-key; environments of the Pipeline for promote --to.
func TestCompletion_namesFromTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	web := newPipeline(t, ns, "web")
	newPipeline(t, ns, "api")
	waiting, err := request.Create(ctx, cluster.Client, web, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	running, err := request.Create(ctx, cluster.Client, web, "production", "1.5.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(g, running, tugboatv1alpha1.PromotionRunning)
	done, err := request.Create(ctx, cluster.Client, web, "production", "1.3.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(g, done, tugboatv1alpha1.PromotionSucceeded)
	deleteSpokesAtEnd(t, ns)
	for _, name := range []string{"staging-1", "dev-1"} {
		g.Expect(cluster.Client.Create(ctx, &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}}})).To(Succeed())
	}
	kc := []string{"--kubeconfig", cluster.KubeconfigPath, "-n", ns}
	with := func(args ...string) []string {
		return append(append([]string{}, args[:len(args)-1]...), append(kc, args[len(args)-1])...)
	}

	names, directive := complete(g, with("status", "")...)
	g.Expect(names).To(Equal([]string{"api", "web"}))
	g.Expect(directive).To(Equal(":4"), "no file completion")
	names, _ = complete(g, with("promote", "w")...)
	g.Expect(names).To(Equal([]string{"web"}))
	names, _ = complete(g, with("resume", "")...)
	g.Expect(names).To(Equal([]string{"api", "web"}))
	names, _ = complete(g, append(append([]string{"promote", "web"}, kc...), "--to", "")...)
	g.Expect(names).To(Equal([]string{"dev", "staging", "production"}))

	names, _ = complete(g, with("approve", "")...)
	g.Expect(names).To(Equal([]string{waiting.Name}))
	names, _ = complete(g, with("reject", "")...)
	g.Expect(names).To(Equal([]string{waiting.Name}))
	names, _ = complete(g, with("abort", "")...)
	g.Expect(names).To(Equal([]string{waiting.Name, running.Name}))

	names, _ = complete(g, with("spoke", "remove", "")...)
	g.Expect(names).To(Equal([]string{"dev-1", "staging-1"}))
	names, _ = complete(g, with("spoke", "rotate-key", "s")...)
	g.Expect(names).To(Equal([]string{"staging-1"}))

	names, _ = complete(g, "status", "-o", "")
	g.Expect(names).To(Equal([]string{"table", "wide", "json", "yaml"}))
	names, _ = complete(g, "completion", "")
	g.Expect(names).To(Equal([]string{"bash", "zsh", "fish", "powershell"}))

	// An unreachable hub completes nothing, with the error directive.
	names, directive = complete(g, "status", "--kubeconfig", "/nonexistent/kubeconfig", "")
	g.Expect(names).To(BeEmpty())
	g.Expect(directive).To(Equal(":1"))
}

func setPhase(g Gomega, pr *tugboatv1alpha1.Promotion, phase tugboatv1alpha1.PromotionPhase) {
	orig := pr.DeepCopy()
	pr.Status.Phase = phase
	g.ExpectWithOffset(1, cluster.Client.Status().Patch(context.Background(), pr, client.MergeFrom(orig))).To(Succeed())
}

// Every shell gets a script that calls back into tugboat for dynamic
// completion; an unknown shell is a usage error.
func TestCompletion_scripts(t *testing.T) {
	g := NewWithT(t)
	for shell, marker := range map[string]string{
		"bash":       "__start_tugboat",
		"zsh":        "#compdef tugboat",
		"fish":       "complete -c tugboat",
		"powershell": "Register-ArgumentCompleter",
	} {
		out, _, err := run("completion", shell)
		g.Expect(err).NotTo(HaveOccurred(), shell)
		g.Expect(out).To(ContainSubstring(marker), shell)
		g.Expect(out).To(ContainSubstring("__complete"), shell)
	}
	_, _, err := run("completion", "tcsh")
	g.Expect(err).To(MatchError(`unknown shell "tcsh": use bash, zsh, fish or powershell`))
	g.Expect(exitCode(err)).To(Equal(2))
}

// deleteSpokesAtEnd deletes the Spokes of ns when the test ends: spoke
// names are unique across the hub, and other tests of the package register
// spokes of the same names.
func deleteSpokesAtEnd(t *testing.T, ns string) {
	t.Helper()
	t.Cleanup(func() {
		if err := cluster.Client.DeleteAllOf(context.Background(), &tugboatv1alpha1.Spoke{}, client.InNamespace(ns)); err != nil {
			t.Error(err)
		}
	})
}
