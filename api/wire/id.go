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
func NewEventID(spoke, namespace, release string, revision int, kind, objectUID string, sequence int64) string {
	h := sha256.New()
	write := func(s string) { // a netstring: "<len>:<bytes>,"
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s + ","))
	}
	write("tugboat.dev/event/v1")
	write(spoke)
	write(namespace)
	write(release)
	write(strconv.Itoa(revision))
	write(kind)
	write(objectUID)
	write(strconv.FormatInt(sequence, 10))
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:EventIDLength/2])
}
