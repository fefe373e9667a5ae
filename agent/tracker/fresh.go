package tracker

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tugboat.dev/tugboat/agent/release"
)

// A revision newly seen deployed must not look healthy on workloads the
// informers have not yet seen updated: Helm writes the deployed record after
// it applied the chart's objects, but the Secret informer may deliver that
// record before the workload informers deliver the updates. So until the
// revision was found Current once (e.confirmed), its health is judged on a
// fresh read of its workloads from the API server (Options.Fresh), which is
// as new as the record or newer; kstatus then sees the new generation not
// yet observed, or the replicas not yet updated, and says InProgress. The
// cache is used again for it once it holds every object of the last fresh
// read at that read's resourceVersion or later (caughtUp). This replaces a
// fixed settle delay: correct whatever the informers' lag, and as fast as one
// list per workload kind.

var freshReads = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "tugboat_agent_fresh_reads_total",
	Help: "Fresh reads (lists from the API server, not the cache) of a newly deployed revision's workloads, to judge its health.",
})

func init() {
	registerMetric(freshReads)
}

// judgeObjects returns the objects to judge e's health on: cached, or a
// fresh read when e's latest revision is newly deployed and not yet
// confirmed Current, unless the cache already caught up with the last fresh
// read. It also returns the deployed revision whose workloads they show
// reliably (0: none): a health computed from them may speak for that
// revision only (e.judgedOf), not for one deployed while it was computed.
func (t *Tracker) judgeObjects(ctx context.Context, key release.Key, e *entry, cached []*unstructured.Unstructured) ([]*unstructured.Unstructured, int, error) {
	t.mu.Lock()
	deployed := e.latest != nil && e.deployedOf == e.latest.Revision
	of := e.deployedOf
	// Once confirmed on a fresh read, the cache is still used only when it
	// caught up with that read: a lagging cache would make the confirmed
	// revision look InProgress again, and then Current again (a flap, and
	// the same event twice).
	reliable := !deployed || t.opts.Fresh == nil || (e.confirmed && e.freshRV == nil) || caughtUp(cached, e.freshRV)
	if reliable && deployed && e.confirmed {
		e.freshRV = nil // caught up: no need to compare any more
	}
	t.mu.Unlock()
	if !deployed {
		of = 0
	}
	if reliable {
		return cached, of, nil
	}
	fresh, err := t.opts.Fresh(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	freshReads.Inc()
	// The fresh read covers the release's namespace; what a chart put in
	// other namespaces comes from the cache.
	for _, o := range cached {
		if o.GetNamespace() != key.Namespace {
			fresh = append(fresh, o)
		}
	}
	rvs := make(map[string]int64, len(fresh))
	for _, o := range fresh {
		rvs[string(o.GetUID())] = resourceVersion(o)
	}
	t.mu.Lock()
	if e.deployedOf == of {
		e.freshRV = rvs
	}
	t.mu.Unlock()
	return fresh, of, nil
}

// caughtUp reports whether cached holds every object of a fresh read (its
// resourceVersions by uid) at that resourceVersion or later.
func caughtUp(cached []*unstructured.Unstructured, fresh map[string]int64) bool {
	if fresh == nil {
		return false
	}
	have := make(map[string]int64, len(cached))
	for _, o := range cached {
		have[string(o.GetUID())] = resourceVersion(o)
	}
	for uid, rv := range fresh {
		if got, ok := have[uid]; !ok || got < rv {
			return false
		}
	}
	return true
}

func resourceVersion(o *unstructured.Unstructured) int64 {
	rv, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0
	}
	return rv
}
