package receiver

import (
	"errors"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"tugboat.dev/tugboat/api/wire"
)

// fluxHelmReleaseKind is the only involvedObject kind the Flux endpoint maps.
const fluxHelmReleaseKind = "HelmRelease"

// fluxMetaPrefix is the prefix helm-controller gives its event metadata
// keys; notification-controller strips it before forwarding, so both forms
// are looked up.
const fluxMetaPrefix = "helm.toolkit.fluxcd.io/"

// Metadata keys the mapping reads (each also with fluxMetaPrefix).
const (
	fluxMetaRevision         = "revision"          // the chart version
	fluxMetaToken            = "token"             // the values digest, sha256:<hex>
	fluxMetaAppVersion       = "app-version"       // the chart's appVersion
	fluxMetaChart            = "chart"             // the chart name (set by an Alert's eventMetadata, if at all)
	fluxMetaReleaseNamespace = "release-namespace" // the Helm release's namespace (idem)
	fluxMetaReleaseName      = "release-name"      // the Helm release's name (idem)
)

// fluxRule is how one helm-controller reason maps onto a release's state.
type fluxRule struct {
	status wire.ReleaseStatus
	health wire.Health
	// revisionFromMessage: the message's "<ns>/<name>.v<N>" is the revision
	// the event is about (not so for a rollback, which names the revision
	// rolled back to while Helm writes a new one).
	revisionFromMessage bool
	// deployed: the event is the moment the revision was deployed.
	deployed bool
	// note, when set, follows the message's first line in the health
	// reason: what the event does not tell.
	note string
}

// rolledBackNote is why a RollbackSucceeded leaves the release's health
// Unknown. helm-controller rolls back only to remediate a failed release
// (the UpgradeFailed or TestFailed event before it says why), and then
// either retries the release after the remediation or, out of retries,
// stalls (Stalled=True, RetriesExceeded): it sends an event for neither,
// so the workloads of the old version run while the HelmRelease is not
// Ready, and nothing on the Flux path says whether it will be.
const rolledBackNote = "helm-controller remediated a failed release; whether it retries or has stalled (RetriesExceeded) no Flux event tells"

// fluxRules maps helm-controller's reasons (helm-controller/api/v2
// *Reason constants) onto release states. Reasons not listed are forwarded
// as KubernetesEvents without a state: they do not change what runs (an
// ArtifactFailed leaves the deployed revision as it was).
var fluxRules = map[string]fluxRule{
	"InstallSucceeded":   {wire.StatusDeployed, wire.HealthCurrent, true, true, ""},
	"UpgradeSucceeded":   {wire.StatusDeployed, wire.HealthCurrent, true, true, ""},
	"RollbackSucceeded":  {wire.StatusDeployed, wire.HealthUnknown, false, true, rolledBackNote},
	"TestSucceeded":      {wire.StatusDeployed, wire.HealthCurrent, true, false, ""},
	"UninstallSucceeded": {wire.StatusUninstalled, wire.HealthUnknown, true, false, ""},
	"InstallFailed":      {wire.StatusFailed, wire.HealthFailed, false, false, ""},
	"UpgradeFailed":      {wire.StatusFailed, wire.HealthFailed, false, false, ""},
	"RollbackFailed":     {wire.StatusFailed, wire.HealthFailed, false, false, ""},
	"UninstallFailed":    {wire.StatusFailed, wire.HealthFailed, false, false, ""},
	"RemediationFailed":  {wire.StatusFailed, wire.HealthFailed, false, false, ""},
	"TestFailed":         {wire.StatusDeployed, wire.HealthFailed, true, false, ""},
}

// fluxProgressing maps the action of a "Progressing" event ("Running
// 'upgrade' action with timeout of 5m0s") onto the pending status.
var fluxProgressing = map[string]wire.ReleaseStatus{
	"install":   wire.StatusPendingInstall,
	"upgrade":   wire.StatusPendingUpgrade,
	"rollback":  wire.StatusPendingRollback,
	"uninstall": wire.StatusUninstalling,
}

