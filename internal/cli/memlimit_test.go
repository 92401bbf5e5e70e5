package cli

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"weak"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/hashicorp/go-hclog"
)

// Scenario: a process in a container with a memory limit sets the Go runtime's soft limit
// to 90% of what the limit leaves beside the pages of its own binary (which the container is
// charged for and the runtime does not count), so that it collects garbage harder before
// the kernel kills it or reclaims its code; at most half the limit is set aside for those
// pages. GOMEMLIMIT, when set, wins; without a limit the runtime keeps none.
func TestMemoryLimitFollowsTheContainer(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := hclog.NewNullLogger()
	mapped := func(n uint64) func() uint64 { return func() uint64 { return n } }

	t.Setenv("GOMEMLIMIT", "")
	for _, tc := range []struct {
		name          string
		limit, binary uint64
		want          int64
	}{
		{"a binary of 100 MiB mapped", 1000 << 20, 100 << 20, 810 << 20},
		{"nothing mapped", 1000 << 20, 0, 900 << 20},
		{"a limit smaller than twice the binary", 100 << 20, 80 << 20, 45 << 20},
	} {
		debug.SetMemoryLimit(math.MaxInt64)
		setMemoryLimit(log, memlimit.Limit(tc.limit), mapped(tc.binary))
		if got := debug.SetMemoryLimit(-1); got != tc.want {
			t.Errorf("%s: a %d MiB container limit gives GOMEMLIMIT %d, want %d", tc.name, tc.limit>>20, got, tc.want)
		}
	}

	debug.SetMemoryLimit(math.MaxInt64)
	setMemoryLimit(log, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, mapped(100<<20))
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("without a container limit: GOMEMLIMIT %d, want none", got)
	}

	debug.SetMemoryLimit(123 << 20)
	t.Setenv("GOMEMLIMIT", "123MiB")
	setMemoryLimit(log, memlimit.Limit(1000<<20), mapped(100<<20))
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Fatalf("with GOMEMLIMIT set: the limit was changed to %d", got)
	}
}

// Cold start: a process collects garbage at ColdStartGCPercent until ready and at
// SteadyGCPercent afterwards, unless the operator set GOGC, whose choice holds throughout.
func TestGCPercentsKeepTheOperatorsGOGC(t *testing.T) {
	for _, tc := range []struct {
		name        string
		env         map[string]string
		start, idle int
		set         bool
	}{
		{name: "no GOGC", env: map[string]string{}, start: ColdStartGCPercent, idle: SteadyGCPercent, set: true},
		{name: "GOGC empty", env: map[string]string{"GOGC": ""}, start: ColdStartGCPercent, idle: SteadyGCPercent, set: true},
		{name: "GOGC=200", env: map[string]string{"GOGC": "200"}, set: false},
		{name: "GOGC=off", env: map[string]string{"GOGC": "off"}, set: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, idle, set := gcPercents(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if start != tc.start || idle != tc.idle || set != tc.set {
				t.Fatalf("gcPercents = %d, %d, %v; want %d, %d, %v", start, idle, set, tc.start, tc.idle, tc.set)
			}
		})
	}
}

// Cold start: the process starts at the cold start's GOGC and settles at the steady one,
// and leaves an operator's GOGC alone at both.
func TestMemoryStartsAndSettlesAtTheirGOGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	unset := func(string) (string, bool) { return "", false }
	startMemory(unset)
	if got := debug.SetGCPercent(100); got != ColdStartGCPercent {
		t.Fatalf("GOGC at start = %d, want %d", got, ColdStartGCPercent)
	}
	settleMemory(hclog.NewNullLogger(), unset)
	if got := debug.SetGCPercent(100); got != SteadyGCPercent {
		t.Fatalf("GOGC after settling = %d, want %d", got, SteadyGCPercent)
	}
	operator := func(k string) (string, bool) { return "100", k == "GOGC" }
	startMemory(operator)
	settleMemory(hclog.NewNullLogger(), operator)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC with GOGC=100 set = %d, want 100 kept", got)
	}
}

// Cold start: what the start left in a sync.Pool (gRPC keeps its message buffers in
// some) is freed when the cold start ends, not two collections of the steady
// state later.
func TestSettlingFreesWhatTheStartLeftInPools(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	var pool sync.Pool
	buf := new([1 << 20]byte)
	left := weak.Make(buf)
	pool.Put(buf)
	buf = nil
	settleMemory(hclog.NewNullLogger(), func(string) (string, bool) { return "", false })
	if left.Value() != nil {
		t.Fatal("a buffer the start left in a sync.Pool is still live after the cold start ended")
	}
	runtime.KeepAlive(&pool)
}

// The pages of the binary a process has mapped are read from the kernel: a running test
// binary has mapped some.
func TestBinaryResidentReadsTheMappedPages(t *testing.T) {
	if got := binaryResident(); got == 0 {
		t.Fatal("binaryResident() = 0 in a running process")
	}
}
