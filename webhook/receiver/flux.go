package receiver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"net/http"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"

	"tugboat.dev/tugboat/api/wire"
)

// FluxSignatureHeader is the header a Flux notification-controller
// generic-hmac Provider signs its requests in: "<alg>=<hex HMAC of the
// body>", alg sha256 (Flux's choice) or sha512. sha1 is refused.
const FluxSignatureHeader = "X-Signature"

// maxFluxSignatureHeader bounds the X-Signature value: sha512 in hex is 128
// characters.
const maxFluxSignatureHeader = 256

var errFluxSignature = errors.New("malformed X-Signature")

// parseFluxSignature parses an X-Signature value, "<alg>=<hex>", and returns
// the hash it names and the decoded sum (of the right length for it).
func parseFluxSignature(h string) (func() hash.Hash, []byte, error) {
	h = strings.TrimSpace(h)
	if h == "" || len(h) > maxFluxSignatureHeader {
		return nil, nil, errFluxSignature
	}
	alg, value, ok := strings.Cut(h, "=")
	if !ok {
		return nil, nil, errFluxSignature
	}
	var newHash func() hash.Hash
	var size int
	switch strings.ToLower(strings.TrimSpace(alg)) {
	case "sha256":
		newHash, size = sha256.New, sha256.Size
	case "sha512":
		newHash, size = sha512.New, sha512.Size
	default:
		return nil, nil, errFluxSignature
	}
	sum, err := hex.DecodeString(strings.TrimSpace(value))
	if err != nil || len(sum) != size {
		return nil, nil, errFluxSignature
	}
	return newHash, sum, nil
}

// verifyFluxSignature reports whether header is a valid HMAC of body with
// one of keys (empty keys never match). Every key is tried, each compared
// in constant time.
func verifyFluxSignature(header string, body []byte, keys ...[]byte) error {
	newHash, sum, err := parseFluxSignature(header)
	if err != nil {
		return err
	}
	matched := false
	for _, k := range keys {
		if len(k) == 0 {
			continue
		}
		m := hmac.New(newHash, k)
		m.Write(body)
		if hmac.Equal(m.Sum(nil), sum) {
			matched = true
		}
	}
	if !matched {
		return errors.New("signature mismatch")
	}
	return nil
}

// fluxEvent is the body a notification-controller Provider posts: Flux's
// own Event type (github.com/fluxcd/pkg/apis/event/v1beta1), decoded
// leniently: fields Flux may add later are ignored.
type fluxEvent = eventv1.Event

// decodeFluxEvent decodes and checks the parts of a Flux Event the receiver
// relies on.
func decodeFluxEvent(body []byte) (*fluxEvent, error) {
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, &wire.InvalidError{Errors: []wire.FieldError{{Detail: "body must be a JSON object (a Flux Event)"}}}
	}
	var ev fluxEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return nil, &wire.InvalidError{Errors: []wire.FieldError{{Field: ute.Field, Detail: "must be " + jsonKind(ute.Type.Kind().String())}}}
		}
		return nil, &wire.InvalidError{Errors: []wire.FieldError{{Detail: "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")}}}
	}
	var fe []wire.FieldError
	if ev.InvolvedObject.Kind == "" {
		fe = append(fe, wire.FieldError{Field: "involvedObject.kind", Detail: "required"})
	}
	if ev.InvolvedObject.Name == "" {
		fe = append(fe, wire.FieldError{Field: "involvedObject.name", Detail: "required"})
	}
	if ev.Timestamp.IsZero() {
		fe = append(fe, wire.FieldError{Field: "timestamp", Detail: "required"})
	}
	if ev.Reason == "" {
		fe = append(fe, wire.FieldError{Field: "reason", Detail: "required"})
	}
	if len(fe) > 0 {
		return nil, &wire.InvalidError{Errors: fe}
	}
	return &ev, nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	}
	return "a " + goKind
}

// authenticateFlux verifies r's X-Signature over raw with the spoke's Flux
// keys (never the agent's), and returns the request's Spoke (see identify).
func (s *Server) authenticateFlux(w http.ResponseWriter, r *http.Request, name string, raw []byte) (*Spoke, bool) {
	return s.identify(w, r, endpointFlux, name, fluxKeys, func(_ string, keys [keysPerVerification][]byte) error {
		return verifyFluxSignature(r.Header.Get(FluxSignatureHeader), raw, keys[:]...)
	})
}

// serveFlux handles POST /v1/flux/{spoke}: a Flux notification-controller
// generic-hmac Provider's event. Events about HelmReleases are mapped to
// wire events (see mapFluxEvent and the package doc) and recorded like an agent's; others are
// acknowledged and ignored.
func (s *Server) serveFlux(w http.ResponseWriter, r *http.Request, spoke string) {
	const ep = endpointFlux
	sp, body, ok := s.signedBody(w, r, ep, spoke, s.opts.BodyLimit, func(raw []byte) (*Spoke, bool) {
		return s.authenticateFlux(w, r, spoke, raw)
	})
	if !ok {
		return
	}
	ev, err := decodeFluxEvent(body)
	if err != nil {
		s.badInput(w, ep, spoke, err)
		return
	}
	// Flux signs no timestamp; the event's own bounds replays of old,
	// authentic events once their ids have left the dedupe cache.
	if now := s.now(); ev.Timestamp.Time.Before(now.Add(-s.opts.ReplayWindow)) || ev.Timestamp.After(now.Add(s.opts.ReplayWindow)) {
		s.reject(ep, wire.ErrStaleTimestamp.Error(), spoke)
		writeError(w, http.StatusUnauthorized, unauthorized)
		return
	}
	if ev.InvolvedObject.Kind != fluxHelmReleaseKind {
		s.metrics.events.WithLabelValues(ep, resultReceived).Inc()
		s.metrics.events.WithLabelValues(ep, resultIgnored).Inc()
		s.fluxEventReceived(r.Context(), sp, ev)
		writeJSON(w, http.StatusAccepted, wire.AcceptedResponse{Received: 1})
		return
	}
	mapped, err := mapFluxEvent(spoke, ev)
	if err != nil {
		s.badInput(w, ep, spoke, err)
		return
	}
	resp, err := s.record(r.Context(), ep, sp, []wire.Event{mapped})
	if err != nil {
		s.unavailable(w, ep, spoke, "recording a Flux event", err)
		return
	}
	s.fluxEventReceived(r.Context(), sp, ev)
	writeJSON(w, http.StatusAccepted, resp)
}

// fluxEventReceived tells the directory, if it records them, that sp's
// notification-controller posted ev, once it is accepted (a refused event,
// bad input included, changes nothing).
func (s *Server) fluxEventReceived(ctx context.Context, sp *Spoke, ev *fluxEvent) {
	rec, ok := s.spokes.(FluxEventRecorder)
	if !ok {
		return
	}
	o := ev.InvolvedObject
	summary := FluxEventSummary{
		ReceivedAt: s.now(),
		Reason:     sanitizeText(ev.Reason, 256),
		Object:     sanitizeText(o.Kind+"/"+o.Namespace+"/"+o.Name, 600),
		KeyID:      sp.SignedWith,
	}
	if err := rec.FluxEventReceived(ctx, sp.SpokeRef, summary); err != nil {
		s.log.Error(err, "Cannot record the spoke's last Flux event", "spoke", sp.String())
	}
}
