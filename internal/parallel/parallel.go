// Package parallel owns spreading one pass over a list across the machine's cores, for the
// few passes of a cold start that are CPU-bound and independent per item (a complete
// state's digests, the module's compile of a complete state, the translator's reading of
// changed Secrets' certificates).
package parallel

import (
	"runtime"
	"sync"
)

// Ranges calls f on consecutive ranges [lo, hi) that cover [0, n), one range per core at
// once, and returns when every call has. Below threshold items, or on one core, it calls f
// once on the whole: starting goroutines costs more than it saves for a short list. f must
// only touch what its range owns.
func Ranges(n, threshold int, f func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < threshold || workers < 2 {
		if n > 0 {
			f(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Go(func() { f(lo, hi) })
	}
	wg.Wait()
}
