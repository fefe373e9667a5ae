package loadgen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is what the hub answered during Announce or Run.
type Result struct {
	// Elapsed is from the first request sent to the last answer received.
	Elapsed time.Duration
	// Requests is how many requests were sent, retries included.
	Requests int
	// Codes counts answers by HTTP status code.
	Codes map[int]int
	// TransportErrors counts requests that got no answer, by kind
	// (timeout, error).
	TransportErrors map[string]int
	// EventBatches is how many event batches were answered 202.
	EventBatches int
	// EventsSent is how many events those batches held.
	EventsSent int
	// EventsAccepted is the sum of Accepted in those answers: events new
	// to the hub and recorded.
	EventsAccepted int
	// Duplicates is the sum of Duplicates in those answers.
	Duplicates int
	// Snapshots is how many state snapshots were answered 202.
	Snapshots int
	// SnapshotReleases is how many releases those snapshots held.
	SnapshotReleases int

	latencies      []time.Duration
	stateLatencies []time.Duration
}

func newResult() *Result {
	return &Result{Codes: map[int]int{}, TransportErrors: map[string]int{}}
}

// record counts one request: events tells an event batch from a snapshot,
// n is how many events or releases it held.
func (r *Result) record(o outcome, events bool, n int) {
	r.Requests++
	r.latencies = append(r.latencies, o.latency)
	if !events {
		r.stateLatencies = append(r.stateLatencies, o.latency)
	}
	if o.code == 0 {
		kind := "error"
		if errors.Is(o.err, context.DeadlineExceeded) {
			kind = "timeout"
		}
		r.TransportErrors[kind]++
		return
	}
	r.Codes[o.code]++
	if o.code != http.StatusAccepted || o.err != nil {
		return
	}
	if events {
		r.EventBatches++
		r.EventsSent += n
		r.EventsAccepted += o.accepted.Accepted
		r.Duplicates += o.accepted.Duplicates
	} else {
		r.Snapshots++
		r.SnapshotReleases += n
	}
}

func merge(rs []*Result) *Result {
	t := newResult()
	for _, r := range rs {
		if r == nil {
			continue
		}
		t.Requests += r.Requests
		for k, v := range r.Codes {
			t.Codes[k] += v
		}
		for k, v := range r.TransportErrors {
			t.TransportErrors[k] += v
		}
		t.EventBatches += r.EventBatches
		t.EventsSent += r.EventsSent
		t.EventsAccepted += r.EventsAccepted
		t.Duplicates += r.Duplicates
		t.Snapshots += r.Snapshots
		t.SnapshotReleases += r.SnapshotReleases
		t.latencies = append(t.latencies, r.latencies...)
		t.stateLatencies = append(t.stateLatencies, r.stateLatencies...)
	}
	slices.Sort(t.latencies)
	slices.Sort(t.stateLatencies)
	return t
}

// AcceptedEventsPerSecond is EventsAccepted over Elapsed.
func (r *Result) AcceptedEventsPerSecond() float64 { return perSecond(r.EventsAccepted, r.Elapsed) }

// RequestsPerSecond is Requests over Elapsed.
func (r *Result) RequestsPerSecond() float64 { return perSecond(r.Requests, r.Elapsed) }

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Latency returns the q-quantile (0 to 1) of the requests' latencies, from
// sending to the whole answer read (0 without requests).
func (r *Result) Latency(q float64) time.Duration { return Quantile(r.latencies, q) }

// StateLatency returns the q-quantile of the state snapshots' latencies
// (retries counted as requests of their own).
func (r *Result) StateLatency(q float64) time.Duration { return Quantile(r.stateLatencies, q) }

// Quantile returns the q-quantile (nearest rank) of sorted durations.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Errors counts the requests that failed: answers other than 202 by code
// ("429", "503", ...) and transport errors by kind.
func (r *Result) Errors() map[string]int {
	out := map[string]int{}
	for code, n := range r.Codes {
		if code != http.StatusAccepted {
			out[strconv.Itoa(code)] += n
		}
	}
	for kind, n := range r.TransportErrors {
		out[kind] += n
	}
	return out
}

// String summarizes the result on one line.
func (r *Result) String() string {
	errs := r.Errors()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, errs[k]))
	}
	return fmt.Sprintf("%d requests in %s (%.0f/s); %d event batches, %d events sent, %d accepted (%.0f/s), %d duplicates; %d snapshots (%d releases); latency p50 %s p99 %s; errors: {%s}",
		r.Requests, r.Elapsed.Round(time.Millisecond), r.RequestsPerSecond(), r.EventBatches, r.EventsSent, r.EventsAccepted,
		r.AcceptedEventsPerSecond(), r.Duplicates, r.Snapshots, r.SnapshotReleases,
		r.Latency(0.50).Round(time.Microsecond), r.Latency(0.99).Round(time.Microsecond), strings.Join(parts, " "))
}
