package cli

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/hashicorp/go-hclog"
)

// memoryLimitRatio is the share of what the container's memory limit leaves the Go runtime
// (memoryLimitProvider) that the runtime aims to stay under: the rest is a margin for what
// the runtime does not count (thread stacks outside the heap, kernel memory, pages of the
// binary first mapped later) before the kernel's OOM killer.
const memoryLimitRatio = 0.9

// setMemoryLimit makes the Go runtime's soft memory limit follow the container's: 90% of
// the memory limit of the process's cgroup (v1 or v2), less the pages of its own binary it
// has mapped (binaryResident), so that a process near its budget collects garbage harder
// instead of being killed, and one far below it is not held back. GOMEMLIMIT, when set,
// wins; AUTOMEMLIMIT=off turns this off, AUTOMEMLIMIT=0.8 changes the ratio. Without a limit
// (or outside a cgroup) the runtime keeps its default: none.
func setMemoryLimit(log hclog.Logger, provider memlimit.Provider, binaryResident func() uint64) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory limit from GOMEMLIMIT", "gomemlimit", v, "bytes", debug.SetMemoryLimit(-1))
		return
	}
	reserved := binaryResident()
	limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(memoryLimitProvider(provider, reserved)))
	switch {
	case err != nil:
		log.Warn("cannot read the container's memory limit; the Go runtime sets none", "error", err)
	case limit == math.MaxInt64:
		log.Debug("no container memory limit; the Go runtime sets none")
	default:
		log.Info("memory limit follows the container's", "gomemlimit_bytes", limit, "ratio", memoryLimitRatio,
			"binary_resident_bytes", reserved)
	}
}

// memoryLimitProvider is what the container's limit leaves the Go runtime: the kernel
// charges the container for the pages of the process's binary it maps (the watcher maps
// about 35 MiB of its own), and the runtime does not count them. Given the whole limit, a
// process near it may grow its heap into the room of those pages: the kernel then reclaims
// them, and the process, faulting its own code back in from disk, slows to a crawl without
// ever being killed (docs/operations.md, "Memory limits"). At most half the limit is set
// aside, so that a limit too small for the binary still leaves a limit.
func memoryLimitProvider(provider memlimit.Provider, reserved uint64) memlimit.Provider {
	return func() (uint64, error) {
		limit, err := provider()
		if err != nil {
			return limit, err
		}
		return limit - min(reserved, limit/2), nil
	}
}

// binaryResident is how much of the process's own binary is resident (RssFile of
// /proc/self/status), 0 when it cannot be read. At start it is nearly all it will be: every
// package's initialisation has touched its part of the binary by then.
func binaryResident() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "RssFile:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
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
