package tracker

import (
	"fmt"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tugboat.dev/tugboat/agent/release"
	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
)

// statusEventLocked builds the event for a revision reaching a status.
func (t *Tracker) statusEventLocked(e *entry, rel *release.Release) wire.Event {
	kind, reason, typ := wire.EventReleaseStatus, "", wire.EventTypeNormal
	switch rel.Status {
	case wire.StatusPendingInstall:
		kind, reason = wire.EventReleaseStarted, "InstallStarted"
	case wire.StatusPendingUpgrade:
		kind, reason = wire.EventReleaseStarted, "UpgradeStarted"
	case wire.StatusPendingRollback:
		kind, reason = wire.EventReleaseStarted, "RollbackStarted"
	case wire.StatusDeployed:
		reason = "Deployed"
	case wire.StatusFailed:
		reason, typ = "Failed", wire.EventTypeWarning
	case wire.StatusSuperseded:
		reason = "Superseded"
	case wire.StatusUninstalling:
		reason = "Uninstalling"
	case wire.StatusUninstalled:
		reason = "Uninstalled"
	default:
		reason = "StatusUnknown"
	}
	msg := fmt.Sprintf("revision %d (%s %s) %s", rel.Revision, rel.Chart, rel.ChartVersion, rel.Status)
	if rel.Description != "" {
		msg += ": " + rel.Description
	}
	var state wire.ReleaseState
	if rel == e.latest {
		state = t.stateLocked(e)
		e.sent = state
	} else {
		state = rel.State()
		state.Health = wire.HealthUnknown
	}
	return t.event(rel.Namespace, rel.Name, rel.Revision, rel.StorageUID, kind, typ, reason, msg, nil, statusSequence(rel.Status), &state)
}

func statusSequence(s wire.ReleaseStatus) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return int64(h.Sum64() >> 1)
}

// event builds an event of revision, whose storage object has the UID
// releaseUID (empty when unknown): the UID makes the ids of a reinstall's
// revision 1 differ from those of the uninstalled revision 1.
func (t *Tracker) event(namespace, name string, revision int, releaseUID string, kind wire.EventKind, typ wire.EventType, reason, msg string,
	obj *wire.ObjectRef, seq int64, state *wire.ReleaseState) wire.Event {
	if revision < 1 {
		revision = 1
	}
	e := wire.Event{
		Spoke: t.opts.Spoke, Namespace: namespace, Release: name, Revision: revision,
		Kind: kind, Type: typ, Reason: reason, Object: obj, Message: clip.String(msg, wire.MaxMessageLength),
		Time: t.now().UTC(), Sequence: seq, State: state, ReleaseUID: releaseUID,
	}
	e.ID = e.ComputeID()
	return e
}

func (t *Tracker) reportDecodeError(meta metav1.Object, err error) {
	id := meta.GetNamespace() + "/" + meta.GetName()
	t.mu.Lock()
	already := t.reported[id] == meta.GetResourceVersion()
	t.reported[id] = meta.GetResourceVersion()
	t.mu.Unlock()
	decodeErrors.Inc()
	if already {
		return
	}
	t.opts.Logger.Error(err, "skipping a Helm release record that cannot be decoded", "object", id)
	name, rev, ok := release.ParseStorageName(meta.GetName())
	if !ok {
		return
	}
	seq, _ := strconv.ParseInt(meta.GetResourceVersion(), 10, 64)
	t.sink.Enqueue(t.event(meta.GetNamespace(), name, rev, string(meta.GetUID()), wire.EventReleaseStatus, wire.EventTypeWarning, "DecodeFailed",
		fmt.Sprintf("release record %s cannot be decoded and is skipped: %v", id, err),
		&wire.ObjectRef{Kind: kindOf(meta), Namespace: meta.GetNamespace(), Name: meta.GetName(), UID: string(meta.GetUID())}, seq, nil))
}

func kindOf(meta metav1.Object) string {
	if _, ok := meta.(*corev1.ConfigMap); ok {
		return "ConfigMap"
	}
	return "Secret"
}
