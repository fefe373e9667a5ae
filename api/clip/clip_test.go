package clip_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"tugboat.dev/tugboat/api/clip"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"shorter than the limit", "abc", 5, "abc"},
		{"exactly the limit", "abcde", 5, "abcde"},
		{"empty", "", 3, ""},
		{"cut with the marker inside the limit", "abcdefghij", 8, "abcde…"},
		{"the marker alone", "abcdef", 3, "…"},
		{"too short for the marker", "abcdef", 2, "ab"},
		{"zero", "abc", 0, ""},
		{"negative", "abc", -1, ""},
		// "é" is 2 bytes: a cut at 5 bytes would split the third one.
		{"never splits a 2-byte rune", "éééééé", 8, "éé…"},
		{"never splits a 2-byte rune without the marker", "héllo", 2, "h"},
		// "€" is 3 bytes, "𝄞" 4.
		{"never splits a 3-byte rune", "€€€€", 10, "€€…"},
		{"never splits a 4-byte rune", "a𝄞𝄞", 7, "a…"},
		{"a 4-byte rune that fits", "𝄞𝄞𝄞", 10, "𝄞…"},
		{"the marker counts against the limit", strings.Repeat("x", 2000), 1024, strings.Repeat("x", 1021) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clip.String(tc.s, tc.n)
			if got != tc.want {
				t.Errorf("String(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
			if len(got) > max(tc.n, 0) {
				t.Errorf("String(%q, %d) = %q: %d bytes, over the limit", tc.s, tc.n, got, len(got))
			}
			if !utf8.ValidString(got) {
				t.Errorf("String(%q, %d) = %q: not valid UTF-8 (a rune was cut)", tc.s, tc.n, got)
			}
		})
	}
}

// TestString_boundedAndRuneSafeForEveryLimit cuts texts of 1- to 4-byte runes
// at every limit: never over the limit, never a cut rune, the longest prefix
// that fits, and the marker exactly when cut.
func TestString_boundedAndRuneSafeForEveryLimit(t *testing.T) {
	for _, s := range []string{"plain ascii text", "héllo wörld", "€uro €uro", "𝄞 clef 𝄞 clef", "mixed é € 𝄞 x"} {
		for n := 0; n <= len(s)+1; n++ {
			got := clip.String(s, n)
			switch {
			case len(got) > n:
				t.Errorf("String(%q, %d) = %q: %d bytes, over the limit", s, n, got, len(got))
			case !utf8.ValidString(got):
				t.Errorf("String(%q, %d) = %q: a rune was cut", s, n, got)
			case len(s) <= n && got != s:
				t.Errorf("String(%q, %d) = %q: cut what fits", s, n, got)
			case len(s) > n && n >= len(clip.Marker) && !strings.HasSuffix(got, clip.Marker):
				t.Errorf("String(%q, %d) = %q: cut without the marker", s, n, got)
			}
			prefix := strings.TrimSuffix(got, clip.Marker)
			if len(s) > n && !strings.HasPrefix(s, prefix) {
				t.Errorf("String(%q, %d) = %q: not a prefix of the input", s, n, got)
			}
			// The longest prefix: one more rune would not fit.
			if len(s) > n {
				room := n
				if n >= len(clip.Marker) {
					room -= len(clip.Marker)
				}
				if _, size := utf8.DecodeRuneInString(s[len(prefix):]); len(prefix)+size <= room {
					t.Errorf("String(%q, %d) = %q: shorter than needed", s, n, got)
				}
			}
		}
	}
}

// TestString_invalidUTF8StaysBounded: bytes that are no UTF-8 at all are
// cut like single-byte runes, never dropped wholesale.
func TestString_invalidUTF8StaysBounded(t *testing.T) {
	s := strings.Repeat("\x80", 100)
	got := clip.String(s, 10)
	if len(got) > 10 || len(got) < 10-utf8.UTFMax {
		t.Errorf("String(100 continuation bytes, 10) = %q (%d bytes): want at most 10 bytes and most of them kept", got, len(got))
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "abc", "héllo", "€€€", "𝄞𝄞", "\xff\xfe"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := clip.String(s, n)
		if len(got) > max(n, 0) && len(s) > n {
			t.Fatalf("String(%q, %d) = %q: over the limit", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q: a rune was cut", s, n, got)
		}
	})
}
