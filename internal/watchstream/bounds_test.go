package watchstream

import (
	"fmt"
	"runtime"
	"testing"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// applySnapshotStart applies a SnapshotStart announcing count objects and returns the bytes
// allocated while doing it; a panic (a runtime refusing the size) is a failure.
func applySnapshotStart(t *testing.T, m *Mirror, count uint64) (allocated uint64) {
	t.Helper()
	ev := &watchv1.WatchResponse{Epoch: "e1", Revision: 7, Event: &watchv1.WatchResponse_SnapshotStart{SnapshotStart: &watchv1.SnapshotStart{
		Count: count, Kinds: []*watchv1.GroupVersionKind{{Version: "v1", Kind: "Service"}}}}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("SnapshotStart announcing %d objects: panic %v", count, r)
			}
		}()
		if _, err := m.Apply(ev); err != nil {
			t.Fatalf("SnapshotStart announcing %d objects: %v", count, err)
		}
	}()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A count in a SnapshotStart is the peer's word, not an allocation size: a watcher that
// claims a million objects (or 2^62: the runtime ignores a hint it cannot allocate, but one
// that fits in memory is taken) costs the mirror nothing up front, and the claim is caught
// when the snapshot ends short of it.
func TestSnapshotStartWithAHugeCountAllocatesNothingUpFront(t *testing.T) {
	for _, count := range []uint64{1 << 20, 1 << 40, 1 << 62, ^uint64(0)} {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			m := NewMirror()
			m.StartStream()
			if got := applySnapshotStart(t, m, count); got > 1<<20 {
				t.Fatalf("SnapshotStart announcing %d objects allocated %d bytes, want at most 1 MiB", count, got)
			}
			_, err := m.Apply(&watchv1.WatchResponse{Epoch: "e1", Revision: 7, Event: &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: &watchv1.SnapshotEnd{}}})
			if err == nil {
				t.Fatal("a snapshot that ends without the announced objects was accepted")
			}
		})
	}
}
