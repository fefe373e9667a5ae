package notification_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
	"tugboat.dev/tugboat/controllers/promotion/strategy/notification"
)

// alertKinds are the kinds an Alert's eventSources may name: the enum of
// notification-controller/api v1.9.4 (v1.CrossNamespaceObjectReference.Kind).
var alertKinds = []string{
	"Bucket", "GitRepository", "Kustomization", "HelmRelease", "HelmChart", "HelmRepository",
	"ImageRepository", "ImagePolicy", "ImageUpdateAutomation", "OCIRepository", "ArtifactGenerator", "ExternalArtifact",
}

// eventServer stands in for notification-controller's event endpoint. It
// decodes the body as notification-controller does (400 when it cannot),
// checks what the Event API marks required (and the severity enum and the
// message length), filters the metadata as notification-controller does
// (only keys prefixed with the involved object's group, prefix stripped,
// checksum and digest dropped; the token is used for rate limiting, then
// dropped) and rate-limits repeats by involved object, message, revision and
// token with 429. It answers 202 to what it accepts, and routes it as
// notification-controller does: to the Alert whose eventSources select its
// involved object's kind (one of alertKinds), namespace and name.
type eventServer struct {
	mu       sync.Mutex
	seen     map[string]bool
	accepted []eventv1.Event // metadata as notifiers would see it
	routed   []eventv1.Event // what the Alert received
	raw      []string
	invalid  []string
	// sources are the Alert's eventSources, as kind/namespace/name (name
	// may be *).
	sources []string
}

func newEventServer(sources ...string) *eventServer {
	return &eventServer{seen: map[string]bool{}, sources: sources}
}

func (s *eventServer) routes(e eventv1.Event) bool {
	o := e.InvolvedObject
	for _, src := range s.sources {
		if src == o.Kind+"/"+o.Namespace+"/"+o.Name || src == o.Kind+"/"+o.Namespace+"/*" {
			return true
		}
	}
	return false
}

func (s *eventServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw = append(s.raw, string(body))
	var e eventv1.Event
	if err := json.Unmarshal(body, &e); err != nil {
		s.invalid = append(s.invalid, err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if problems := validate(e); len(problems) > 0 {
		s.invalid = append(s.invalid, problems...)
		http.Error(w, strings.Join(problems, "; "), http.StatusBadRequest)
		return
	}
	gv, _ := schema.ParseGroupVersion(e.InvolvedObject.APIVersion)
	meta := map[string]string{}
	for k, v := range e.Metadata {
		if strings.HasPrefix(k, gv.Group) && k != gv.Group+"/checksum" && k != gv.Group+"/digest" {
			meta[strings.TrimPrefix(k, gv.Group+"/")] = v
		}
	}
	e.Metadata = meta
	comps := []string{"event", e.InvolvedObject.Name, e.InvolvedObject.Namespace, e.InvolvedObject.Kind, e.Message}
	for _, k := range []string{"revision", "token"} {
		if v, ok := meta[k]; ok {
			comps = append(comps, v)
		}
	}
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join(comps, "/"))))
	if s.seen[key] {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.seen[key] = true
	delete(e.Metadata, "token")
	s.accepted = append(s.accepted, e)
	if s.routes(e) {
		s.routed = append(s.routed, e)
	}
	w.WriteHeader(http.StatusAccepted)
}

func validate(e eventv1.Event) []string {
	var p []string
	o := e.InvolvedObject
	if o.Kind == "" || o.Name == "" || o.Namespace == "" || o.APIVersion == "" {
		p = append(p, "involvedObject needs kind, name, namespace and apiVersion")
	}
	if _, err := schema.ParseGroupVersion(o.APIVersion); err != nil {
		p = append(p, "involvedObject.apiVersion is invalid")
	}
	if !slices.Contains(alertKinds, o.Kind) {
		p = append(p, fmt.Sprintf("involvedObject.kind %q is no kind an Alert can select: no Alert would ever receive it", o.Kind))
	}
	switch e.Severity {
	case "trace", "info", "error":
	default:
		p = append(p, fmt.Sprintf("severity %q is not trace, info or error", e.Severity))
	}
	if e.Timestamp.IsZero() {
		p = append(p, "timestamp is required")
	}
	if e.Message == "" || len(e.Message) > 39000 {
		p = append(p, "message is required, at most 39000 characters")
	}
	if e.Reason == "" {
		p = append(p, "reason is required")
	}
	if e.ReportingController == "" {
		p = append(p, "reportingController is required")
	}
	return p
}

