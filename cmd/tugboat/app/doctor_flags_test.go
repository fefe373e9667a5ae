//go:build !agentonly

package app_test

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestDoctor_rejectsBadFlags: every doctor flag refuses a value it cannot
// use, with a message that names the flag, before reaching the hub.
func TestDoctor_rejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown fail-on", []string{"--fail-on", "fatal"}, `invalid argument "fatal" for "--fail-on" flag: unknown severity "fatal": use error or warning`},
		{"fail-on ok", []string{"--fail-on", "ok"}, `unknown severity "ok": use error or warning`},
		{"zero stale-after", []string{"--stale-after", "0s"}, "--stale-after must be positive"},
		{"negative approval-age", []string{"--approval-age", "-1h"}, "--approval-age must be positive"},
		{"negative failures", []string{"--failures", "-1"}, "--failures must not be negative"},
		{"negative reconcile-grace", []string{"--reconcile-grace", "-1s"}, "--reconcile-grace must not be negative"},
		{"unknown output", []string{"-o", "xml"}, `unknown output format "xml": use table, wide, json or yaml`},
		{"an argument", []string{"fleet"}, `unknown command "fleet" for "tugboat doctor"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, _, err := tugboat(append([]string{"doctor"}, tc.args...)...)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(out).NotTo(ContainSubstring("Checking tugboat"), "doctor ran despite a bad flag")
		})
	}
}

// TestDoctor_yamlNamesEachFindingsCode: -o yaml carries the same fields as
// -o json, code included; the table leaves codes out, -o wide adds them.
func TestDoctor_yamlNamesEachFindingsCode(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	out, _, err := tugboat("doctor", "-n", ns, "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("- check: hub\n  code: hub-no-spokes\n  severity: warning\n"))
	out, _, err = tugboat("doctor", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "warning", "hub", "no", "Spokes")).NotTo(BeNil(), out)
	g.Expect(out).NotTo(ContainSubstring("hub-no-spokes"))
	out, _, err = tugboat("doctor", "-n", ns, "-o", "wide")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "STATUS", "CHECK", "CODE", "OBJECT", "FINDING")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, "warning", "hub", "hub-no-spokes", "-", "no", "Spokes")).NotTo(BeNil(), out)
}
