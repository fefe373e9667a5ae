package bins

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestBuildLog_countsPackagesAndKeepsTheCompilersMessages feeds buildLog
// what go build -v writes, split at odd places: package names are counted,
// not kept; the compiler's messages are kept for a failed build.
func TestBuildLog_countsPackagesAndKeepsTheCompilersMessages(t *testing.T) {
	g := NewWithT(t)
	b := &buildLog{}
	for _, chunk := range []string{
		"go: downloading k8s.io/api v0.36.3\n",
		"internal/goarch\nk8s.io/apimachinery/pkg/ru",
		"ntime\n# k8s.io/kubernetes/cmd/kube-apiserver\n",
		"cmd/kube-apiserver/main.go:12:3: undefined: app\n",
		"sigs.k8s.io/kwok/cmd/kwok\n",
	} {
		n, err := b.Write([]byte(chunk))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(len(chunk)))
	}
	g.Expect(b.packages()).To(Equal(3))
	g.Expect(b.String()).To(Equal("go: downloading k8s.io/api v0.36.3\n" +
		"# k8s.io/kubernetes/cmd/kube-apiserver\n" +
		"cmd/kube-apiserver/main.go:12:3: undefined: app\n"))
}
