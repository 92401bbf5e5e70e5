package cli

import (
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/hashicorp/go-hclog"
)

// memoryLimitRatio is the share of the container's memory limit the Go runtime aims to stay
// under: the rest is for what the runtime does not count (thread stacks outside the heap,
// the binary's pages) and for a margin before the kernel's OOM killer.
const memoryLimitRatio = 0.9

// setMemoryLimit makes the Go runtime's soft memory limit follow the container's: 90% of
// the memory limit of the process's cgroup (v1 or v2), so that a process near its budget
// collects garbage harder instead of being killed, and one far below it is not held back.
// GOMEMLIMIT, when set, wins; AUTOMEMLIMIT=off turns this off, AUTOMEMLIMIT=0.8 changes the
// ratio. Without a limit (or outside a cgroup) the runtime keeps its default: none.
func setMemoryLimit(log hclog.Logger, provider memlimit.Provider) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory limit from GOMEMLIMIT", "gomemlimit", v, "bytes", debug.SetMemoryLimit(-1))
		return
	}
	limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(provider))
	switch {
	case err != nil:
		log.Warn("cannot read the container's memory limit; the Go runtime sets none", "error", err)
	case limit == math.MaxInt64:
		log.Debug("no container memory limit; the Go runtime sets none")
	default:
		log.Info("memory limit follows the container's", "gomemlimit_bytes", limit, "ratio", memoryLimitRatio)
	}
}
