package receiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/ingest"
)

// Agent actions of the helm strategy (see api/wire/actions.go):
//
//	GET  /v1/spokes/{spoke}/actions       long-poll for the spoke's actions
//	POST /v1/spokes/{spoke}/actions/{id}  report one action's outcome
//
// Both are signed like every agent request; the GET's signature covers an
// empty body. They answer 404 unless Options.Actions is set. Their 200
// answers are signed in turn with the keys of the Spoke the request was
// authenticated as (never keys looked up again by name), bound to the request
// (wire.SignResponse over its timestamp, X-Tugboat-Nonce, method and path):
// the agent acts only on an answer that verifies, so nobody on the path
// (a TLS-terminating proxy, --hub-insecure-http) can inject an action.

// DefaultActionPollTimeout is how long a poll for actions is held when
// there are none.
const DefaultActionPollTimeout = 25 * time.Second

// maxActionPollTimeout keeps a poll well inside the server's write timeout.
const maxActionPollTimeout = 50 * time.Second

// Endpoint labels of the actions endpoints.
const (
	endpointActions       = "actions"
	endpointActionOutcome = "action_outcome"
)

// routeActions serves the actions endpoints for the path segments seg and
// returns the endpoint label, or "" when seg is no actions path.
func (s *Server) routeActions(w http.ResponseWriter, r *http.Request, seg []string) string {
	if s.opts.Actions == nil || len(seg) < 4 || len(seg) > 5 || seg[0] != "v1" || seg[1] != "spokes" || seg[3] != "actions" {
		return ""
	}
	if len(seg) == 4 {
		if s.allowMethod(w, r, endpointActions, http.MethodGet) {
			s.serveActions(w, r, seg[2])
		}
		return endpointActions
	}
	if s.allowMethod(w, r, endpointActionOutcome, http.MethodPost) {
		s.serveActionOutcome(w, r, seg[2], seg[4])
	}
	return endpointActionOutcome
}