var (
	// helmReleaseInMessage finds "release <ns>/<name>[.v<N>] with chart
	// <chart>@<version>" in helm-controller's messages, e.g. "Helm upgrade
	// succeeded for release apps/web.v7 with chart web@1.4.0" or "Helm
	// upgrade failed for release apps/web with chart web@1.4.0: ...".
	helmReleaseInMessage = regexp.MustCompile(`release ([a-z0-9][-a-z0-9]*)/([a-z0-9][-a-z0-9.]*?)(?:\.v([0-9]{1,10}))? with chart ([^\s@]+)@([^\s:]+)`)
	// runningAction finds the action of a Progressing event.
	runningAction = regexp.MustCompile(`^Running '([a-z]+)' action`)
	// buildDigest is semver build metadata that is a digest (an OCI or a
	// commit digest Flux appends), not part of the chart's own version.
	buildDigest = regexp.MustCompile(`^(?:sha256[.:])?[0-9a-f]{12,64}$`)
)

// helmMessage is what helm-controller's message says about the release.
type helmMessage struct {
	namespace, release string
	revision           int
	chart, version     string
}

func parseHelmMessage(msg string) (helmMessage, bool) {
	m := helmReleaseInMessage.FindStringSubmatch(msg)
	if m == nil {
		return helmMessage{}, false
	}
	rev, _ := strconv.Atoi(m[3]) // "" → 0
	if rev > wire.MaxRevision {
		rev = 0
	}
	return helmMessage{namespace: m[1], release: m[2], revision: rev, chart: m[4], version: m[5]}, true
}

// normalizeChartVersion strips what Flux adds to a chart version: an
// "@sha256:<hex>" artifact digest, or "+<digest>" build metadata. Other
// build metadata ("1.4.0+build.5") is part of the chart's version and kept.
func normalizeChartVersion(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.Index(v, "@"); i > 0 {
		v = v[:i]
	}
	if base, build, ok := strings.Cut(v, "+"); ok && base != "" && buildDigest.MatchString(build) {
		v = base
	}
	return v
}

// fluxMeta returns metadata[key], unprefixed (as notification-controller
// forwards it) or prefixed with helm.toolkit.fluxcd.io/ (as helm-controller
// emits it).
func fluxMeta(md map[string]string, key string) string {
	if v, ok := md[key]; ok && v != "" {
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(md[fluxMetaPrefix+key])
}

// fluxSequence derives an event's sequence from its timestamp and reason,
// so a redelivered Flux event has the same id and is de-duplicated, while
// two events of one second (UpgradeSucceeded, TestSucceeded) do not
// collide.
func fluxSequence(ev *fluxEvent) int64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ev.Reason))
	return ev.Timestamp.Unix()*1000 + int64(h.Sum32()%1000)
}

// mapFluxEvent maps a Flux Event about a HelmRelease onto one wire event
// from spoke.
//
//   - Release: the namespace and name in helm-controller's message ("release
//     apps/web.v7 ..."), else metadata release-namespace / release-name,
//     else the HelmRelease's own namespace and name (right unless it sets
//     targetNamespace or releaseName).
//   - Revision: the message's ".v<N>" for events about that revision
//     (install, upgrade, test, uninstall); otherwise 0, meaning unknown: the
//     store matches the chart version to a revision it knows or appends one.
//   - Kind: ReleaseStatus with a State for the reasons in fluxRules and for
//     Progressing events that name an action; KubernetesEvent without a
//     State for every other reason, or when the chart version is unknown.
//   - State: chart from metadata "chart", else the message, else the
//     HelmRelease's name; chartVersion from metadata "revision" (Flux's
//     digest suffixes stripped), else the message; appVersion from
//     "app-version"; valuesDigest from "token"; helmRelease the involved
//     object.
//   - Object: the HelmRelease (with its uid), so that the id
//     (wire.NewEventID over spoke, release, revision, kind, the HelmRelease
//     uid and a sequence from the timestamp and the reason) is the same
//     when notification-controller retries.
func mapFluxEvent(spoke string, ev *fluxEvent) (wire.Event, error) {
	hr := ev.InvolvedObject
	msg, parsed := parseHelmMessage(ev.Message)
	namespace, release := hr.Namespace, hr.Name
	if v := fluxMeta(ev.Metadata, fluxMetaReleaseNamespace); v != "" {
		namespace = v
	}
	if v := fluxMeta(ev.Metadata, fluxMetaReleaseName); v != "" {
		release = v
	}
	if parsed {
		namespace, release = msg.namespace, msg.release
	}

	e := wire.Event{
		Spoke:     spoke,
		Namespace: namespace,
		Release:   release,
		Kind:      wire.EventKubernetes,
		Type:      wire.EventTypeNormal,
		Reason:    ev.Reason,
		Object:    &wire.ObjectRef{Kind: hr.Kind, Namespace: hr.Namespace, Name: hr.Name, UID: string(hr.UID)},
		Message:   sanitizeText(ev.Message, wire.MaxMessageLength),
		Time:      ev.Timestamp.UTC(),
		Sequence:  fluxSequence(ev),
	}
	if strings.EqualFold(ev.Severity, "error") {
		e.Type = wire.EventTypeWarning
	}

	rule, known := fluxRules[ev.Reason]
	if !known && ev.Reason == "Progressing" {
		if m := runningAction.FindStringSubmatch(ev.Message); m != nil {
			if status, ok := fluxProgressing[m[1]]; ok {
				rule, known = fluxRule{status: status, health: wire.HealthInProgress}, true
			}
		}
	}
	chartVersion := normalizeChartVersion(fluxMeta(ev.Metadata, fluxMetaRevision))
	if chartVersion == "" && parsed {
		chartVersion = normalizeChartVersion(msg.version)
	}
	if known && isToken(chartVersion, wire.MaxVersionLength) {
		e.Kind = wire.EventReleaseStatus
		if rule.revisionFromMessage && parsed {
			e.Revision = msg.revision
		}
		if rule.health == wire.HealthFailed {
			e.Type = wire.EventTypeWarning
		}
		e.State = fluxState(ev, rule, namespace, release, chartVersion, msg, parsed)
		e.State.Revision = e.Revision
	}
	e.ID = e.ComputeID()
	if err := validateMapped(&e); err != nil {
		return wire.Event{}, err
	}
	return e, nil
}

