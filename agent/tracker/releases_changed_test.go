package tracker

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tugboat.dev/tugboat/agent/release"
)

// TestTracker_releasesChangedWhenAReleaseAppearsOrGoes: the callback that
// makes the agent post its state (and the hub update the Spoke's release
// count) runs when a release is installed or uninstalled after the initial
// lists, and not for releases listed at start, upgrades or pruned
// revisions.
func TestTracker_releasesChangedWhenAReleaseAppearsOrGoes(t *testing.T) {
	g := NewWithT(t)
	var calls atomic.Int32
	tr := New(Options{Spoke: "spoke-1", ReleasesChanged: func() { calls.Add(1) }}, &recorder{},
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })

	tr.ObserveStorage(releaseSecret("listed", 1, "deployed", "uid-listed-1"), true)
	g.Expect(calls.Load()).To(BeZero(), "a release listed at start is in the first state post anyway")

	tr.ObserveStorage(releaseSecret("web", 1, "pending-install", "uid-web-1"), false)
	g.Expect(calls.Load()).To(Equal(int32(1)), "installed")
	tr.ObserveStorage(releaseSecret("web", 1, "deployed", "uid-web-1"), false)
	tr.ObserveStorage(releaseSecret("web", 2, "pending-upgrade", "uid-web-2"), false)
	tr.ObserveStorage(releaseSecret("web", 2, "deployed", "uid-web-2"), false)
	tr.ObserveStorage(releaseSecret("web", 1, "superseded", "uid-web-1"), false)
	tr.ForgetStorage(releaseSecret("web", 1, "superseded", "uid-web-1"))
	g.Expect(calls.Load()).To(Equal(int32(1)), "upgrades and a pruned revision leave the set of releases alone")

	tr.ForgetStorage(releaseSecret("web", 2, "deployed", "uid-web-2"))
	g.Expect(calls.Load()).To(Equal(int32(2)), "uninstalled: its last revision is gone")
	g.Expect(tr.Releases()).To(Equal(1))

	// Without the callback nothing breaks.
	plain := New(Options{Spoke: "spoke-1"}, &recorder{},
		func(context.Context, release.Key) ([]*unstructured.Unstructured, error) { return nil, nil })
	plain.ObserveStorage(releaseSecret("web", 1, "deployed", "uid-web-1"), false)
	plain.ForgetStorage(releaseSecret("web", 1, "deployed", "uid-web-1"))
}
