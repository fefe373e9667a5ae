package e2e_test

// The observers of BenchmarkPromotion_endToEnd: a reverse proxy in front of
// the hub's receiver that sees the agents' requests and the hub's answers,
// and watches on the three API servers. Each records when it saw a stage of
// a release's promotion, on the test process's clock (the machine's), from
// what the real components sent or stored: nothing here is written by the
// benchmark itself.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/e2e/harness"
)

// stage is one observed step of a promotion, after the source Deployment
// became fully available.
type stage int

const (
	// stageHealth: the dev agent's health transition to Current, at the
	// time the agent stamped on its HealthChanged event.
	stageHealth stage = iota
	// stageReport: the batch carrying that event reaches the hub's receiver
	// (the proxy in front of it).
	stageReport
	// stagePersisted: a watch of the hub delivers the ReleaseHistory
	// holding the revision, Current.
	stagePersisted
	// stagePromotion: a watch of the hub delivers the Promotion's ADDED.
	stagePromotion
	// stageAction: the hub answers the staging agent's poll with the
	// action (the proxy receives the answer).
	stageAction
	// stagePending: a watch of staging delivers the ADDED of the pending
	// release Secret the agent's Helm upgrade writes.
	stagePending
	numStages
)

var stageNames = [numStages]string{"health", "report", "persisted", "promotion", "action", "pending-secret"}

// timeline collects, per release, when the source Deployment became
// available (t0) and when each stage was first seen.
type timeline struct {
	version string // the version promoted

	mu        sync.Mutex
	available map[string]time.Time
	at        map[string]*[numStages]time.Time
}

func newTimeline(version string) *timeline {
	return &timeline{version: version, available: map[string]time.Time{}, at: map[string]*[numStages]time.Time{}}
}

// set records that release reached s at t, unless it already did.
func (tl *timeline) set(release string, s stage, t time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	a := tl.at[release]
	if a == nil {
		a = &[numStages]time.Time{}
		tl.at[release] = a
	}
	if a[s].IsZero() {
		a[s] = t
	}
}

func (tl *timeline) setAvailable(release string, t time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.available[release]; !ok {
		tl.available[release] = t
	}
}

// get returns release's t0 and stage times (zero when not seen).
func (tl *timeline) get(release string) (time.Time, [numStages]time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var a [numStages]time.Time
	if p := tl.at[release]; p != nil {
		a = *p
	}
	return tl.available[release], a
}

// missing names the stages release has not reached yet ("available" for
// t0).
func (tl *timeline) missing(release string) []string {
	t0, a := tl.get(release)
	var out []string
	if t0.IsZero() {
		out = append(out, "available")
	}
	for s, t := range a {
		if t.IsZero() {
			out = append(out, stageNames[s])
		}
	}
	return out
}

// observingProxy forwards the agents' requests to the hub's receiver and
// records, from the real bodies: the dev agent's HealthChanged (or
// ReleaseStatus) event of the promoted version reaching Current (its time
// and its arrival), and the hub's answers to the staging agent's polls that
// carry an action for the version.
type observingProxy struct {
	tl                 *timeline
	source, dest       string // spoke names
	namespace          string
	next               http.RoundTripper
	srv                *httptest.Server
	mu                 sync.Mutex
	failure            error
	proxyErrors        []string
	eventsPath, pollOf string
}

func startObservingProxy(tb testing.TB, hubAddr string, tl *timeline, source, dest, namespace string) *observingProxy {
	tb.Helper()
	target, err := url.Parse("http://" + hubAddr)
	if err != nil {
		tb.Fatal(err)
	}
	p := &observingProxy{
		tl: tl, source: source, dest: dest, namespace: namespace,
		next:       http.DefaultTransport.(*http.Transport).Clone(),
		eventsPath: wire.EventsPath(source), pollOf: wire.ActionsPath(dest),
	}
	p.srv = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: p,
		// An agent that stops (at cleanup) cancels its held poll: not
		// worth a log line. Other errors are counted (the agents retry).
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				p.mu.Lock()
				p.proxyErrors = append(p.proxyErrors, fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err))
				p.mu.Unlock()
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	})
	tb.Cleanup(p.srv.Close)
	return p
}

func (p *observingProxy) url() string { return p.srv.URL }

func (p *observingProxy) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failure == nil {
		p.failure = err
	}
}

// errors returns the requests the proxy could not forward.
func (p *observingProxy) errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.proxyErrors)
}

func (p *observingProxy) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failure
}

// RoundTrip forwards req, observing it and the answer.
func (p *observingProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	received := time.Now()
	if req.Method == http.MethodPost && req.URL.Path == p.eventsPath && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var batch wire.EventBatch
		if err := json.Unmarshal(body, &batch); err != nil {
			p.fail(err)
		}
		for _, ev := range batch.Events {
			st := ev.State
			if ev.Namespace != p.namespace || st == nil || st.ChartVersion != p.tl.version || st.Health != wire.HealthCurrent ||
				(ev.Kind != wire.EventHealthChanged && ev.Kind != wire.EventReleaseStatus) {
				continue
			}
			p.tl.set(ev.Release, stageHealth, ev.Time)
			p.tl.set(ev.Release, stageReport, received)
		}
	}
	resp, err := p.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || req.URL.Path != p.pollOf || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	answered := time.Now()
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var list wire.ActionList
	if err := json.Unmarshal(body, &list); err != nil {
		p.fail(err)
	}
	for _, a := range list.Actions {
		if a.Namespace == p.namespace && a.Version == p.tl.version {
			p.tl.set(a.Release, stageAction, answered)
		}
	}
	return resp, nil
}

