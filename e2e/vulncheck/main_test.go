package main

import (
	"bytes"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const (
	cfg      = `{"config":{"protocol_version":"v1.0.0","scanner_version":"v1.9.0","db":"file:///db","go_version":"go1.26.8"}}`
	osvStd   = `{"osv":{"id":"GO-2026-6613","summary":"Header smuggling in net/http"}}`
	osvMod   = `{"osv":{"id":"GO-2026-6865","summary":"Decompression bomb in klauspost/compress"}}`
	stdCall  = `{"finding":{"osv":"GO-2026-6613","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Do","receiver":"*Client"},{"module":"tugboat.dev/tugboat","package":"tugboat.dev/tugboat/webhook/receiver","function":"serve"}]}}`
	modCall  = `{"finding":{"osv":"GO-2026-6865","fixed_version":"v1.20.2","trace":[{"module":"github.com/klauspost/compress","version":"v1.19.2","package":"github.com/klauspost/compress/zstd","function":"Decode"},{"module":"tugboat.dev/tugboat","package":"tugboat.dev/tugboat/agent","function":"read"}]}}`
	modNoSym = `{"finding":{"osv":"GO-2026-6865","fixed_version":"v1.20.2","trace":[{"module":"github.com/klauspost/compress","version":"v1.19.2"}]}}`
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name, in, accept string
		err              string   // "" when it must pass
		out              []string // substrings of the report
	}{
		{"nothing found", cfg, "", "", []string{"0 vulnerabilities called"}},
		{"imported but not called", cfg + osvMod + modNoSym, "", "", []string{"0 vulnerabilities called"}},
		{"a module called", cfg + osvMod + modNoSym + modCall, "go1.26.8", "1 vulnerabilities are called by the code",
			[]string{"error  GO-2026-6865: Decompression bomb in klauspost/compress", "github.com/klauspost/compress@v1.19.2, fixed in v1.20.2",
				"tugboat.dev/tugboat/agent.read -> github.com/klauspost/compress/zstd.Decode"}},
		{"the standard library, accepted for this Go", cfg + osvStd + stdCall + stdCall, "go1.26.8", "",
			[]string{"warning  GO-2026-6613: Header smuggling in net/http", "net/http.Client.Do", "1 vulnerabilities called, 1 accepted"}},
		{"the standard library, accepted for another Go", cfg + osvStd + stdCall, "go1.26.7", "1 vulnerabilities are called", []string{"error  GO-2026-6613"}},
		{"the standard library, not accepted", cfg + osvStd + stdCall, "", "1 vulnerabilities are called", []string{"error  GO-2026-6613"}},
		{"no configuration", osvMod + modCall, "", "no govulncheck configuration in the input", nil},
		{"not JSON", "govulncheck: loading packages: ...", "", "reading govulncheck's JSON output", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var out bytes.Buffer
			err := run(strings.NewReader(tc.in), &out, tc.accept)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred(), out.String())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			}
			for _, s := range tc.out {
				g.Expect(out.String()).To(ContainSubstring(s))
			}
		})
	}
}
