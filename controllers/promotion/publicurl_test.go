package promotion

import "testing"

// TestPublicURL: a strategy's result URL reaches status without
// credentials (issue 12, Low 5).
func TestPublicURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                     "",
		"https://git.example.com/org/r/pull/7": "https://git.example.com/org/r/pull/7",
		"https://ci.example.com/job/42?token=s3cr3t&build=7":          "https://ci.example.com/job/42?build=7",
		"https://ci.example.com/run?access_token=a&X-Amz-Signature=b": "https://ci.example.com/run",
		"https://user:pass@ci.example.com/run#frag":                   "https://ci.example.com/run",
		"https://ci.example.com/?api_key=1&page=2":                    "https://ci.example.com/?page=2",
		"javascript:alert(1)":                                         "",
		"ftp://files.example.com/x":                                   "",
		"/relative/path":                                              "",
	} {
		if got := publicURL(in); got != want {
			t.Errorf("publicURL(%q) = %q, want %q", in, got, want)
		}
	}
}
