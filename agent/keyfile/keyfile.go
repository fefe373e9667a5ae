// Package keyfile reads a spoke's HMAC key from a file (a mounted Secret) and
// re-reads it when the file changes, so a rotated key is used from the next
// request on. The reporter and the action poller share it.
package keyfile

import (
	"bytes"
	"fmt"
	"os"
	"sync"

	"github.com/go-logr/logr"

	"tugboat.dev/tugboat/api/wire"
)

// File holds the signing key read from a file, and re-reads the file when
// it changes. A stat per request is cheap next to a TLS round trip, and it
// follows the symlink swap Kubernetes does when a mounted Secret is updated,
// so a rotated key is used from the next request on.
type File struct {
	path string
	log  logr.Logger

	mu   sync.Mutex
	key  []byte
	info os.FileInfo // of the file key was read from
	bad  os.FileInfo // of a changed file that could not be used (logged once)

	statFailed bool // the last stat failed (logged once)
}

// New reads the key at path; it fails when the file cannot be read or
// the key is shorter than wire.MinSpokeKeySize.
func New(path string, log logr.Logger) (*File, error) {
	k := &File{path: path, log: log}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading hub key: %w", err)
	}
	key, err := Read(path)
	if err != nil {
		return nil, err
	}
	k.key, k.info = key, info
	return k, nil
}

// Get returns the current key, re-reading the file if it changed. When the
// changed file cannot be used (missing, too short), the previous key stays
// in use and the problem is logged once per change.
func (k *File) Get() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	info, err := os.Stat(k.path)
	if err != nil {
		if !k.statFailed {
			k.log.Error(err, "Cannot stat the hub key file; signing with the previous key", "path", k.path)
			k.statFailed = true
		}
		return k.key
	}
	k.statFailed = false
	if SameFile(info, k.info) || SameFile(info, k.bad) {
		return k.key
	}
	key, err := Read(k.path)
	if err != nil {
		k.log.Error(err, "Cannot use the changed hub key file; signing with the previous key", "path", k.path)
		k.bad = info
		return k.key
	}
	k.key, k.info, k.bad = key, info, nil
	k.log.Info("Hub key file changed; signing with the new key", "path", k.path)
	return k.key
}

// SameFile reports whether two stats describe the same, unchanged file.
func SameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

// Read reads a key file without its surrounding white space, as the hub
// reads the Secret (a key file written with a trailing newline must sign
// the same way).
func Read(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading hub key: %w", err)
	}
	key = bytes.TrimSpace(key)
	if len(key) < wire.MinSpokeKeySize {
		return nil, fmt.Errorf("hub key in %s must be at least %d bytes (the hub refuses shorter spoke keys), got %d", path, wire.MinSpokeKeySize, len(key))
	}
	return key, nil
}
