package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Every mutation still finds its code exactly once: a row whose code moved
// on would only be reported as skipped by `make mutate`, and the rule it
// guarded would silently go untested.
func TestMutations_findTheirCodeOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range mutations {
		if seen[m.Name] {
			t.Errorf("two mutations are named %q", m.Name)
		}
		seen[m.Name] = true
		src, err := os.ReadFile(filepath.Join("..", "..", m.File))
		if err != nil {
			t.Errorf("%s: %v", m.Name, err)
			continue
		}
		if n := bytes.Count(src, []byte(m.Old)); n != 1 {
			t.Errorf("%s: its code occurs %d times in %s, want once: update its row", m.Name, n, m.File)
		}
		if m.Old == m.New {
			t.Errorf("%s: changes nothing", m.Name)
		}
	}
}
