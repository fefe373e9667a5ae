package flux_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/notify/flux"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
)

// alertKinds are the kinds an Alert's eventSources may name: the enum of
// notification-controller/api v1.9.4 (v1.CrossNamespaceObjectReference.Kind).
var alertKinds = []string{
	"Bucket", "GitRepository", "Kustomization", "HelmRelease", "HelmChart", "HelmRepository",
	"ImageRepository", "ImagePolicy", "ImageUpdateAutomation", "OCIRepository", "ArtifactGenerator", "ExternalArtifact",
}

// eventServer stands in for notification-controller's event endpoint. It
// decodes the body into eventv1.Event (400 when it cannot), checks what the
// Event API requires, filters the metadata as notification-controller does
// (only keys prefixed with the involved object's API group or the event
// group are kept; checksum and digest dropped), rate-limits repeats (same
// object, message, revision and token) with 429, and routes what it accepts
// to the Alerts, matching eventSources (kind, name or "*", namespace),
// severity and inclusion list as notification-controller does. It answers
// 202 to what it accepts, routed or not.
type eventServer struct {
	alerts []notifyv1beta3.Alert

	mu         sync.Mutex
	status     []int // forced answers, in order
	seen       map[string]bool
	accepted   []eventv1.Event
	dispatched map[string][]eventv1.Event // by Alert name
	dropped    []string                   // metadata keys notification-controller would drop
	invalid    []string
}

func newEventServer(alerts ...notifyv1beta3.Alert) *eventServer {
	return &eventServer{alerts: alerts, seen: map[string]bool{}, dispatched: map[string][]eventv1.Event{}}
}

