package reporter

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestErrorDetail(t *testing.T) {
	g := NewWithT(t)
	msg, fields := errorDetail([]byte(`{"error":"invalid body: events[0].release: required","fields":[{"field":"events[0].release","detail":"required"}]}`))
	g.Expect(msg).To(ContainSubstring("events[0].release"))
	g.Expect(fields).To(HaveLen(1))
	msg, fields = errorDetail([]byte("  plain text  \n"))
	g.Expect(msg).To(Equal("plain text"))
	g.Expect(fields).To(BeNil())
}
