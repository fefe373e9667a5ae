package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"tugboat.dev/tugboat/api/wire"
)

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("release: not found"), false},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewBadRequest("no"), false},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("etcd")), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{apierrors.NewForbidden(gr, "x", errors.New("RBAC not loaded yet")), true},
		{fmt.Errorf("reading: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, true},
	} {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("transient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// gate fronts the spoke's API server as it looks while it restarts: until
// opened, every request is answered 403 (the authorizer has not loaded RBAC
// yet), which client-go does not retry; then it proxies.
type gate struct {
	open atomic.Bool
	srv  *httptest.Server
	// only, when set, closes the paths with this prefix only.
	only string
}

func newGate(t *testing.T) *gate {
	g := &gate{}
	rt, err := rest.TransportFor(cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cluster.RESTConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = rt
	g.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.open.Load() && (g.only == "" || strings.HasPrefix(r.URL.Path, g.only)) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
				`"message":"secrets is forbidden: User \"system:serviceaccount:tugboat-system:tugboat-agent\" cannot list resource \"secrets\""}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// An action that arrives while the spoke's API server cannot be reached
// (restarting) waits for it, as nothing was changed yet, and then
// upgrades: it is not reported Failed (the chaos suite's staging API server
// restart right when the action arrived failed the promotion before).
func TestExecutor_waitsForAnAPIServerThatIsRestarting(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	gt := newGate(t)
	cfg := &rest.Config{Host: gt.srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	opts := testOptions(allowAll())
	opts.PendingWait = time.Minute
	e, err := NewExecutor(cfg, opts, testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())

	a := upgradeAction(ns, "web", "1.1.0")
	done := make(chan wire.ActionOutcome, 1)
	go func() {
		out, err := e.Execute(context.Background(), a)
		if err != nil {
			out.Message = err.Error()
		}
		done <- out
	}()
	g.Consistently(done).WithTimeout(2*time.Second).ShouldNot(Receive(), "it waits while the API server is away")
	gt.open.Store(true)
	var out wire.ActionOutcome
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(&out))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	rel := last(t, ns, "web")
	g.Expect(rel.Info.Status).To(Equal(release.StatusDeployed))
	g.Expect(rel.Chart.Metadata.Version).To(Equal("1.1.0"))
}

// An API server that restarts between the agent's read of the release and
// its upgrade answers the upgrade's OpenAPI download (Helm validates the
// manifest before it writes the new revision) with 403 until RBAC loads.
// Nothing was written, so the action waits and upgrades, rather than
// failing the promotion (the chaos suite: "error validating data: failed
// to download openapi: unknown" with the staging API server killed 1.7 s
// after the release).
func TestExecutor_waitsWhenTheUpgradesValidationCannotReachTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	gt := newGate(t)
	gt.only = "/openapi"
	cfg := &rest.Config{Host: gt.srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	opts := testOptions(allowAll())
	opts.PendingWait = time.Minute
	e, err := NewExecutor(cfg, opts, testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())

	done := make(chan wire.ActionOutcome, 1)
	go func() {
		out, err := e.Execute(context.Background(), upgradeAction(ns, "web", "1.1.0"))
		if err != nil {
			out.Message = err.Error()
		}
		done <- out
	}()
	g.Consistently(done).WithTimeout(2*time.Second).ShouldNot(Receive(), "it waits while the OpenAPI document cannot be read")
	g.Expect(last(t, ns, "web").Version).To(Equal(1), "nothing was written meanwhile")
	gt.open.Store(true)
	var out wire.ActionOutcome
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(&out))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	rel := last(t, ns, "web")
	g.Expect(rel.Version).To(Equal(2), "one upgrade, one revision")
	g.Expect(rel.Chart.Metadata.Version).To(Equal("1.1.0"))
}

// An API server that goes away right after Helm wrote the pending revision
// (the chaos suite: the staging kube-apiserver SIGKILLed 2 s after the
// release) leaves that revision pending-upgrade, since Helm can record
// neither success nor failure. Once the server answers again, the agent
// replaces its own interrupted revision and upgrades: the release ends
// deployed at the version, not stuck pending with the promotion failed.
func TestExecutor_redoesAnUpgradeTheAPIServerInterrupted(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "web", "1.0.0", nil)
	rt, err := rest.TransportFor(cluster.RESTConfig)
	g.Expect(err).NotTo(HaveOccurred())
	u, err := url.Parse(cluster.RESTConfig.Host)
	g.Expect(err).NotTo(HaveOccurred())
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = rt
	var closedUntil atomic.Int64
	var interrupted atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().UnixNano() < closedUntil.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503,"message":"the server is restarting"}`))
			return
		}
		proxy.ServeHTTP(w, r)
		// Once the pending revision is written, the server goes away
		// for two seconds (once).
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/secrets") && interrupted.CompareAndSwap(false, true) {
			closedUntil.Store(time.Now().Add(2 * time.Second).UnixNano())
		}
	}))
	defer srv.Close()
	opts := testOptions(allowAll())
	opts.PendingWait = time.Minute
	e, err := NewExecutor(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, opts, testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())

	out, err := e.Execute(context.Background(), upgradeAction(ns, "web", "1.1.0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(interrupted.Load()).To(BeTrue(), "the server went away mid-upgrade")
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	rel := last(t, ns, "web")
	g.Expect(rel.Info.Status).To(Equal(release.StatusDeployed))
	g.Expect(rel.Chart.Metadata.Version).To(Equal("1.1.0"))
}
