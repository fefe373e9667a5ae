//go:build !agentonly

package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
)

// settle is how long a burst of changes (a controller writes several
// objects for one step) is gathered into one redraw.
const settle = 100 * time.Millisecond

// watchStatus renders the status now and again on every change of the
// namespace's Pipelines and Promotions, seen through watches of the hub's
// API (no polling). Only an output that differs from the last one is
// written: on a terminal the screen is redrawn, elsewhere (a pipe, a file)
// it is appended after a separator line. It returns nil once ctx ends or
// the process gets SIGINT/SIGTERM (Ctrl-C).
func watchStatus(ctx context.Context, s *hubSession, w io.Writer, out outputFlag, render func(context.Context, io.Writer) error) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	wc, err := client.NewWithWatch(s.config, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		return fmt.Errorf("connecting to the hub: %w", err)
	}
	redraw := isTerminal(w) && (out == "" || out == "table" || out == "wide")
	var last []byte
	draw := func() error {
		var buf bytes.Buffer
		if err := render(ctx, &buf); err != nil {
			return err
		}
		if bytes.Equal(buf.Bytes(), last) {
			return nil
		}
		switch {
		case redraw:
			_, _ = io.WriteString(w, "\x1b[H\x1b[2J") // home, clear screen
		case last != nil && out == "yaml":
			_, _ = io.WriteString(w, "---\n")
		case last != nil && out != "json":
			_, _ = io.WriteString(w, "\n")
		}
		last = buf.Bytes()
		_, err := w.Write(last)
		return err
	}
	for {
		// List for the resourceVersions to watch from, so the watches
		// report changes after this draw, not every object again.
		events, closeWatches, err := openWatches(ctx, wc, s.namespace)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := draw(); err != nil {
			closeWatches()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		err = follow(ctx, events, draw)
		closeWatches()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		// A watch ended (the API server closes them after a while): list
		// and watch again.
	}
}

// follow draws after each burst of events until ctx ends or a watch ends
// (nil) or reports an error.
func follow(ctx context.Context, events <-chan watch.Event, draw func() error) error {
	var (
		timer   *time.Timer
		timeout <-chan time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if ev.Type == watch.Error {
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == 410 {
					return nil // expired: list and watch again
				}
				return fmt.Errorf("watching the hub: %v", ev.Object)
			}
			if timer == nil {
				timer = time.NewTimer(settle)
				timeout = timer.C
			}
		case <-timeout:
			timer, timeout = nil, nil
			if err := draw(); err != nil {
				return err
			}
		}
	}
}

// openWatches watches the Pipelines and Promotions of namespace from now
// on, merged into one channel that closes when either watch ends.
func openWatches(ctx context.Context, wc client.WithWatch, namespace string) (<-chan watch.Event, func(), error) {
	var (
		watches []watch.Interface
		stopAll = func() {
			for _, w := range watches {
				w.Stop()
			}
		}
	)
	for _, list := range []client.ObjectList{&tugboatv1alpha1.PipelineList{}, &tugboatv1alpha1.PromotionList{}} {
		if err := wc.List(ctx, list, client.InNamespace(namespace), client.Limit(1)); err != nil {
			stopAll()
			return nil, nil, fmt.Errorf("listing in %s to watch: %w", namespace, err)
		}
		rv := list.(interface{ GetResourceVersion() string }).GetResourceVersion()
		fresh := list.DeepCopyObject().(client.ObjectList)
		w, err := wc.Watch(ctx, fresh, client.InNamespace(namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: false}})
		if err != nil {
			stopAll()
			return nil, nil, fmt.Errorf("watching in %s: %w", namespace, err)
		}
		watches = append(watches, w)
	}
	out := make(chan watch.Event)
	done := make(chan struct{})
	ended := make(chan struct{}) // closed by the first watch to end
	var endOnce sync.Once
	for _, w := range watches {
		go func() {
			defer endOnce.Do(func() { close(ended) })
			for ev := range w.ResultChan() {
				select {
				case out <- ev:
				case <-done:
					return
				}
			}
		}()
	}
	// events closes once a watch ended (follow then returns, and
	// watchStatus lists and watches again).
	events := make(chan watch.Event)
	go func() {
		defer close(events)
		for {
			select {
			case ev := <-out:
				select {
				case events <- ev:
				case <-done:
					return
				}
			case <-ended:
				return
			case <-done:
				return
			}
		}
	}()
	var stopOnce sync.Once
	return events, func() {
		stopOnce.Do(func() {
			close(done)
			stopAll()
		})
	}, nil
}
