package cli

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/hashicorp/go-hclog"
)

// Scenario: a process in a container with a memory limit sets the Go runtime's soft limit
// to 90% of it, so that it collects garbage harder before the kernel kills it; GOMEMLIMIT,
// when set, wins; without a limit the runtime keeps none.
func TestMemoryLimitFollowsTheContainer(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := hclog.NewNullLogger()

	t.Setenv("GOMEMLIMIT", "")
	setMemoryLimit(log, memlimit.Limit(1000<<20))
	if got, want := debug.SetMemoryLimit(-1), int64(900<<20); got != want {
		t.Fatalf("with a 1000 MiB container limit: GOMEMLIMIT %d, want %d", got, want)
	}

	debug.SetMemoryLimit(math.MaxInt64)
	setMemoryLimit(log, func() (uint64, error) { return 0, memlimit.ErrNoLimit })
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("without a container limit: GOMEMLIMIT %d, want none", got)
	}

	debug.SetMemoryLimit(123 << 20)
	t.Setenv("GOMEMLIMIT", "123MiB")
	setMemoryLimit(log, memlimit.Limit(1000<<20))
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Fatalf("with GOMEMLIMIT set: the limit was changed to %d", got)
	}
}
