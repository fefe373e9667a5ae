// Package clip shortens text to a limit in bytes: error messages that quote
// a request, condition and event messages, values bound by a schema or the
// wire protocol.
//
// It is one function, for every layer: it lives under api, the bottom layer,
// so that api/wire can use it too (see docs/architecture.md). It is not a
// formatter: it neither wraps, pads nor escapes.
package clip

import "unicode/utf8"

// Marker ends a string that String cut: "…" (U+2026), 3 bytes in UTF-8.
const Marker = "…"

// String returns s when it holds at most n bytes. Otherwise it returns a
// prefix of s followed by Marker, at most n bytes in all: the prefix ends on
// a rune boundary, so a valid UTF-8 string stays valid. When n is too small
// for Marker (fewer than 3 bytes), it returns the longest such prefix of at
// most n bytes, without the marker; n <= 0 gives "".
//
// A limit in bytes is never exceeded, and holds a limit in characters of the
// same size too (the API server's maxLength, the wire protocol's lengths):
// a character is at least one byte.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	marker := Marker
	if n < len(Marker) {
		marker = ""
	}
	return s[:boundary(s, n-len(marker))] + marker
}

// boundary returns the largest cut <= n at which s may be cut without
// splitting a rune: it steps back over continuation bytes, at most the
// length of one rune (a byte that is not valid UTF-8 is a rune of its own).
func boundary(s string, n int) int {
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return n
}
