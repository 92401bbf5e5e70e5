package translate

import (
	"bytes"
	mrand "math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/contract"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// byteSource is a math/rand source that plays back the fuzzer's bytes, one byte a draw:
// r.IntN(n) is about b*n/256, so every choice of universe is one byte the fuzzer can mutate.
// When the bytes run out it reports done and draws 0.
type byteSource struct {
	b    []byte
	done bool
}

func (s *byteSource) Uint64() uint64 {
	if len(s.b) == 0 {
		s.done = true
		return 1 << 55 // not 0: IntN draws again while the low bits of its product are too small
	}
	c := uint64(s.b[0])
	s.b = s.b[1:]
	// The top byte decides IntN(n) for most n (b*n/256), the low one for powers of two (b%n).
	return c<<56 | 1<<55 | c
}

// FuzzIncrementalEqualsFull is TestIncrementalEqualsFullTranslation with the fuzzer choosing
// the changes: Sets and Removes of Ingresses, Services, EndpointSlices, Secrets,
// IngressClasses, Gateway API objects and Namespaces from universe's small pools, in bursts, a Build after each. After every
// Build the incremental state is byte-identical to a full translation of the same objects,
// with its hash, and a receiver of the deltas holds the same state.
func FuzzIncrementalEqualsFull(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200, 210, 220, 230, 240, 250})
	f.Add(bytes.Repeat([]byte{1, 77, 3, 200, 9, 130, 64, 30, 250, 17, 111, 0, 5, 180, 90, 45}, 12))
	f.Add(bytes.Repeat([]byte{129, 26, 52, 103, 155, 206, 231, 180}, 24))
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var certs [][]byte
	for _, c := range []struct {
		notAfter time.Time
		names    []string
	}{
		{base.Add(365 * 24 * time.Hour), []string{"foo.example.com", "bar.example.com"}},
		{base.Add(30 * time.Minute), []string{"*.wild.example.com", "x.wild.example.com"}}, // expires during a run
	} {
		crt, key := selfSigned(f, c.notAfter, c.names...)
		certs = append(certs, crt, key)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		src := &byteSource{b: b}
		u := &universe{r: mrand.New(src), certs: certs, base: base}
		opts := Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", WatchIngressWithoutClass: u.r.IntN(2) == 0}
		cur := objects{}
		inc := New(opts)
		receiver := contract.NewState()
		gwHeld := map[string]*watchv1.ObjectStatus{}
		now := base
		for step := 0; !src.done && step < 200; step++ {
			for range 1 + u.r.IntN(4) {
				var o any
				switch k := u.r.IntN(15); k {
				case 0, 1, 2, 3:
					o = u.ingress()
				case 4:
					o = u.service()
				case 5, 6:
					o = u.slice()
				case 7:
					o = u.secret()
				case 8:
					o = u.class()
				case 10, 11, 12, 13:
					o = u.gatewayObject(k)
				case 14:
					o = u.namespace()
				case 9: // remove one of the objects, in key order
					keys := make([]string, 0, len(cur))
					for k := range cur {
						keys = append(keys, k)
					}
					if len(keys) == 0 {
						continue
					}
					sort.Strings(keys)
					k := keys[u.r.IntN(len(keys))]
					inc.Remove(cur[k])
					delete(cur, k)
					continue
				}
				cur[keyOf(o)] = o
				inc.Set(o)
			}
			now = now.Add(time.Duration(u.r.IntN(3)) * 10 * time.Minute)
			buildAndCheck(t, step, inc, cur, opts, now, receiver, gwHeld)
		}
	})
}
