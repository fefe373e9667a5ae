package wire

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"tugboat.dev/tugboat/api/clip"
)

// Validate checks the batch against the protocol's rules. The error, if any,
// is an *InvalidError (errors.Is(err, ErrInvalid)) naming each bad field, e.g.
// "events[3].release: required".
func (b *EventBatch) Validate() error {
	if b == nil {
		return invalid("", "body must be a JSON object")
	}
	var fe fieldErrors
	dnsLabel(&fe, "spoke", b.Spoke, true)
	text(&fe, "agentVersion", b.AgentVersion, MaxVersionLength, true, false)
	if b.SentAt.IsZero() {
		fe.add("sentAt", "required")
	}
	switch {
	case len(b.Events) == 0:
		fe.add("events", "required: at least one event")
	case len(b.Events) > MaxEventsPerBatch:
		fe.add("events", fmt.Sprintf("must hold at most %d events, got %d", MaxEventsPerBatch, len(b.Events)))
	}
	for i := range b.Events {
		if fe.count() >= maxFieldErrors {
			fe.dropped++ // stop early on hopeless bodies
			break
		}
		validateEvent(&fe, "events["+strconv.Itoa(i)+"]", &b.Events[i], b.Spoke)
	}
	return fe.err()
}

// Validate checks the event on its own (as in a batch from spoke
// ev.Spoke); path prefixes are omitted.
func (e *Event) Validate() error {
	if e == nil {
		return invalid("", "event must be a JSON object")
	}
	var fe fieldErrors
	validateEvent(&fe, "", e, e.Spoke)
	return fe.err()
}

func validateEvent(fe *fieldErrors, p string, e *Event, spoke string) {
	before := fe.count()
	dnsLabel(fe, join(p, "spoke"), e.Spoke, true)
	if e.Spoke != "" && spoke != "" && e.Spoke != spoke {
		fe.add(join(p, "spoke"), fmt.Sprintf("must equal the batch's spoke %q", spoke))
	}
	dnsLabel(fe, join(p, "namespace"), e.Namespace, true)
	releaseName(fe, join(p, "release"), e.Release)
	revision(fe, join(p, "revision"), e.Revision)
	enum(fe, join(p, "kind"), string(e.Kind), eventKinds)
	enum(fe, join(p, "type"), string(e.Type), eventTypes)
	token(fe, join(p, "reason"), e.Reason, MaxReasonLength, true)
	if e.Object != nil {
		op := join(p, "object")
		token(fe, join(op, "kind"), e.Object.Kind, 63, true)
		dnsLabel(fe, join(op, "namespace"), e.Object.Namespace, false)
		token(fe, join(op, "name"), e.Object.Name, 253, true)
		token(fe, join(op, "uid"), e.Object.UID, 128, false)
	}
	if e.State != nil {
		sp := join(p, "state")
		validateReleaseState(fe, sp, e.State)
		if e.State.Namespace != e.Namespace || e.State.Release != e.Release {
			fe.add(sp, "namespace and release must equal the event's")
		}
		if e.State.ReleaseUID != "" && e.State.ReleaseUID != e.ReleaseUID {
			fe.add(join(sp, "releaseUID"), "must equal the event's releaseUID")
		}
	}
	text(fe, join(p, "message"), e.Message, MaxMessageLength, false, true)
	if e.Time.IsZero() {
		fe.add(join(p, "time"), "required")
	}
	if e.Sequence < 0 {
		fe.add(join(p, "sequence"), "must be 0 or more")
	}
	token(fe, join(p, "releaseUID"), e.ReleaseUID, 128, false)
	switch {
	case e.ID == "":
		fe.add(join(p, "id"), "required")
	case len(e.ID) != EventIDLength || !isLowerHex(e.ID):
		fe.add(join(p, "id"), fmt.Sprintf("must be %d lowercase hex digits", EventIDLength))
	case fe.count() == before && e.ID != e.ComputeID():
		// Only meaningful once every identity field is valid.
		fe.add(join(p, "id"), "does not match the event's identity (see NewEventID)")
	}
}

