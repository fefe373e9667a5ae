package pipelineapi_test

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

// TestPipelineAPI_quotesALongMethodWithinItsLimit: the 405 answer quotes the
// request's method in at most 16 bytes, marker included, as valid UTF-8 (the
// handler's own clip once returned 16 bytes plus "...", 19 in all).
func TestPipelineAPI_quotesALongMethodWithinItsLimit(t *testing.T) {
	f := newFixture(t, "api-quote")
	g := NewWithT(t)
	method := strings.Repeat("PROPFIND", 5) // 40 bytes, a valid token
	rec := f.do(call{method: method, path: f.path("web", "promotions"), auth: bearer(webToken)})
	g.Expect(rec.Code).To(Equal(http.StatusMethodNotAllowed), rec.Body.String())
	msg := decode[wire.ErrorResponse](g, rec.Body.Bytes()).Error
	quoted, ok := strings.CutPrefix(msg, "method ")
	g.Expect(ok).To(BeTrue(), msg)
	quoted, _, ok = strings.Cut(quoted, " not allowed")
	g.Expect(ok).To(BeTrue(), msg)
	g.Expect(len(quoted)).To(BeNumerically("<=", 16), "quoted method %q", quoted)
	g.Expect(quoted).To(HavePrefix("PROPFIND"))
	g.Expect(quoted).To(HaveSuffix("…"), "a cut is marked")
	g.Expect(utf8.ValidString(quoted)).To(BeTrue())
}
