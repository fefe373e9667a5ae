package request

import (
	"strings"
	"testing"
)

func TestRetryName_staysWithin253Characters(t *testing.T) {
	if got := retryName("web-production-1.4.0", 1); got != "web-production-1.4.0" {
		t.Errorf("first attempt: got %q", got)
	}
	if got := retryName("web-production-1.4.0", 12); got != "web-production-1.4.0-r12" {
		t.Errorf("12th attempt: got %q", got)
	}
	long := strings.Repeat("a", 250) + "-.b"
	got := retryName(long, 200)
	if len(got) > maxNameLength || !strings.HasSuffix(got, "a-r200") {
		t.Errorf("long name: got %q (%d characters)", got, len(got))
	}
}
