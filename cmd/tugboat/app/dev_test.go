//go:build !agentonly

package app_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/cmd/tugboat/app"
)

// TestDevUp_badFlagsAreRefusedBeforeAnythingStarts runs `tugboat dev up`
// with bad flags: each is refused with a message naming it, and nothing is
// built, started or written (the directory is not even created).
func TestDevUp_badFlagsAreRefusedBeforeAnythingStarts(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"namespace not a DNS label", []string{"--namespace", "Tugboat_System"}, `--namespace "Tugboat_System" is not a valid namespace name`},
		{"port out of range", []string{"--port", "70000"}, "--port must be between 1 and 65535"},
		{"negative port", []string{"--port", "-1"}, "--port must be between 1 and 65535"},
		{"too many spokes", []string{"--spokes", "11"}, "--spokes must be between 1 and 10"},
		{"approval both ways", []string{"--approval", "--no-approval"}, "--approval and --no-approval contradict each other"},
		{"port not a number", []string{"--port", "http"}, `invalid argument "http" for "--port"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := filepath.Join(t.TempDir(), "env")
			cmd := app.NewRootCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"dev", "up", "--dir", dir}, tc.args...))
			err := cmd.ExecuteContext(context.Background())
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(dir).NotTo(BeADirectory())
			g.Expect(out.String()).NotTo(ContainSubstring("starting"))
		})
	}
}
