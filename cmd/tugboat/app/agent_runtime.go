package app

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// agentGCPercent is the agent's GOGC unless the environment sets one. The
// agent's live heap is small (about 20 MiB while it tracks 5,000 Pods) and
// its allocation rate low, so collecting at 25 % growth instead of 100 %
// costs little CPU (a collection marks those 20 MiB) and keeps its resident
// memory near the live heap: 10 MiB less than at 50 %, 20 MiB less than at
// 100 % (docs/benchmarks.md, "Resident memory with 5,000 Pods").
const agentGCPercent = 25

// cgroupMemoryMax is cgroup v2's memory limit of the process's container.
var cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// withAgentRuntimeDefaults sets the agent's Go memory defaults before it
// runs: GOGC agentGCPercent, and a soft memory limit (GOMEMLIMIT) of 90 % of
// the container's memory limit, so that the GC works harder rather than the
// container being OOM-killed. GOGC and GOMEMLIMIT in the environment win.
func withAgentRuntimeDefaults(cmd *cobra.Command) *cobra.Command {
	next := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		applyAgentRuntimeDefaults()
		if next != nil {
			return next(c, args)
		}
		return nil
	}
	return cmd
}

func applyAgentRuntimeDefaults() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(agentGCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		if limit, ok := containerMemoryLimit(); ok {
			debug.SetMemoryLimit(limit / 10 * 9)
		}
	}
}

// containerMemoryLimit reads the cgroup v2 memory limit; ok is false when
// there is none ("max") or it cannot be read.
func containerMemoryLimit() (int64, bool) {
	data, err := os.ReadFile(cgroupMemoryMax)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
