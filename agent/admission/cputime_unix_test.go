//go:build unix

package admission_test

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time (user and system) the process has
// used, so that benchmarks on a shared machine can report CPU per operation
// next to wall-clock ns/op.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
