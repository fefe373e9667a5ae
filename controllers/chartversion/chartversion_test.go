package chartversion_test

import (
	"testing"

	"tugboat.dev/tugboat/controllers/chartversion"
)

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.2.0", "1.10.0", -1}, // numerically, not as text
		{"1.10.0", "1.2.0", 1},
		{"1.2.0", "1.2.0", 0},
		{"v1.2.0", "1.2.0", 0},
		{"1.2.0-rc.1", "1.2.0", -1}, // a pre-release comes first
		{"1.2.0+build.7", "1.2.0", 0},
		{"main", "1.0.0", 1}, // not semver: as strings
		{"abc", "abd", -1},
	} {
		if got := chartversion.Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