func (s *eventServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.status) > 0 {
		code := s.status[0]
		s.status = s.status[1:]
		http.Error(w, "forced\x00 answer", code)
		return
	}
	var e eventv1.Event
	if err := json.Unmarshal(body, &e); err != nil {
		s.invalid = append(s.invalid, err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if p := s.validate(e); len(p) > 0 {
		s.invalid = append(s.invalid, p...)
		http.Error(w, strings.Join(p, "; "), http.StatusBadRequest)
		return
	}
	// cleanupMetadata
	group := e.InvolvedObject.GroupVersionKind().Group
	meta := map[string]string{}
	for k, v := range e.Metadata {
		if (strings.HasPrefix(k, group+"/") || strings.HasPrefix(k, eventv1.Group+"/")) &&
			k != group+"/"+eventv1.MetaChecksumKey && k != group+"/"+eventv1.MetaDigestKey {
			meta[k] = v
		} else {
			s.dropped = append(s.dropped, k)
		}
	}
	e.Metadata = meta
	// The rate limiter's key.
	comps := []string{"event", e.InvolvedObject.Name, e.InvolvedObject.Namespace, e.InvolvedObject.Kind, e.Message}
	for _, k := range []string{eventv1.MetaRevisionKey, eventv1.MetaTokenKey} {
		if v, ok := meta[group+"/"+k]; ok {
			comps = append(comps, k+"="+v)
		}
	}
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join(comps, "/"))))
	if s.seen[key] {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.seen[key] = true
	s.accepted = append(s.accepted, e)
	for _, a := range s.alerts {
		if matches(a, e) {
			s.dispatched[a.Name] = append(s.dispatched[a.Name], e)
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

func (s *eventServer) validate(e eventv1.Event) []string {
	var p []string
	o := e.InvolvedObject
	if o.Kind == "" || o.Name == "" || o.Namespace == "" || o.APIVersion == "" {
		p = append(p, "involvedObject needs kind, name, namespace and apiVersion")
	}
	if !slices.Contains(alertKinds, o.Kind) {
		p = append(p, fmt.Sprintf("involvedObject kind %q cannot be selected by an Alert", o.Kind))
	}
	if _, err := schema.ParseGroupVersion(o.APIVersion); err != nil {
		p = append(p, "involvedObject.apiVersion is invalid")
	}
	if e.Severity != eventv1.EventSeverityInfo && e.Severity != eventv1.EventSeverityError {
		p = append(p, fmt.Sprintf("severity %q is not info or error", e.Severity))
	}
	if e.Timestamp.IsZero() {
		p = append(p, "timestamp is required")
	}
	if e.Message == "" || len([]rune(e.Message)) > 39000 {
		p = append(p, "message is required, at most 39000 characters")
	}
	if e.Reason == "" {
		p = append(p, "reason is required")
	}
	if e.ReportingController != flux.ReportingController {
		p = append(p, fmt.Sprintf("reportingController is %q", e.ReportingController))
	}
	return p
}

// matches is notification-controller's routing of an event to an Alert.
func matches(a notifyv1beta3.Alert, e eventv1.Event) bool {
	if a.Spec.Suspend {
		return false
	}
	if len(a.Spec.InclusionList) > 0 {
		included := false
		for _, exp := range a.Spec.InclusionList {
			if regexp.MustCompile(exp).MatchString(e.Message) {
				included = true
			}
		}
		if !included {
			return false
		}
	}
	for _, exp := range a.Spec.ExclusionList {
		if regexp.MustCompile(exp).MatchString(e.Message) {
			return false
		}
	}
	for _, src := range a.Spec.EventSources {
		ns := src.Namespace
		if ns == "" {
			ns = a.Namespace
		}
		if e.InvolvedObject.Namespace == ns && e.InvolvedObject.Kind == src.Kind &&
			(src.Name == "*" || src.Name == e.InvolvedObject.Name) &&
			(a.Spec.EventSeverity == eventv1.EventSeverityInfo || a.Spec.EventSeverity == e.Severity) {
			return true
		}
	}
	return false
}

// docsAlert is the Alert docs/notifiers.md documents.
func docsAlert(t *testing.T) notifyv1beta3.Alert {
	t.Helper()
	b, err := os.ReadFile("../../../docs/notifiers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- flux-alert")
	if !ok {
		t.Fatal("docs/notifiers.md has no flux-alert marker")
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	doc, _, _ := strings.Cut(rest, "```")
	var a notifyv1beta3.Alert
	if err := yaml.UnmarshalStrict([]byte(doc), &a); err != nil {
		t.Fatalf("the documented Alert: %v", err)
	}
	if a.Kind != "Alert" || a.APIVersion != "notification.toolkit.fluxcd.io/v1beta3" {
		t.Fatalf("the documented Alert is a %s %s", a.APIVersion, a.Kind)
	}
	for _, s := range a.Spec.EventSources {
		if !slices.Contains(alertKinds, s.Kind) {
			t.Fatalf("the documented Alert selects kind %q, not in the enum", s.Kind)
		}
	}
	return a
}

func errorsOnly(a notifyv1beta3.Alert) notifyv1beta3.Alert {
	a = *a.DeepCopy()
	a.Name += "-errors"
	a.Spec.EventSeverity = eventv1.EventSeverityError
	return a
}

func start(t *testing.T, es *eventServer) *flux.Notifier {
	t.Helper()
	srv := httptest.NewServer(es)
	t.Cleanup(srv.Close)
	f, err := flux.New(flux.Options{Address: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFlux_promotionIsRoutedByTheDocumentedAlert(t *testing.T) {
	g := NewWithT(t)
	alert := docsAlert(t)
	es := newEventServer(alert, errorsOnly(alert))
	f := start(t, es)

	n := notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded)
	_, err := f.Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es.invalid).To(BeEmpty())
	g.Expect(es.dropped).To(BeEmpty(), "every metadata key survives notification-controller's filter")

	// One event per HelmRelease: the Flux one named in the Pipeline, and
	// the plain Helm release as a HelmRelease of its name.
	g.Expect(es.accepted).To(HaveLen(2))
	g.Expect(es.dispatched["tugboat-web"]).To(HaveLen(2), "the documented Alert selects both")
	g.Expect(es.dispatched["tugboat-web-errors"]).To(BeEmpty())

	eu, us := es.accepted[0], es.accepted[1]
	g.Expect(eu.InvolvedObject.APIVersion).To(Equal("helm.toolkit.fluxcd.io/v2"))
	g.Expect(eu.InvolvedObject.Kind).To(Equal("HelmRelease"))
	g.Expect(eu.InvolvedObject.Namespace + "/" + eu.InvolvedObject.Name).To(Equal("apps/web-prod-eu"))
	g.Expect(us.InvolvedObject.Namespace + "/" + us.InvolvedObject.Name).To(Equal("apps/web"))
	g.Expect(eu.Severity).To(Equal("info"))
	g.Expect(eu.Reason).To(Equal("PromotionSucceeded"))
	g.Expect(eu.ReportingController).To(Equal("tugboat-hub"))
	g.Expect(eu.Message).To(HavePrefix("web 1.4.0 → production: Succeeded\n"))
	for _, s := range n.Timeline {
		g.Expect(eu.Message).To(ContainSubstring(s.Text))
	}
	g.Expect(eu.Metadata).To(Equal(map[string]string{
		"helm.toolkit.fluxcd.io/revision":    "1.4.0",
		"helm.toolkit.fluxcd.io/token":       notify.ID(n),
		"helm.toolkit.fluxcd.io/event":       "PromotionSucceeded",
		"helm.toolkit.fluxcd.io/pipeline":    "apps/web",
		"helm.toolkit.fluxcd.io/promotion":   "web-production-1.4.0",
		"helm.toolkit.fluxcd.io/from":        "staging",
		"helm.toolkit.fluxcd.io/environment": "production",
		"helm.toolkit.fluxcd.io/phase":       "Succeeded",
		"helm.toolkit.fluxcd.io/url":         "https://git.example.com/org/fleet/pulls/42",
		"helm.toolkit.fluxcd.io/approvedBy":  "U024BE7LH",
		"helm.toolkit.fluxcd.io/targets":     "prod-eu/apps/web",
	}))
	g.Expect(us.Metadata).To(HaveKeyWithValue("helm.toolkit.fluxcd.io/targets", "prod-us/apps/web"))

	// A redelivery is answered 429 (a repeat) and counts as delivered,
	// without a second dispatch.
	_, err = f.Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es.accepted).To(HaveLen(2))
}

func TestFlux_failureIsAnError(t *testing.T) {
	g := NewWithT(t)
	alert := docsAlert(t)
	es := newEventServer(alert, errorsOnly(alert))
	f := start(t, es)

	_, err := f.Notify(context.Background(), notifytest.Deployment(tugboatv1alpha1.EventDeploymentFailed), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es.invalid).To(BeEmpty())
	g.Expect(es.accepted).To(HaveLen(1))
	e := es.accepted[0]
	g.Expect(e.Severity).To(Equal("error"))
	g.Expect(e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name).To(Equal("apps/web"))
	g.Expect(e.Metadata).To(HaveKeyWithValue("helm.toolkit.fluxcd.io/revision", "1.4.0"))
	g.Expect(e.Metadata).To(HaveKeyWithValue("helm.toolkit.fluxcd.io/health", "Failed"))
	g.Expect(es.dispatched["tugboat-web-errors"]).To(HaveLen(1))
	g.Expect(es.dispatched["tugboat-web"]).To(HaveLen(1))
}

func TestFlux_holdWithoutTargets(t *testing.T) {
	g := NewWithT(t)
	es := newEventServer(docsAlert(t))
	f := start(t, es)
	n := notify.Notice{
		Event: tugboatv1alpha1.EventHoldStarted, Time: notifytest.Now, Namespace: "apps", Pipeline: "web", Release: "web",
		Hold: &notify.Hold{Environment: "production", Version: "1.3.0", Message: "rolled back by helm rollback", Since: notifytest.Now},
	}
	_, err := f.Notify(context.Background(), n, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es.invalid).To(BeEmpty())
	g.Expect(es.dispatched["tugboat-web"]).To(HaveLen(1))
	g.Expect(es.accepted[0].Message).To(HavePrefix("web: production held at 1.3.0"))
}

func TestFlux_answers(t *testing.T) {
	ctx := context.Background()
	n := notifytest.Deployment(tugboatv1alpha1.EventDeploymentHealthy)
	for _, tc := range []struct {
		status    int
		permanent bool
	}{
		{http.StatusServiceUnavailable, false},
		{http.StatusRequestTimeout, false},
		{http.StatusBadRequest, true},
		{http.StatusUnauthorized, true},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			g := NewWithT(t)
			es := newEventServer()
			es.status = []int{tc.status}
			f := start(t, es)
			_, err := f.Notify(ctx, n, "")
			g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("answered %d %s: forced answer", tc.status, http.StatusText(tc.status)))))
			g.Expect(notify.IsPermanent(err)).To(Equal(tc.permanent))

			_, err = f.Notify(ctx, n, "")
			g.Expect(err).NotTo(HaveOccurred(), "the next attempt is accepted")
			g.Expect(es.accepted).To(HaveLen(1))
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		g := NewWithT(t)
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := srv.URL
		srv.Close()
		f, err := flux.New(flux.Options{Address: addr + "/?token=s3cr3t"})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = f.Notify(ctx, n, "")
		g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
		g.Expect(notify.IsPermanent(err)).To(BeFalse())
		g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
	})

	t.Run("canceled", func(t *testing.T) {
		g := NewWithT(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		defer srv.Close()
		f, err := flux.New(flux.Options{Address: srv.URL})
		g.Expect(err).NotTo(HaveOccurred())
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = f.Notify(cctx, n, "")
		g.Expect(err).To(MatchError(context.Canceled), "the caller's context bounds the post")
	})

	t.Run("bad address", func(t *testing.T) {
		g := NewWithT(t)
		_, err := flux.New(flux.Options{Address: "notification-controller:80"})
		g.Expect(notify.IsPermanent(err)).To(BeTrue())
	})
}
