package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
)

// storeRetryAfter is the Retry-After of a 503 when the store is not ready
// or failed.
const storeRetryAfter = 5 * time.Second

// maxCachedVerifiers bounds the verifier cache; it is cleared when full.
const maxCachedVerifiers = 10_000

// reject counts a rejected request and logs why, at debug level. The
// reason never goes into a response; keys, signatures and bodies never go
// into a log.
func (s *Server) reject(endpoint, reason, spoke string, kv ...any) {
	s.metrics.rejected.WithLabelValues(endpoint, reason).Inc()
	s.log.V(1).Info("Rejected request", append([]any{"endpoint", endpoint, "reason", reason, "spoke", clip.String(spoke, quoteLimit)}, kv...)...)
}

// unavailable answers 503 with Retry-After for a store that is not ready or
// failed.
func (s *Server) unavailable(w http.ResponseWriter, endpoint, spoke, doing string, err error) {
	if errors.Is(err, errInFlight) {
		s.reject(endpoint, reasonInFlight, spoke)
		retryAfter(w, time.Second)
		writeError(w, http.StatusServiceUnavailable, errorf("%v", err))
		return
	}
	if errors.Is(err, ingest.ErrNotReady) {
		s.reject(endpoint, reasonStoreUnavailable, spoke, "error", err.Error())
	} else {
		s.metrics.rejected.WithLabelValues(endpoint, reasonStoreUnavailable).Inc()
		s.log.Error(err, "Store failed", "endpoint", endpoint, "spoke", spoke, "while", doing)
	}
	retryAfter(w, storeRetryAfter)
	writeError(w, http.StatusServiceUnavailable, errorf("hub not ready: retry later"))
}

// badInput answers a decode error: 413 for ErrTooLarge, else 400 naming the
// fields.
func (s *Server) badInput(w http.ResponseWriter, endpoint, spoke string, err error) {
	if errors.Is(err, wire.ErrTooLarge) {
		s.reject(endpoint, reasonBodyTooLarge, spoke)
		writeError(w, http.StatusRequestEntityTooLarge, wire.NewErrorResponse(err))
		return
	}
	s.reject(endpoint, reasonInvalidBody, spoke, "error", err.Error())
	writeError(w, http.StatusBadRequest, wire.NewErrorResponse(err))
}

// spokeMismatch answers 400 for a body whose spoke is not the path's.
func (s *Server) spokeMismatch(w http.ResponseWriter, endpoint, pathSpoke, bodySpoke string) {
	s.reject(endpoint, reasonSpokeMismatch, pathSpoke, "bodySpoke", clip.String(bodySpoke, quoteLimit))
	writeError(w, http.StatusBadRequest, wire.ErrorResponse{
		Error:  "invalid body: spoke: must equal the spoke in the path",
		Fields: []wire.FieldError{{Field: "spoke", Detail: fmt.Sprintf("must equal the spoke in the path %q", pathSpoke)}},
	})
}

// serveEvents handles POST /v1/spokes/{spoke}/events.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, spoke string) {
	const ep = endpointEvents
	sp, body, ok := s.signedBody(w, r, ep, spoke, s.opts.BodyLimit, func(raw []byte) (*Spoke, bool) {
		return s.authenticate(w, r, ep, spoke, raw)
	})
	if !ok {
		return
	}
	batch, err := wire.DecodeEventBatch(bytes.NewReader(body), int64(len(body))+1)
	if err != nil {
		s.badInput(w, ep, spoke, err)
		return
	}
	if batch.Spoke != spoke {
		s.spokeMismatch(w, ep, spoke, batch.Spoke)
		return
	}
	resp, err := s.record(r.Context(), ep, sp, batch.Events)
	if err != nil {
		s.unavailable(w, ep, spoke, "recording events", err)
		return
	}
	writeJSON(w, http.StatusAccepted, resp)
}

// serveState handles POST /v1/spokes/{spoke}/state.
func (s *Server) serveState(w http.ResponseWriter, r *http.Request, spoke string) {
	const ep = endpointState
	sp, body, ok := s.signedBody(w, r, ep, spoke, s.opts.StateBodyLimit, func(raw []byte) (*Spoke, bool) {
		return s.authenticate(w, r, ep, spoke, raw)
	})
	if !ok {
		return
	}
	snap, err := wire.DecodeStateSnapshot(bytes.NewReader(body), int64(len(body))+1)
	if err != nil {
		s.badInput(w, ep, spoke, err)
		return
	}
	if snap.Spoke != spoke {
		s.spokeMismatch(w, ep, spoke, snap.Spoke)
		return
	}
	if !s.recordState(r.Context(), w, sp, snap) {
		return
	}
	n := len(snap.Releases)
	writeJSON(w, http.StatusAccepted, wire.AcceptedResponse{Received: n, Accepted: n})
}

