package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// broker fans a change out to every open page that shows the kind that
// changed. A page needs to know that something changed, not what: a
// subscriber holds at most one pending change.
type broker struct {
	mu   sync.Mutex
	subs map[chan string]map[string]bool
}

func newBroker() *broker { return &broker{subs: map[chan string]map[string]bool{}} }

// subscribe returns a channel that receives changes of kinds, or nil when
// max subscribers are open already.
func (b *broker) subscribe(kinds map[string]bool, max int) chan string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) >= max {
		return nil
	}
	ch := make(chan string, 1)
	b.subs[ch] = kinds
	return ch
}

func (b *broker) unsubscribe(ch chan string) {
	b.mu.Lock()
	delete(b.subs, ch)
	b.mu.Unlock()
}

// publish tells every subscriber of kind what that it changed; a
// subscriber with a change pending keeps the pending one.
func (b *broker) publish(what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch, kinds := range b.subs {
		if !kinds[what] {
			continue
		}
		select {
		case ch <- what:
		default:
		}
	}
}

// watched are the kinds whose changes update the pages.
func watched() map[string]client.ObjectList {
	return map[string]client.ObjectList{
		"pipeline":       &tugboatv1alpha1.PipelineList{},
		"promotion":      &tugboatv1alpha1.PromotionList{},
		"releasehistory": &tugboatv1alpha1.ReleaseHistoryList{},
		"spoke":          &tugboatv1alpha1.SpokeList{},
	}
}

// watchAll watches every kind of watched() in the namespace, with the
// dashboard's credentials, until ctx ends.
func (s *Server) watchAll(ctx context.Context) {
	var wg sync.WaitGroup
	for kind, list := range watched() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watch(ctx, kind, list)
		}()
	}
	wg.Wait()
}

// watch lists then watches one kind, publishing every change; it starts
// over (with back-off while the API server refuses, e.g. when RBAC does
// not allow the user to watch the kind) until ctx ends.
func (s *Server) watch(ctx context.Context, kind string, list client.ObjectList) {
	const maxBackoff = 30 * time.Second
	backoff := 250 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := s.watchOnce(ctx, kind, list, !first)
		first = false
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = 250 * time.Millisecond
			continue
		}
		s.opts.Log.V(1).Info("watch failed; retrying", "kind", kind, "error", err.Error(), "after", backoff.String())
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// watchOnce lists kind to learn the resourceVersion (publishing a change
// when it restarted, since something may have changed meanwhile), then
// publishes every event until the watch ends.
func (s *Server) watchOnce(ctx context.Context, kind string, list client.ObjectList, restarted bool) error {
	if err := s.client.List(ctx, list, client.InNamespace(s.opts.Namespace)); err != nil {
		return err
	}
	if restarted {
		s.events.publish(kind)
	}
	w, err := s.client.Watch(ctx, list, client.InNamespace(s.opts.Namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true}})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Error:
				return fmt.Errorf("watch of %s: %v", kind, ev.Object)
			case watch.Bookmark:
				continue
			}
			s.events.publish(kind)
		}
	}
}

// heartbeat keeps idle event streams (and the proxies between) open.
const heartbeat = 15 * time.Second

// serveEvents streams a "change" event (Server-Sent Events) whenever an
// object of the kinds asked for (?kinds=promotion,pipeline; default all of
// watched) changes; the page's script then fetches the page again.
// streamWriteTimeout bounds each write of a live event stream.
const streamWriteTimeout = 10 * time.Second

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	kinds := map[string]bool{}
	known := watched()
	if q := r.URL.Query().Get("kinds"); q != "" {
		for _, k := range strings.Split(q, ",") {
			if _, ok := known[k]; !ok {
				s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("kinds: unknown kind %q: use pipeline, promotion, releasehistory or spoke", clip.String(k, 32)))
				return
			}
			kinds[k] = true
		}
	} else {
		for k := range known {
			kinds[k] = true
		}
	}
	ch := s.events.subscribe(kinds, s.opts.MaxStreams)
	if ch == nil {
		w.Header().Set("Retry-After", "10")
		s.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("%d live streams are open already: try again later", s.opts.MaxStreams))
		return
	}
	defer s.events.unsubscribe(ch)
	rc := http.NewResponseController(w)
	// Each write must finish within streamWriteTimeout: a client that stops
	// reading is dropped, its stream slot freed (the receiver's own write
	// bound would end every stream).
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) }
	deadline()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 1000\n: connected\n\n"); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-s.stopped:
			return
		case what := <-ch:
			deadline()
			_, err = fmt.Fprintf(w, "event: change\ndata: %s\n\n", what)
		case <-tick.C:
			deadline()
			_, err = fmt.Fprint(w, ": keep-alive\n\n")
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