// serveActions handles GET /v1/spokes/{spoke}/actions: it answers the
// spoke's pending actions at once when there are some, else holds the
// request until one is queued or Options.ActionPollTimeout passes (then
// answers an empty list). A poll counts as one request against the rate
// limit.
func (s *Server) serveActions(w http.ResponseWriter, r *http.Request, spoke string) {
	const ep = endpointActions
	sp, ok := s.authenticate(w, r, ep, spoke, nil)
	if !ok {
		return
	}
	store, ctx, who := s.opts.Actions, r.Context(), sp.Authenticated()
	changed := store.Wait(who)
	acts, err := store.Pending(ctx, who)
	if len(acts) == 0 && err == nil {
		timer := time.NewTimer(s.opts.ActionPollTimeout)
		defer timer.Stop()
	wait:
		for len(acts) == 0 && err == nil {
			select {
			case <-changed:
				changed = store.Wait(who)
				acts, err = store.Pending(ctx, who)
			case <-timer.C:
				break wait
			case <-s.stopPolls:
				break wait
			case <-ctx.Done():
				return // the agent went away
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.unavailable(w, ep, spoke, "listing actions", err)
		return
	}
	if acts == nil {
		acts = []wire.Action{}
	}
	s.writeSignedJSON(w, r, sp, wire.ActionList{Actions: acts})
}

// serveActionOutcome handles POST /v1/spokes/{spoke}/actions/{id}: the body
// is a wire.ActionOutcome for the action in the path. It answers 200 with
// {} once recorded (again for a repeated report), 400 naming the field
// for a bad body, 404 for an action the spoke does not have and 409 for
// one already reported differently.
func (s *Server) serveActionOutcome(w http.ResponseWriter, r *http.Request, spoke, id string) {
	const ep = endpointActionOutcome
	sp, body, ok := s.signedBody(w, r, ep, spoke, s.opts.BodyLimit, func(raw []byte) (*Spoke, bool) {
		return s.authenticate(w, r, ep, spoke, raw)
	})
	if !ok {
		return
	}
	o, err := decodeActionOutcome(body)
	if err != nil {
		s.badInput(w, ep, spoke, err)
		return
	}
	if o.ID != id {
		s.badInput(w, ep, spoke, &wire.InvalidError{Errors: []wire.FieldError{{Field: "id", Detail: "must equal the action id in the path"}}})
		return
	}
	err = s.opts.Actions.Report(r.Context(), sp.Authenticated(), *o)
	switch {
	case errors.Is(err, ingest.ErrActionNotFound):
		s.reject(ep, reasonNotFound, spoke, "action", clip.String(id, quoteLimit))
		writeError(w, http.StatusNotFound, errorf("spoke %s has no action %s", spoke, clip.String(id, quoteLimit)))
	case errors.Is(err, ingest.ErrActionConflict):
		s.reject(ep, "conflict", spoke, "action", clip.String(id, quoteLimit))
		writeError(w, http.StatusConflict, errorf("%v", err))
	case err != nil:
		s.unavailable(w, ep, spoke, "recording an action outcome", err)
	default:
		s.writeSignedJSON(w, r, sp, struct{}{})
	}
}

// writeSignedJSON answers 200 with v as JSON (as writeJSON does), with an
// X-Tugboat-Response-Signature made for r with each agent key of sp, the
// Spoke r was authenticated as: the keys that verified it, not keys looked
// up again by the path's name (which a Spoke of the same name in another
// namespace would make ambiguous). A request without a valid nonce (an
// agent from before response signing) gets the answer unsigned.
func (s *Server) writeSignedJSON(w http.ResponseWriter, r *http.Request, sp *Spoke, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the wire types always marshal
		writeJSON(w, http.StatusInternalServerError, wire.ErrorResponse{Error: "internal error"})
		return
	}
	b = append(b, '\n')
	h := w.Header()
	if sig := wire.SignResponse(r, http.StatusOK, b, sp.Keys.Current, sp.Keys.Previous); sig != "" {
		h.Set(wire.HeaderResponseSignature, sig)
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// decodeActionOutcome decodes one wire.ActionOutcome strictly (a single
// JSON object, no unknown fields, nothing after it) and validates it. Its
// errors match wire.ErrInvalid and name the field.
func decodeActionOutcome(body []byte) (*wire.ActionOutcome, error) {
	invalid := func(fe ...wire.FieldError) error { return &wire.InvalidError{Errors: fe} }
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, invalid(wire.FieldError{Detail: "body must be a JSON object"})
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, invalid(wire.FieldError{Detail: "malformed JSON: " + err.Error()})
	}
	if dec.More() {
		return nil, invalid(wire.FieldError{Detail: fmt.Sprintf("unexpected data after the JSON object, at offset %d", dec.InputOffset())})
	}
	var o wire.ActionOutcome
	known := map[string]struct {
		dst  any
		want string
	}{
		"id":       {&o.ID, "a string"},
		"result":   {&o.Result, "a string"},
		"message":  {&o.Message, "a string"},
		"revision": {&o.Revision, "an integer"},
		"time":     {&o.Time, "an RFC 3339 time"},
		"preview":  {new(json.RawMessage), "a preview object"},
	}
	var errs []wire.FieldError
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		f, ok := known[k]
		if !ok {
			errs = append(errs, wire.FieldError{Field: clip.String(k, quoteLimit), Detail: "unknown field"})
			continue
		}
		if err := json.Unmarshal(fields[k], f.dst); err != nil {
			errs = append(errs, wire.FieldError{Field: k, Detail: "must be " + f.want})
		}
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	if raw, ok := fields["preview"]; ok {
		var fe []wire.FieldError
		o.Preview, fe = checkPreview(raw, o.Result)
		errs = append(errs, fe...)
	}
	if len(o.ID) != wire.ActionIDLength || !isLowerHex(o.ID) {
		errs = append(errs, wire.FieldError{Field: "id", Detail: fmt.Sprintf("must be %d lowercase hex digits", wire.ActionIDLength)})
	}
	switch o.Result {
	case wire.ActionSucceeded, wire.ActionFailed, wire.ActionRefused:
	case "":
		errs = append(errs, wire.FieldError{Field: "result", Detail: "required"})
	default:
		errs = append(errs, wire.FieldError{Field: "result", Detail: fmt.Sprintf("must be %s, %s or %s", wire.ActionSucceeded, wire.ActionFailed, wire.ActionRefused)})
	}
	if o.Revision < 0 || o.Revision > math.MaxInt32 {
		errs = append(errs, wire.FieldError{Field: "revision", Detail: "must be between 0 and 2147483647"})
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	return &o, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// endPolls ends the polls being held, so a graceful shutdown need not wait
// for them.
func (s *Server) endPolls() { s.stopPollsOnce.Do(func() { close(s.stopPolls) }) }