// errInFlight is a redelivery that waited Options.InFlightWait for another
// request's write of the same events: it is told to retry.
var errInFlight = errors.New("events of this batch are being recorded by another request: retry later")

// record drops the events already recorded (by id), hands the rest to the
// store, and counts. An id counts as recorded only once the store committed
// it: ids another request is writing right now are waited for (up to
// Options.InFlightWait, else errInFlight) and then are duplicates when that
// write committed, or written by this request when it failed. So a batch
// answered 202 is always recorded, whatever happens to a concurrent
// delivery of it.
//
// Received = Accepted + Duplicates; stale events (older revisions) are
// among the accepted and also counted in the events_total metric.
func (s *Server) record(ctx context.Context, endpoint string, sp *Spoke, events []wire.Event) (wire.AcceptedResponse, error) {
	ref, spoke := sp.SpokeRef, sp.Name
	n := len(events)
	resp := wire.AcceptedResponse{Received: n}
	keys := make([]eventKey, n)
	for i := range events {
		keys[i] = keyFor(ref, &events[i])
	}
	var deadline <-chan time.Time
	nStale := 0
	for len(events) > 0 {
		states := make([]idState, len(events))
		mine, busy := s.ids.reserve(keys, states)
		var owned, waiting []wire.Event
		var ownedKeys, waitingKeys []eventKey
		for i, st := range states {
			switch st {
			case idDuplicate:
				resp.Duplicates++
			case idOwned:
				owned = append(owned, events[i])
				ownedKeys = append(ownedKeys, keys[i])
			case idBusy:
				waiting = append(waiting, events[i])
				waitingKeys = append(waitingKeys, keys[i])
			}
		}
		stale, err := s.write(ctx, sp, owned)
		s.ids.finish(mine, ownedKeys, err == nil)
		if err != nil {
			return wire.AcceptedResponse{}, err
		}
		resp.Accepted += len(owned)
		nStale += stale
		if len(busy) == 0 {
			break
		}
		s.metrics.events.WithLabelValues(endpoint, resultWaited).Add(float64(len(waiting)))
		if deadline == nil {
			t := time.NewTimer(s.opts.InFlightWait)
			defer t.Stop()
			deadline = t.C
		}
		for _, f := range busy {
			select {
			case <-f.done:
			case <-deadline:
				return wire.AcceptedResponse{}, errInFlight
			case <-ctx.Done():
				return wire.AcceptedResponse{}, errInFlight
			}
		}
		events, keys = waiting, waitingKeys
	}
	s.metrics.events.WithLabelValues(endpoint, resultReceived).Add(float64(n))
	s.metrics.events.WithLabelValues(endpoint, resultAccepted).Add(float64(resp.Accepted))
	s.metrics.events.WithLabelValues(endpoint, resultDuplicate).Add(float64(resp.Duplicates))
	s.metrics.events.WithLabelValues(endpoint, resultStale).Add(float64(nStale))
	if resp.Duplicates > 0 || nStale > 0 {
		s.log.V(1).Info("Duplicate or stale events", "endpoint", endpoint, "spoke", spoke, "duplicates", resp.Duplicates, "stale", nStale)
	}
	return resp, nil
}

// write hands events to the store and, once recorded, to the revision
// tracker; it returns how many were stale. Events about revisions older
// than the newest seen are counted as stale but still recorded: they carry
// the older revision's own truth (Helm marking it superseded), and the
// store guarantees that they never move a release's current revision back.
func (s *Server) write(ctx context.Context, sp *Spoke, events []wire.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	stale := make([]bool, len(events))
	s.revs.stale(sp.String(), events, stale)
	if err := s.store.RecordEvents(ctx, sp.Authenticated(), events); err != nil {
		return 0, err
	}
	s.revs.observe(sp.String(), events)
	n := 0
	for _, st := range stale {
		if st {
			n++
		}
	}
	return n, nil
}
