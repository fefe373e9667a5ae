package keyfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"tugboat.dev/tugboat/agent/keyfile"
	"tugboat.dev/tugboat/api/wire"
)

// TestRead_refusesKeysTheHubWouldRefuse: the agent fails at start with a
// clear error on a key shorter than the hub accepts (issue 12, "Keys"),
// instead of running and being answered 401 on every request.
func TestRead_refusesKeysTheHubWouldRefuse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, content string
		ok            bool
	}{
		{"16 bytes", strings.Repeat("k", 16), false},
		{"31 bytes", strings.Repeat("k", 31), false},
		{"31 bytes and a newline", strings.Repeat("k", 31) + "\n", false},
		{"32 bytes", strings.Repeat("k", 32), true},
		{"64 hex characters and a newline", strings.Repeat("ab", 32) + "\n", true},
	} {
		_, err := keyfile.Read(write(strings.ReplaceAll(tc.name, " ", "-"), tc.content))
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case !tc.ok && err == nil:
			t.Errorf("%s: accepted; the hub refuses keys shorter than %d bytes", tc.name, wire.MinSpokeKeySize)
		case !tc.ok && !strings.Contains(err.Error(), "at least 32 bytes"):
			t.Errorf("%s: the error does not say what is needed: %v", tc.name, err)
		}
	}
}

// TestFile_keepsItsKeyWhenTheFileChangesToAShortOne: a rotation to a key
// too short to use leaves the agent signing with the previous key.
func TestFile_keepsItsKeyWhenTheFileChangesToAShortOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	good := strings.Repeat("g", 40)
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := keyfile.New(path, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("too-short-a-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := string(f.Get()); got != good {
		t.Fatalf("signing with %q after the file changed to a short key, want the previous key", got)
	}
}