// Validate checks the snapshot against the protocol's rules. The error, if
// any, is an *InvalidError naming each bad field, e.g.
// "releases[2].health: unsupported value ...".
func (s *StateSnapshot) Validate() error {
	if s == nil {
		return invalid("", "body must be a JSON object")
	}
	var fe fieldErrors
	dnsLabel(&fe, "spoke", s.Spoke, true)
	text(&fe, "agentVersion", s.AgentVersion, MaxVersionLength, true, false)
	text(&fe, "kubernetesVersion", s.KubernetesVersion, MaxVersionLength, false, false)
	if s.ProtocolVersion < 0 || s.ProtocolVersion > MaxProtocolVersion {
		fe.add("protocolVersion", fmt.Sprintf("must be between 0 and %d", MaxProtocolVersion))
	}
	if s.TakenAt.IsZero() {
		fe.add("takenAt", "required")
	}
	switch {
	case s.Releases == nil:
		fe.add("releases", "required (an empty list when the spoke has no releases)")
	case len(s.Releases) > MaxReleasesPerSnapshot:
		fe.add("releases", fmt.Sprintf("must hold at most %d releases, got %d", MaxReleasesPerSnapshot, len(s.Releases)))
	}
	seen := make(map[[2]string]int, len(s.Releases))
	for i := range s.Releases {
		if fe.count() >= maxFieldErrors {
			fe.dropped++
			break
		}
		r := &s.Releases[i]
		p := "releases[" + strconv.Itoa(i) + "]"
		validateReleaseState(&fe, p, r)
		key := [2]string{r.Namespace, r.Release}
		if j, dup := seen[key]; dup {
			fe.add(p, fmt.Sprintf("duplicate of releases[%d] (namespace %q, release %q)", j, r.Namespace, r.Release))
		} else {
			seen[key] = i
		}
	}
	return fe.err()
}

func validateReleaseState(fe *fieldErrors, p string, r *ReleaseState) {
	dnsLabel(fe, join(p, "namespace"), r.Namespace, true)
	releaseName(fe, join(p, "release"), r.Release)
	token(fe, join(p, "chart"), r.Chart, MaxChartNameLength, true)
	token(fe, join(p, "chartVersion"), r.ChartVersion, MaxVersionLength, true)
	text(fe, join(p, "appVersion"), r.AppVersion, MaxAppVersionLength, false, false)
	revision(fe, join(p, "revision"), r.Revision)
	enum(fe, join(p, "status"), string(r.Status), releaseStatuses)
	enum(fe, join(p, "health"), string(r.Health), healths)
	text(fe, join(p, "healthReason"), r.HealthReason, MaxHealthReasonLength, false, true)
	digest(fe, join(p, "valuesDigest"), r.ValuesDigest)
	digest(fe, join(p, "manifestDigest"), r.ManifestDigest)
	token(fe, join(p, "releaseUID"), r.ReleaseUID, 128, false)
	if r.HelmRelease != nil {
		hp := join(p, "helmRelease")
		dnsLabel(fe, join(hp, "namespace"), r.HelmRelease.Namespace, true)
		dnsSubdomain(fe, join(hp, "name"), r.HelmRelease.Name)
	}
	if st := r.HelmReleaseStatus; st != nil {
		sp := join(p, "helmReleaseStatus")
		if r.HelmRelease == nil {
			fe.add(sp, "only allowed with helmRelease")
		}
		enum(fe, join(sp, "ready"), string(st.Ready), conditionStatuses)
		token(fe, join(sp, "reason"), st.Reason, MaxReasonLength, false)
		text(fe, join(sp, "message"), st.Message, MaxMessageLength, false, true)
		token(fe, join(sp, "lastAttemptedRevision"), st.LastAttemptedRevision, MaxVersionLength, false)
		if st.ObservedGeneration < 0 {
			fe.add(join(sp, "observedGeneration"), fmt.Sprintf("must not be negative, got %d", st.ObservedGeneration))
		}
	}
}

func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

