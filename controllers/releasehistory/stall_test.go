package releasehistory_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
	"tugboat.dev/tugboat/controllers/releasehistory"
)

// hangingAPIServer is the real API server behind a proxy that, while hang
// is set, reads requests and never answers them.
type hangingAPIServer struct {
	*httptest.Server
	hang atomic.Bool
}

func newHangingAPIServer(t *testing.T) *hangingAPIServer {
	t.Helper()
	target, err := url.Parse(hub.RESTConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(hub.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	h := &hangingAPIServer{}
	done := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.hang.Load() {
			select { // until the client gives up
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(done)
		h.Close()
	})
	return h
}

func gauge(g Gomega, name string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// Issue 13, bug 3: with the API server hung, a recorder's write returns
// within its deadline, the recorder reports itself stalled (/readyz and
// tugboat_history_stalled), and recovers once the API server answers.
func TestRecorder_hungAPIServerIsBoundedAndVisible(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp := newSpoke(t, g, "hung")
	api := newHangingAPIServer(t)

	// Clients as the hub builds them, through the proxy, with no
	// rest.Config.Timeout: the recorder's own deadline must bound them.
	cfg := &rest.Config{Host: api.URL}
	direct, err := client.New(cfg, client.Options{Scheme: manager.GetScheme(), Mapper: manager.GetRESTMapper()})
	g.Expect(err).NotTo(HaveOccurred())
	cached, err := client.New(cfg, client.Options{Scheme: manager.GetScheme(), Mapper: manager.GetRESTMapper(), Cache: &client.CacheOptions{Reader: manager.GetCache()}})
	g.Expect(err).NotTo(HaveOccurred())
	opts := releasehistory.NewOptions()
	opts.WriteInterval = 50 * time.Millisecond
	opts.APITimeout = time.Second
	rec := releasehistory.NewRecorder(cached, direct, opts)
	go func() { _ = rec.Start(ctx) }()
	g.Eventually(rec.Ready).WithTimeout(10 * time.Second).Should(Succeed())

	install := releaseState(1, "1.0.0", wire.StatusDeployed, wire.HealthCurrent)
	g.Expect(rec.RecordEvents(ctx, ingest.Spoke{Name: sp.Name}, []wire.Event{releaseEvent(sp.Name, install, 1, "Deployed")})).To(Succeed())
	g.Expect(gauge(g, "tugboat_history_stalled")).To(BeZero())

	api.hang.Store(true)
	upgrade := releaseState(2, "1.1.0", wire.StatusDeployed, wire.HealthCurrent)
	start := time.Now()
	err = rec.RecordEvents(ctx, ingest.Spoke{Name: sp.Name}, []wire.Event{releaseEvent(sp.Name, upgrade, 2, "Deployed")})
	g.Expect(err).To(MatchError(ContainSubstring("the API server did not answer within 1s")))
	g.Expect(time.Since(start)).To(BeNumerically("<", 15*time.Second), "bounded: one deadline per attempt")
	g.Expect(rec.Ready()).To(MatchError(releasehistory.ErrStalled))
	g.Expect(gauge(g, "tugboat_history_stalled")).To(Equal(1.0))
	g.Expect(getHistory(g, sp, "web").Status.Current.Revision).To(Equal(int32(1)), "nothing half-written")

	api.hang.Store(false)
	g.Eventually(rec.Ready).WithTimeout(15*time.Second).Should(Succeed(), "the probe sees the API server answer again")
	g.Expect(gauge(g, "tugboat_history_stalled")).To(BeZero())
	g.Expect(rec.RecordEvents(ctx, ingest.Spoke{Name: sp.Name}, []wire.Event{releaseEvent(sp.Name, upgrade, 2, "Deployed")})).To(Succeed())
	g.Expect(getHistory(g, sp, "web").Status.Current.Revision).To(Equal(int32(2)))
}
