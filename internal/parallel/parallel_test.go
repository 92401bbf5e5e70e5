package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestRangesCoverEachItemOnce: every index in [0, n) is handed to exactly one call, on one
// goroutine or several, for lists shorter and longer than the threshold.
func TestRangesCoverEachItemOnce(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	for _, n := range []int{0, 1, 7, 100, 1001, 4096} {
		seen := make([]atomic.Int32, n)
		var calls atomic.Int32
		Ranges(n, 64, func(lo, hi int) {
			calls.Add(1)
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("n=%d: index %d handed out %d times", n, i, c)
			}
		}
		if n > 0 && n < 64 && calls.Load() != 1 {
			t.Fatalf("n=%d below the threshold: %d calls, want one", n, calls.Load())
		}
		if n >= 64 && calls.Load() < 2 {
			t.Fatalf("n=%d above the threshold: %d calls, want one per core", n, calls.Load())
		}
	}
}