// dnsLabel checks an RFC 1123 label: at most 63 lowercase alphanumerics or
// '-', starting and ending with an alphanumeric.
func dnsLabel(fe *fieldErrors, field, s string, required bool) {
	switch {
	case s == "":
		if required {
			fe.add(field, "required")
		}
	case len(s) > 63:
		fe.add(field, fmt.Sprintf("must be at most 63 characters, got %d", len(s)))
	case !IsDNSLabel(s):
		fe.add(field, fmt.Sprintf("invalid value %q: must be a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit)", clip.String(s, quoteLimit)))
	}
}

// releaseName checks a Helm release name: a DNS subdomain of at most 53
// characters.
func releaseName(fe *fieldErrors, field, s string) {
	switch {
	case s == "":
		fe.add(field, "required")
	case len(s) > 53:
		fe.add(field, fmt.Sprintf("must be at most 53 characters, got %d", len(s)))
	case !isDNSSubdomain(s):
		fe.add(field, fmt.Sprintf("invalid value %q: must be a Helm release name (lowercase letters, digits, '-' and '.')", clip.String(s, quoteLimit)))
	}
}

func dnsSubdomain(fe *fieldErrors, field, s string) {
	switch {
	case s == "":
		fe.add(field, "required")
	case len(s) > 253:
		fe.add(field, fmt.Sprintf("must be at most 253 characters, got %d", len(s)))
	case !isDNSSubdomain(s):
		fe.add(field, fmt.Sprintf("invalid value %q: must be a DNS subdomain", clip.String(s, quoteLimit)))
	}
}

func revision(fe *fieldErrors, field string, n int) {
	if n < 1 || n > MaxRevision {
		fe.add(field, fmt.Sprintf("must be between 1 and %d, got %d", MaxRevision, n))
	}
}

func enum(fe *fieldErrors, field, s string, allowed []string) {
	if s == "" {
		fe.add(field, "required")
		return
	}
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	fe.add(field, fmt.Sprintf("unsupported value %q: must be one of %s", clip.String(s, quoteLimit), strings.Join(allowed, ", ")))
}

// token checks a printable string without whitespace, e.g. a reason, a kind,
// a chart version.
func token(fe *fieldErrors, field, s string, max int, required bool) {
	if s == "" {
		if required {
			fe.add(field, "required")
		}
		return
	}
	if n := utf8.RuneCountInString(s); n > max {
		fe.add(field, fmt.Sprintf("must be at most %d characters, got %d", max, n))
		return
	}
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			fe.add(field, fmt.Sprintf("invalid value %q: must be printable, without spaces", clip.String(s, quoteLimit)))
			return
		}
	}
}

// text checks free text: at most max characters, valid UTF-8, no control
// characters other than (when multiline) newline and tab.
func text(fe *fieldErrors, field, s string, max int, required, multiline bool) {
	if s == "" {
		if required {
			fe.add(field, "required")
		}
		return
	}
	if n := utf8.RuneCountInString(s); n > max {
		fe.add(field, fmt.Sprintf("must be at most %d characters, got %d", max, n))
		return
	}
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if r == utf8.RuneError || unicode.IsControl(r) {
			fe.add(field, "must not contain control characters or invalid UTF-8")
			return
		}
	}
}

// digest checks an optional "sha256:<64 lowercase hex>".
func digest(fe *fieldErrors, field, s string) {
	if s == "" {
		return
	}
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 || !isLowerHex(hex) {
		fe.add(field, fmt.Sprintf("invalid value %q: must be sha256:<64 lowercase hex digits>", clip.String(s, quoteLimit)))
	}
}

// IsDNSLabel reports whether s is an RFC 1123 label (at most 63 lowercase
// alphanumerics or '-', starting and ending with an alphanumeric): the
// shape of a spoke name.
func IsDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if !IsDNSLabel(label) {
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// quoteLimit bounds a value quoted in an error message (clip.String), in
// bytes, so a hostile body cannot make the error (and the 400 body, and the
// logs) huge.
const quoteLimit = 64
