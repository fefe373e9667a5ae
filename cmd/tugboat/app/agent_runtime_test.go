package app

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// unsetEnv unsets name for the test, restoring it after.
func unsetEnv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "") // registers the restore
	_ = os.Unsetenv(name)
}

func TestAgentRuntimeDefaults(t *testing.T) {
	prevGC := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(prevGC)
		debug.SetMemoryLimit(prevLimit)
	})
	dir := t.TempDir()
	prevPath := cgroupMemoryMax
	t.Cleanup(func() { cgroupMemoryMax = prevPath })
	write := func(content string) {
		cgroupMemoryMax = filepath.Join(dir, "memory.max")
		if err := os.WriteFile(cgroupMemoryMax, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("defaults", func(t *testing.T) {
		unsetEnv(t, "GOGC")
		unsetEnv(t, "GOMEMLIMIT")
		write("335544320\n") // 320Mi, the Deployment's limit
		applyAgentRuntimeDefaults()
		if got := debug.SetGCPercent(100); got != agentGCPercent {
			t.Errorf("GOGC %d, want %d", got, agentGCPercent)
		}
		if got := debug.SetMemoryLimit(math.MaxInt64); got != 335544320/10*9 {
			t.Errorf("memory limit %d, want 90 %% of 320Mi", got)
		}
	})
	t.Run("no cgroup limit", func(t *testing.T) {
		unsetEnv(t, "GOMEMLIMIT")
		write("max\n")
		applyAgentRuntimeDefaults()
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("memory limit %d, want none", got)
		}
	})
	t.Run("the environment wins", func(t *testing.T) {
		debug.SetGCPercent(100)
		t.Setenv("GOGC", "100")
		t.Setenv("GOMEMLIMIT", "1GiB")
		write("335544320\n")
		applyAgentRuntimeDefaults()
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("GOGC %d, want the environment's 100 untouched", got)
		}
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("memory limit %d, want the environment's untouched", got)
		}
	})
}
