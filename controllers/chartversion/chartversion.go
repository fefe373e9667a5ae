// Package chartversion compares chart versions, the one way the hub orders
// them (which is newer, for rollbacks, promotions and DORA figures). It is
// not a semver library: it uses Masterminds/semver, as Helm does.
package chartversion

import (
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Compare compares chart versions a and b as semantic versions (as Helm
// orders them): -1, 0 or 1. When either is not one, it compares them as
// strings, so the order is still total.
func Compare(a, b string) int {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	if errA != nil || errB != nil {
		return strings.Compare(a, b)
	}
	return va.Compare(vb)
}
