package cli

import (
	"math"
	"os"
	"runtime"
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

// The garbage collector's targets (GOGC) of a process before and after it is first ready.
// A cold start allocates many times what it keeps (every object decoded, re-encoded and
// sent), so collecting less often then saves CPU on the start's critical path: at
// ColdStartGCPercent the heap may grow to three times what is live between collections, a
// burst bounded by the container's memory limit (setMemoryLimit), under which the runtime
// collects harder. What is left afterwards is nearly all long-lived (the cluster's objects
// and what was built from them) and a change allocates kilobytes, so in steady state any
// headroom is memory held for nothing: at SteadyGCPercent the heap peaks at 1.25 times what
// is live, and a collection still comes only once changes have allocated a quarter of the
// live heap anew, hundreds of changes apart (docs/design.md, "Cold start").
const (
	ColdStartGCPercent = 200
	SteadyGCPercent    = 25
)

// gcPercents are the GOGC a process takes at start and once ready, and false when it keeps
// its own: GOGC set in the environment is the operator's choice and holds throughout.
func gcPercents(lookup func(string) (string, bool)) (coldStart, steady int, set bool) {
	if v, ok := lookup("GOGC"); ok && v != "" {
		return 0, 0, false
	}
	return ColdStartGCPercent, SteadyGCPercent, true
}

// startMemory sets the cold start's GOGC (gcPercents).
func startMemory(lookup func(string) (string, bool)) {
	if pct, _, set := gcPercents(lookup); set {
		debug.SetGCPercent(pct)
	}
}

// settleMemory ends a process's cold start: it sets the steady GOGC (gcPercents), then
// collects and returns to the system the memory the start used and no longer holds, so that
// the process's resident size is its steady state's, not its start's peak.
func settleMemory(log hclog.Logger, lookup func(string) (string, bool)) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, pct, set := gcPercents(lookup)
	if set {
		debug.SetGCPercent(pct)
	}
	// A sync.Pool keeps what was put in it until the second collection after: what the
	// start left in one (gRPC's buffers of up to 1 MiB, encoders' state) would otherwise
	// stay live until two collections of the steady state, which come rarely.
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	log.Info("cold start over: memory returned to the system", "gogc_set", set, "gogc", pct,
		"heap_live_bytes", after.HeapAlloc, "returned_bytes", int64(after.HeapReleased)-int64(before.HeapReleased))
}
