package store

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

var (
	services = &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}
	secrets  = &watchv1.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

func object(kind *watchv1.GroupVersionKind, i int, rv string) *watchv1.Object {
	return &watchv1.Object{Kind: kind, Namespace: "ns", Name: fmt.Sprintf("o%05d", i), Uid: fmt.Sprint(i), ResourceVersion: rv}
}

// filled returns a synced store of n Services and n Secrets.
func filled(t *testing.T, n int) *Store {
	t.Helper()
	s, err := New(Config{Epoch: "e1", Kinds: []*watchv1.GroupVersionKind{services, secrets}, SubscriberBuffer: 16})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for _, k := range []*watchv1.GroupVersionKind{services, secrets} {
			if _, err := s.Upsert(object(k, i, "1")); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.MarkSynced()
	return s
}

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The store's owner does not copy or sort the objects for a subscriber: a subscription
// costs it the same with 100 or 20000 objects, and so does its next change (one shard is
// copied, not the store). The subscriber copies and sorts them, in its own goroutine.
func TestSubscribeCostsTheOwnerTheSameAtAnySize(t *testing.T) {
	for _, n := range []int{100, 20000} {
		s := filled(t, n)
		var sub *Subscription
		if b := allocated(func() {
			var err error
			if sub, err = s.Subscribe(Request{}); err != nil {
				t.Fatal(err)
			}
		}); b > 16<<10 {
			t.Fatalf("Subscribe on a store of %d objects allocated %d bytes on the owner, want at most 16 KiB", 2*n, b)
		}
		if b := allocated(func() {
			if _, err := s.Upsert(object(services, 1, "2")); err != nil {
				t.Fatal(err)
			}
		}); b > 64<<10 {
			t.Fatalf("the first change after a subscription to %d objects allocated %d bytes on the owner, want at most 64 KiB", 2*n, b)
		}
		if got := len(sub.Snapshot()); got != 2*n {
			t.Fatalf("the snapshot has %d objects, want %d", got, 2*n)
		}
	}
}

// A subscription's snapshot and its inventory are the store as it was at its revision,
// whatever the owner changed since (the shards it shares are copied before a change); a
// later subscription sees the changes. Both are in stream order and carry only the kinds
// asked for.
func TestSnapshotIsTheStoreAtItsRevision(t *testing.T) {
	s := filled(t, 300)
	before, err := s.Subscribe(Request{})
	if err != nil {
		t.Fatal(err)
	}
	onlySecrets, err := s.Subscribe(Request{Kinds: []*watchv1.GroupVersionKind{secrets}})
	if err != nil {
		t.Fatal(err)
	}
	want := s.Inventory(nil)
	for i := range 300 {
		switch i % 3 {
		case 0:
			s.Delete(object(services, i, ""))
		case 1:
			if _, err := s.Upsert(object(secrets, i, "2")); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := s.Upsert(object(services, 1000+i, "1")); err != nil {
				t.Fatal(err)
			}
		}
	}

	check := func(name string, sub *Subscription, kinds []*watchv1.GroupVersionKind, n int, rv func(i int) string) {
		t.Helper()
		snap := sub.Snapshot()
		if len(snap) != n {
			t.Fatalf("%s: %d objects, want %d", name, len(snap), n)
		}
		for i := 1; i < len(snap); i++ {
			a, b := snap[i-1], snap[i]
			if ka, kb := s.kindSet[watchstream.KindKey(a.GetKind())], s.kindSet[watchstream.KindKey(b.GetKind())]; ka > kb || ka == kb && a.GetName() >= b.GetName() {
				t.Fatalf("%s: %s/%s before %s/%s: not in stream order", name, a.GetKind().GetKind(), a.GetName(), b.GetKind().GetKind(), b.GetName())
			}
		}
		for _, o := range snap {
			if o.GetKind().GetKind() == "Secret" && o.GetResourceVersion() != rv(0) {
				t.Fatalf("%s: %s at resourceVersion %s, want %s", name, o.GetName(), o.GetResourceVersion(), rv(0))
			}
		}
		got := sub.StartInventory()
		if len(got) != len(kinds) {
			t.Fatalf("%s: inventory of %d kinds, want %d", name, len(got), len(kinds))
		}
		for i, k := range kinds {
			w := watchstream.InventoryOf(k, filter(snap, k))
			if got[i].GetCount() != w.GetCount() || string(got[i].GetDigest()) != string(w.GetDigest()) {
				t.Fatalf("%s: inventory of %s does not match the snapshot", name, watchstream.KindKey(k))
			}
		}
	}
	check("before the changes", before, []*watchv1.GroupVersionKind{services, secrets}, 600, func(int) string { return "1" })
	check("secrets, before the changes", onlySecrets, []*watchv1.GroupVersionKind{secrets}, 300, func(int) string { return "1" })
	inv := before.StartInventory()
	for i := range want {
		if string(inv[i].GetDigest()) != string(want[i].GetDigest()) {
			t.Fatalf("the subscription's inventory of %s is not the store's at its revision", watchstream.KindKey(want[i].GetKind()))
		}
	}

	after, err := s.Subscribe(Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(after.Snapshot()), s.Len(); got != want || want != 600 {
		t.Fatalf("a subscription after the changes has %d objects, the store %d, want 600", got, want)
	}
	changed := 0
	for _, o := range after.Snapshot() {
		if o.GetResourceVersion() == "2" {
			changed++
		}
	}
	if changed != 100 {
		t.Fatalf("a subscription after the changes sees %d changed Secrets, want 100", changed)
	}
}

func filter(objs []*watchv1.Object, k *watchv1.GroupVersionKind) []*watchv1.Object {
	var out []*watchv1.Object
	for _, o := range objs {
		if watchstream.KindKey(o.GetKind()) == watchstream.KindKey(k) {
			out = append(out, o)
		}
	}
	return out
}
