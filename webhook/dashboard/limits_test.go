package dashboard_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/e2e/identity"
	"tugboat.dev/tugboat/webhook/dashboard"
)

// countingReader counts the Lists and Gets that reach it.
type countingReader struct {
	client.Reader
	calls atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.calls.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.calls.Add(1)
	return r.Reader.List(ctx, list, opts...)
}

// TestDashboard_readsThroughItsReaderAndCapsItsStreams: the hub's read-only
// dashboard serves its pages from the Reader it is given (the hub's cache,
// so a GET costs the API server nothing), and it holds at most MaxStreams
// live event streams, answering 503 with Retry-After past them (security
// review 3, low 5: an anonymous GET made uncached LISTs, and /events had
// no cap).
func TestDashboard_readsThroughItsReaderAndCapsItsStreams(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	grantView(t, ns, "viewer")
	reader := &countingReader{Reader: hub.Client}
	s, err := dashboard.New(identity.Config(hub.RESTConfig, "viewer"), hub.Client.Scheme(),
		dashboard.Options{Namespace: ns, ReadOnly: true, Reader: reader, MaxStreams: 1})
	g.Expect(err).NotTo(HaveOccurred())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	srv.Start()
	defer srv.Close()

	for _, page := range []string{"/", "/fleet"} {
		resp, err := http.Get(srv.URL + page)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), page)
	}
	g.Expect(reader.calls.Load()).To(BeNumerically(">=", 2), "the pages were read through the Reader")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	first, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer first.Body.Close()
	g.Expect(first.StatusCode).To(Equal(http.StatusOK))

	second, err := http.Get(srv.URL + "/events")
	g.Expect(err).NotTo(HaveOccurred())
	second.Body.Close()
	g.Expect(second.StatusCode).To(Equal(http.StatusServiceUnavailable))
	g.Expect(second.Header.Get("Retry-After")).To(Equal("10"))

	// Once the first stream ends, its slot is free again.
	cancel()
	first.Body.Close()
	g.Eventually(func() int {
		sctx, scancel := context.WithCancel(context.Background())
		defer scancel()
		r, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/events", nil)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}).WithTimeout(10 * time.Second).Should(Equal(http.StatusOK))
}
