package app_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentOnlyBuild checks that the agent's binary (go build -tags
// agentonly ./cmd/tugboat, see the Makefile) links the agent but none of the
// hub, its promotion strategies' clients or the dev environment: every page
// of them it mapped would count in the agent's resident memory
// (docs/benchmarks.md).
func TestAgentOnlyBuild(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "agentonly", "-deps", "tugboat.dev/tugboat/cmd/tugboat").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	if !deps["tugboat.dev/tugboat/agent"] {
		t.Error("the agent-only build does not link tugboat.dev/tugboat/agent")
	}
	banned := []string{
		"tugboat.dev/tugboat/controllers/", "tugboat.dev/tugboat/e2e/",
		"github.com/go-git/", "github.com/google/go-github/", "gitlab.com/gitlab-org/", "code.gitea.io/",
	}
	for p := range deps {
		for _, b := range banned {
			if strings.HasPrefix(p, b) {
				t.Errorf("the agent-only build links %s", p)
			}
		}
	}
}
