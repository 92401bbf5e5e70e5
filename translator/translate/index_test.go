package translate

import (
	"fmt"
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

// Incremental translation: an Ingress's claims by host keep each host's claims in the
// Ingress's own order and its hosts in the order first claimed, whether looked up by scanning
// (few hosts) or through the index (many).
func TestHostClaimsKeepTheIngresssOrder(t *testing.T) {
	for _, n := range []int{1, hostClaimsScan, hostClaimsScan + 1, 3 * hostClaimsScan} {
		var hc hostClaims
		var want []string
		for round := range 3 {
			for i := range n {
				h := fmt.Sprintf("h%d.example.com", i)
				if round == 0 {
					want = append(want, h)
				}
				hc.add(h, claim{seq: round*n + i})
			}
		}
		if !slices.Equal(hc.hosts, want) {
			t.Fatalf("%d hosts: hosts %v, want %v", n, hc.hosts, want)
		}
		for i, h := range want {
			got := hc.of(h)
			if len(got) != 3 || got[0].seq != i || got[1].seq != n+i || got[2].seq != 2*n+i {
				t.Fatalf("%d hosts: claims on %s %+v, want seqs %d, %d, %d", n, h, got, i, n+i, 2*n+i)
			}
		}
		if hc.of("absent.example.com") != nil {
			t.Fatalf("%d hosts: claims on a host never claimed", n)
		}
	}
}