// watchLoop runs a watch until ctx ends, started by open from a resource
// version ("" at first, and again after the version expired), handing every
// event to handle with the time it arrived; a closed watch is reopened from
// the last version seen.
func watchLoop(ctx context.Context, onErr func(error), open func(ctx context.Context, rv string) (watch.Interface, error), handle func(watch.Event, time.Time)) {
	rv := ""
	for ctx.Err() == nil {
		w, err := open(ctx, rv)
		if err != nil {
			if ctx.Err() == nil {
				onErr(err)
			}
			return
		}
		for ev := range w.ResultChan() {
			at := time.Now()
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					w.Stop()
					onErr(err)
					return
				}
				rv = ""
				break
			}
			if m, err := apimeta.Accessor(ev.Object); err == nil {
				rv = m.GetResourceVersion()
			}
			if ev.Type != watch.Bookmark {
				handle(ev, at)
			}
		}
		w.Stop()
	}
}

// watchPromotionStages starts the watches: the source Deployments (t0),
// the hub's ReleaseHistories and Promotions, and the destination's release
// Secrets. promotions maps a Promotion's name to its release. It returns a
// function reporting the first watch failure.
func watchPromotionStages(ctx context.Context, tb testing.TB, tl *timeline, hubCluster, src, dst *harness.Cluster,
	hubNS, source, namespace string, revision int32, promotions map[string]string) func() error {
	tb.Helper()
	var mu sync.Mutex
	var failure error
	onErr := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failure == nil {
			failure = err
		}
	}
	srcSet, err := kubernetes.NewForConfig(src.RESTConfig)
	if err != nil {
		tb.Fatal(err)
	}
	dstSet, err := kubernetes.NewForConfig(dst.RESTConfig)
	if err != nil {
		tb.Fatal(err)
	}
	hubClient, err := client.NewWithWatch(hubCluster.RESTConfig, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		tb.Fatal(err)
	}
	opts := func(rv string) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}
	}
	go watchLoop(ctx, onErr, func(ctx context.Context, rv string) (watch.Interface, error) {
		return srcSet.AppsV1().Deployments(namespace).Watch(ctx, opts(rv))
	}, func(ev watch.Event, at time.Time) {
		if d, ok := ev.Object.(*appsv1.Deployment); ok && rolledOut(d, tl.version) {
			tl.setAvailable(d.Name, at)
		}
	})
	go watchLoop(ctx, onErr, func(ctx context.Context, rv string) (watch.Interface, error) {
		return dstSet.CoreV1().Secrets(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, LabelSelector: "owner=helm"})
	}, func(ev watch.Event, at time.Time) {
		s, ok := ev.Object.(*corev1.Secret)
		if ok && ev.Type == watch.Added && s.Labels["version"] == strconv.Itoa(int(revision)) {
			tl.set(s.Labels["name"], stagePending, at)
		}
	})
	go watchLoop(ctx, onErr, func(ctx context.Context, rv string) (watch.Interface, error) {
		return hubClient.Watch(ctx, &tugboatv1alpha1.ReleaseHistoryList{}, client.InNamespace(hubNS), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
	}, func(ev watch.Event, at time.Time) {
		rh, ok := ev.Object.(*tugboatv1alpha1.ReleaseHistory)
		if !ok || rh.Spec.Spoke != source || rh.Spec.Namespace != namespace {
			return
		}
		if c := rh.Status.Current; c != nil && c.Revision == revision && c.ChartVersion == tl.version && c.Health == tugboatv1alpha1.HealthCurrent {
			tl.set(rh.Spec.Release, stagePersisted, at)
		}
	})
	go watchLoop(ctx, onErr, func(ctx context.Context, rv string) (watch.Interface, error) {
		return hubClient.Watch(ctx, &tugboatv1alpha1.PromotionList{}, client.InNamespace(hubNS), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
	}, func(ev watch.Event, at time.Time) {
		pr, ok := ev.Object.(*tugboatv1alpha1.Promotion)
		if ok && ev.Type == watch.Added {
			if rel, ok := promotions[pr.Name]; ok {
				tl.set(rel, stagePromotion, at)
			}
		}
	})
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		if failure != nil {
			return errors.Join(errors.New("a watch failed"), failure)
		}
		return nil
	}
}

// rolledOut reports whether d runs version (its Pod template's
// app.kubernetes.io/version) fully rolled out, as the API server reports
// it: the spec observed, every replica updated, ready and available, and
// Available true.
func rolledOut(d *appsv1.Deployment, version string) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	if d.Spec.Template.Labels["app.kubernetes.io/version"] != version || st.ObservedGeneration < d.Generation ||
		st.Replicas != want || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.AvailableReplicas != want {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