func request(address string) strategy.Request {
	return strategy.Request{
		Promotion: &tugboatv1alpha1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-production-1-4-0", UID: "prom-uid"},
			Spec:       tugboatv1alpha1.PromotionSpec{Pipeline: "web", From: "staging", To: "production", Version: "1.4.0"},
		},
		Pipeline: &tugboatv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "pipe-uid"}},
		// Two targets share a HelmRelease name and namespace (two spokes),
		// one names its own.
		Targets: []strategy.Target{
			{SpokeName: "prod-eu", Namespace: "web", Release: "web"},
			{SpokeName: "prod-us", Namespace: "web", Release: "web"},
			{SpokeName: "prod-ap", Namespace: "web", Release: "web", HelmRelease: &tugboatv1alpha1.ObjectReference{Namespace: "flux-apps", Name: "web-ap"}},
		},
		Version: "1.4.0",
		Strategy: tugboatv1alpha1.PromotionStrategy{
			Type:         tugboatv1alpha1.StrategyNotification,
			Notification: &tugboatv1alpha1.NotificationStrategy{Address: address},
		},
	}
}

func newStrategy(defaultAddress string) *notification.Strategy {
	return notification.New(notification.Options{DefaultAddress: defaultAddress})
}

func TestNotification_sendsFluxEventsAboutTheTargetsHelmReleases(t *testing.T) {
	g := NewWithT(t)
	// The Alert a user writes for the promotions into production.
	es := newEventServer("HelmRelease/web/web", "HelmRelease/flux-apps/*")
	srv := httptest.NewServer(es)
	defer srv.Close()

	res, err := newStrategy("").Promote(context.Background(), request(srv.URL+"/"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(Equal(`sent Flux event "promote 1.4.0 to production" about HelmRelease web/web, HelmRelease flux-apps/web-ap to ` + srv.URL + `/`))
	g.Expect(es.invalid).To(BeEmpty())
	g.Expect(es.raw).To(HaveLen(2), "one event per distinct HelmRelease")
	g.Expect(es.routed).To(HaveLen(2), "the Alert receives both")
	// The recorder stamps the time and the instance (the host name).
	var sent map[string]any
	g.Expect(json.Unmarshal([]byte(es.raw[0]), &sent)).To(Succeed())
	ts, err := time.Parse(time.RFC3339, sent["timestamp"].(string))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ts).To(BeTemporally("~", time.Now(), time.Minute))
	host, _ := os.Hostname()
	g.Expect(sent["reportingInstance"]).To(Equal(host))
	delete(sent, "timestamp")
	delete(sent, "reportingInstance")
	raw, _ := json.Marshal(sent)
	g.Expect(string(raw)).To(MatchJSON(`{
		"involvedObject": {"kind": "HelmRelease", "namespace": "web", "name": "web", "apiVersion": "helm.toolkit.fluxcd.io/v2"},
		"severity": "info",
		"message": "promote 1.4.0 to production",
		"reason": "Promote",
		"metadata": {
			"helm.toolkit.fluxcd.io/environment": "production",
			"helm.toolkit.fluxcd.io/version": "1.4.0",
			"helm.toolkit.fluxcd.io/promotion": "web-production-1-4-0",
			"helm.toolkit.fluxcd.io/pipeline": "apps/web",
			"helm.toolkit.fluxcd.io/from": "staging",
			"helm.toolkit.fluxcd.io/targets": "prod-eu/web/web,prod-us/web/web",
			"helm.toolkit.fluxcd.io/revision": "1.4.0",
			"helm.toolkit.fluxcd.io/token": "prom-uid"
		},
		"reportingController": "tugboat"
	}`))
	// What notifiers see once notification-controller filtered the metadata.
	g.Expect(es.routed[1].InvolvedObject.Name).To(Equal("web-ap"))
	g.Expect(es.routed[1].Metadata).To(Equal(map[string]string{
		"environment": "production", "version": "1.4.0", "promotion": "web-production-1-4-0",
		"pipeline": "apps/web", "from": "staging", "revision": "1.4.0", "targets": "prod-ap/web/web",
	}))
}

// Without targets, the event is about a HelmRelease named like the
// Pipeline's release, in its namespace.
func TestNotification_withoutTargets(t *testing.T) {
	g := NewWithT(t)
	req := request("")
	req.Targets = nil
	req.Pipeline.Spec.Release = "frontend"
	events := notification.NewEvents(req)
	g.Expect(events).To(HaveLen(1))
	g.Expect(events[0].InvolvedObject.Kind).To(Equal("HelmRelease"))
	g.Expect(events[0].InvolvedObject.Namespace + "/" + events[0].InvolvedObject.Name).To(Equal("apps/frontend"))
	g.Expect(events[0].Metadata).NotTo(HaveKey("helm.toolkit.fluxcd.io/targets"))
}

func TestNotification_repeatIsAlreadyDelivered(t *testing.T) {
	g := NewWithT(t)
	es := newEventServer()
	srv := httptest.NewServer(es)
	defer srv.Close()
	s := newStrategy(srv.URL)

	_, err := s.Promote(context.Background(), request(""))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := s.Promote(context.Background(), request(""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(ContainSubstring("already delivered"))
	g.Expect(es.accepted).To(HaveLen(2), "the default address is used, and the repeat is not notified twice")

	// Another Promotion of the same version is a new event.
	other := request("")
	other.Promotion.UID = "other-uid"
	_, err = s.Promote(context.Background(), other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es.accepted).To(HaveLen(4))
}

func TestNotification_errors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "upstream connect error")
	}))
	defer srv.Close()
	s := newStrategy("")

	_, err := s.Promote(ctx, request(srv.URL))
	g.Expect(err).To(MatchError(ContainSubstring("answered 503 Service Unavailable: upstream connect error")))
	g.Expect(strategy.IsTerminal(err)).To(BeFalse())

	status = http.StatusBadRequest
	_, err = s.Promote(ctx, request(srv.URL))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())
	_, err = s.Promote(ctx, request("http://"+addr+"/"))
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	g.Expect(strategy.IsTerminal(err)).To(BeFalse())

	_, err = s.Promote(ctx, request("notification-controller:80"))
	g.Expect(strategy.IsTerminal(err)).To(BeTrue())
}

func TestNotification_defaultAddress(t *testing.T) {
	g := NewWithT(t)
	g.Expect(notification.DefaultAddress).To(Equal("http://notification-controller.flux-system.svc.cluster.local./"))
	e := notification.NewEvents(request(""))[0]
	g.Expect(e.Severity).To(Equal("info"))
	g.Expect(e.Reason).To(Equal("Promote"))
}

// A retry after a partial failure resends every event; notification-
// controller's rate limit keeps the one already delivered from being
// dispatched twice.
func TestNotification_retryAfterAPartialFailure(t *testing.T) {
	g := NewWithT(t)
	es := newEventServer("HelmRelease/web/*", "HelmRelease/flux-apps/*")
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		es.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s := newStrategy(srv.URL)

	_, err := s.Promote(context.Background(), request(""))
	g.Expect(err).To(MatchError(ContainSubstring("503")))
	g.Expect(strategy.IsTerminal(err)).To(BeFalse())
	g.Expect(es.routed).To(HaveLen(1))
	res, err := s.Promote(context.Background(), request(""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Message).To(HaveSuffix("(1 already delivered)"))
	g.Expect(es.routed).To(HaveLen(2), "each HelmRelease's event dispatched once")
}