// fluxState builds the release state a mapped event carries.
func fluxState(ev *fluxEvent, rule fluxRule, namespace, release, chartVersion string, msg helmMessage, parsed bool) *wire.ReleaseState {
	chart := fluxMeta(ev.Metadata, fluxMetaChart)
	if !isToken(chart, wire.MaxChartNameLength) && parsed {
		chart = msg.chart
	}
	if !isToken(chart, wire.MaxChartNameLength) {
		chart = ev.InvolvedObject.Name
	}
	st := &wire.ReleaseState{
		Namespace:    namespace,
		Release:      release,
		Chart:        chart,
		ChartVersion: chartVersion,
		Status:       rule.status,
		Health:       rule.health,
		HelmRelease:  &wire.HelmReleaseRef{Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name},
	}
	if v := fluxMeta(ev.Metadata, fluxMetaAppVersion); v == sanitizeText(v, wire.MaxAppVersionLength) && !strings.ContainsAny(v, "\n\t") {
		st.AppVersion = v
	}
	if v := fluxMeta(ev.Metadata, fluxMetaToken); isValuesDigest(v) {
		st.ValuesDigest = v
	}
	if rule.health != wire.HealthCurrent {
		first, _, _ := strings.Cut(ev.Message, "\n")
		if rule.note != "" {
			first += ": " + rule.note
		}
		st.HealthReason = sanitizeText(first, wire.MaxHealthReasonLength)
	}
	if rule.deployed {
		st.LastDeployed = ev.Timestamp.UTC()
	}
	return st
}

// validateMapped validates a mapped event as the wire protocol would,
// except that revision 0 (unknown) is allowed.
func validateMapped(e *wire.Event) error {
	err := e.Validate()
	var inv *wire.InvalidError
	if err == nil || !errors.As(err, &inv) {
		return err
	}
	var kept []wire.FieldError
	for _, fe := range inv.Errors {
		if e.Revision == 0 && (fe.Field == "revision" || fe.Field == "state.revision") {
			continue
		}
		fe.Field = "mapped event " + fe.Field
		kept = append(kept, fe)
	}
	if len(kept) == 0 {
		return nil
	}
	return &wire.InvalidError{Errors: kept}
}

// sanitizeText makes s fit a wire text field: valid UTF-8, no control
// characters but newline and tab, at most maxRunes characters.
func sanitizeText(s string, maxRunes int) string {
	clean := true
	n := 0
	for _, r := range s {
		n++
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			clean = false
		}
	}
	if clean && n <= maxRunes {
		return s
	}
	var b strings.Builder
	n = 0
	for _, r := range s {
		if n == maxRunes {
			break
		}
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			continue
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// isToken reports whether s is a non-empty printable string without spaces
// of at most maxRunes characters (the wire rule for chart names and
// versions).
func isToken(s string, maxRunes int) bool {
	if s == "" || utf8.RuneCountInString(s) > maxRunes {
		return false
	}
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// isValuesDigest reports whether s is "sha256:<64 lowercase hex>".
func isValuesDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
