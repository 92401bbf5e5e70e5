package translate

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// The dependency index answers exactly as a map of sets would, through every transition
// between a key of one value and a key of many (the incremental translation's reverse
// indices are built on it; docs/design.md, "Translation").
func TestIndexAnswersAsAMapOfSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := newIndex[int, int]()
	ref := map[int]map[int]bool{}
	for step := 0; step < 20000; step++ {
		k, v := rng.IntN(8), rng.IntN(4)
		if rng.IntN(2) == 0 {
			x.add(k, v)
			if ref[k] == nil {
				ref[k] = map[int]bool{}
			}
			ref[k][v] = true
		} else {
			x.remove(k, v)
			delete(ref[k], v)
			if len(ref[k]) == 0 {
				delete(ref, k)
			}
		}
		for k := 0; k < 8; k++ {
			want := slices.Sorted(maps.Keys(ref[k]))
			got := slices.Sorted(x.all(k))
			if !slices.Equal(got, want) || x.count(k) != len(want) || x.has(k) != (len(want) > 0) {
				t.Fatalf("step %d, key %d: all %v, count %d, has %v; want %v", step, k, got, x.count(k), x.has(k), want)
			}
		}
		if got, want := slices.Sorted(x.keys()), slices.Sorted(maps.Keys(ref)); !slices.Equal(got, want) {
			t.Fatalf("step %d: keys %v, want %v", step, got, want)
		}
	}
}
