package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// EventIDLength is the length of an event id: 32 lowercase hex digits, the
// first 128 bits of a SHA-256.
const EventIDLength = 32

// NewEventID returns the deterministic id of an event: the first 128 bits, in
// lowercase hex, of a SHA-256 over its identity fields. The same event
// reported twice (a retry, a redelivery after an agent restart) gets the same
// id, so the hub de-duplicates it; events that differ in any of the fields get
// different ids. kind is the EventKind; objectUID is empty for events about the
// release itself; sequence tells apart events that share everything else.
//
// The hash input is the netstring ("<length>:<bytes>,") of "tugboat.dev/event/v1"
// followed by the netstrings of spoke, namespace, release, the decimal
// revision, kind, objectUID and the decimal sequence. Length prefixes mean no
// choice of field values makes two different identities hash the same input.
//
// Events that know their release's storage object use NewOccurrenceEventID
// instead (Event.ComputeID picks).
func NewEventID(spoke, namespace, release string, revision int, kind, objectUID string, sequence int64) string {
	return eventID("tugboat.dev/event/v1", spoke, namespace, release, revision, kind, objectUID, sequence)
}

// NewOccurrenceEventID is NewEventID for one occurrence of a revision: it
// also covers releaseUID, the UID of the revision's Helm storage object
// (Event.ReleaseUID). Revision numbers repeat after an uninstall and a
// reinstall; storage objects do not, so the events of a reinstall get ids
// of their own. The hash input is that of NewEventID with the domain
// "tugboat.dev/event/v2" and the netstring of releaseUID appended; a v1 and
// a v2 id never share an input.
func NewOccurrenceEventID(spoke, namespace, release, releaseUID string, revision int, kind, objectUID string, sequence int64) string {
	return eventID("tugboat.dev/event/v2", spoke, namespace, release, revision, kind, objectUID, sequence, releaseUID)
}

func eventID(domain, spoke, namespace, release string, revision int, kind, objectUID string, sequence int64, extra ...string) string {
	h := sha256.New()
	write := func(s string) { // a netstring: "<len>:<bytes>,"
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s + ","))
	}
	write(domain)
	write(spoke)
	write(namespace)
	write(release)
	write(strconv.Itoa(revision))
	write(kind)
	write(objectUID)
	write(strconv.FormatInt(sequence, 10))
	for _, x := range extra {
		write(x)
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:EventIDLength/2])
}
