package wire_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

// The expected id was computed independently of this package:
//
//	python3 -c 'import hashlib; h = hashlib.sha256()
//	for f in ["tugboat.dev/event/v2", "staging-1", "apps", "web", "1", "ReleaseStatus", "", "3", "5d7c2a9e-1111-4a3b-9c1d-0123456789ab"]:
//	    h.update(f"{len(f)}:{f},".encode())
//	print(h.hexdigest()[:32])'
func TestNewOccurrenceEventID_matchesKnownVector(t *testing.T) {
	g := NewWithT(t)
	g.Expect(wire.NewOccurrenceEventID("staging-1", "apps", "web", "5d7c2a9e-1111-4a3b-9c1d-0123456789ab", 1, "ReleaseStatus", "", 3)).
		To(Equal("2fefa6f1c6bf351fd96e68445925e6d7"))
}

// Issue 13, bug 7: the same revision number in two occurrences of a release
// (an uninstall and a reinstall) gives two ids; an event without a
// ReleaseUID keeps its v1 id, so events from older agents and from Flux
// still verify.
func TestEvent_ComputeIDTellsOccurrencesApart(t *testing.T) {
	g := NewWithT(t)
	ev := wire.Event{
		Spoke: "staging-1", Namespace: "apps", Release: "web", Revision: 1,
		Kind: wire.EventReleaseStatus, Type: wire.EventTypeNormal, Reason: "Deployed",
		Time: time.Unix(1767225600, 0).UTC(), Sequence: 3,
	}
	v1 := ev.ComputeID()
	g.Expect(v1).To(Equal(wire.NewEventID("staging-1", "apps", "web", 1, "ReleaseStatus", "", 3)))

	first, again := ev, ev
	first.ReleaseUID, again.ReleaseUID = "uid-of-the-first-install", "uid-of-the-reinstall"
	g.Expect(first.ComputeID()).NotTo(Equal(v1))
	g.Expect(first.ComputeID()).NotTo(Equal(again.ComputeID()))
	g.Expect(first.ComputeID()).To(Equal(first.ComputeID()), "deterministic: a redelivery keeps its id")

	// The hub recomputes and checks the id, ReleaseUID included.
	first.ID = first.ComputeID()
	g.Expect(first.Validate()).To(Succeed())
	first.ID = v1
	g.Expect(first.Validate()).To(MatchError(ContainSubstring("id: does not match")))
	first.ID, first.ReleaseUID = first.ComputeID(), "has space"
	g.Expect(first.Validate()).To(MatchError(ContainSubstring("releaseUID")))
}
