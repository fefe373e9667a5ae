package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	. "github.com/onsi/gomega"
)

// TestMain lets the test binary act as tugboat: with TUGBOAT_RUN_MAIN set
// it runs main with the arguments after "--".
func TestMain(m *testing.M) {
	if os.Getenv("TUGBOAT_RUN_MAIN") == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"tugboat"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The process exits with the documented code for each kind of failure,
// and says what failed on stderr.
func TestMain_exitCodes(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"version"}, 0, ""},
		{[]string{"nonsense"}, 2, "tugboat: unknown command \"nonsense\" for \"tugboat\"\n"},
		{[]string{"status", "-o", "csv"}, 2, "tugboat: unknown output format \"csv\": use table, wide, json or yaml\n"},
		{[]string{"abort"}, 2, "tugboat: accepts 1 arg(s), received 0\n"},
		{[]string{"status", "--kubeconfig", "/nonexistent/kubeconfig"}, 1, ""},
	} {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "TUGBOAT_RUN_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if exit, ok := errors.AsType[*exec.ExitError](err); ok {
			code = exit.ExitCode()
		} else {
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(code).To(Equal(tc.code), "%v: %s", tc.args, stderr.String())
		if tc.stderr != "" {
			g.Expect(stderr.String()).To(Equal(tc.stderr), "%v", tc.args)
		}
	}
}
