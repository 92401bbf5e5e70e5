package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Unit tests of the store's rules (docs/design.md, "The watch stream") that the snapshot
// tests of view_test.go do not pin down: what is a change, the barrier as a change of its
// own, resumes, and how subscriptions end.

// newStore returns an empty store of Services and Secrets, epoch e1.
func newStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	if cfg.Epoch == "" {
		cfg.Epoch = "e1"
	}
	cfg.Kinds = []*watchv1.GroupVersionKind{services, secrets}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func upsert(t *testing.T, s *Store, o *watchv1.Object) bool {
	t.Helper()
	changed, err := s.Upsert(o)
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

// describe names an event for failure messages and comparisons: "rev type kind/name@rv".
func describe(ev Event) string {
	switch ev.Type {
	case EventUpsert:
		return fmt.Sprintf("%d upsert %s/%s@%s", ev.Revision, ev.Object.GetKind().GetKind(), ev.Object.GetName(), ev.Object.GetResourceVersion())
	case EventDelete:
		return fmt.Sprintf("%d delete %s/%s@%s", ev.Revision, ev.Object.GetKind().GetKind(), ev.Object.GetName(), ev.Object.GetResourceVersion())
	case EventSynced:
		return fmt.Sprintf("%d synced", ev.Revision)
	}
	return fmt.Sprintf("%d type %d", ev.Revision, ev.Type)
}

// drain takes every event buffered for sub, without waiting: the store sends them while
// its owner (the test) changes it, so they are all there.
func drain(sub *Subscription) []Event { return sub.Take() }

// docs/design.md, "The watch stream": revision rises by exactly one per change, and only on
// a change. An informer's redelivery of an unchanged object (same resourceVersion and uid,
// as on a relist) is no change; the same name recreated (another uid) is one; deleting an
// object the store does not hold is no change (it never reaches a stream as a delete of an
// unknown object, which a receiver must refuse: scenario 10).
func TestRevisionRisesByOneOnEveryChangeAndOnlyOnAChange(t *testing.T) {
	svc := func(rv, uid string) *watchv1.Object {
		return &watchv1.Object{Kind: services, Namespace: "ns", Name: "web", Uid: uid, ResourceVersion: rv}
	}
	type step struct {
		name    string
		do      func(s *Store) bool
		changed bool
		n       int // objects held after the step
	}
	steps := []step{
		{"add", func(s *Store) bool { return upsert(t, s, svc("1", "u1")) }, true, 1},
		{"redelivered unchanged (relist)", func(s *Store) bool { return upsert(t, s, svc("1", "u1")) }, false, 1},
		{"updated", func(s *Store) bool { return upsert(t, s, svc("2", "u1")) }, true, 1},
		{"recreated: same resourceVersion, another uid", func(s *Store) bool { return upsert(t, s, svc("2", "u2")) }, true, 1},
		{"another kind, same name", func(s *Store) bool {
			return upsert(t, s, &watchv1.Object{Kind: secrets, Namespace: "ns", Name: "web", Uid: "s", ResourceVersion: "1"})
		}, true, 2},
		{"deleted", func(s *Store) bool { return s.Delete(svc("", "")) }, true, 1},
		{"deleted again: not held", func(s *Store) bool { return s.Delete(svc("", "")) }, false, 1},
		{"delete of an object never held", func(s *Store) bool {
			return s.Delete(&watchv1.Object{Kind: services, Namespace: "ns", Name: "never"})
		}, false, 1},
	}
	s := newStore(t, Config{})
	sub, err := s.Subscribe(Request{})
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, st := range steps {
		got := st.do(s)
		if got != st.changed {
			t.Fatalf("%s: reported a change: %v, want %v", st.name, got, st.changed)
		}
		if st.changed {
			want++
		}
		if s.Revision() != want {
			t.Fatalf("%s: revision %d, want %d", st.name, s.Revision(), want)
		}
		if s.Len() != st.n {
			t.Fatalf("%s: %d objects held, want %d", st.name, s.Len(), st.n)
		}
		evs := drain(sub)
		if st.changed != (len(evs) == 1) || len(evs) > 1 {
			t.Fatalf("%s: the subscription got %d events, want 1 for a change and 0 otherwise", st.name, len(evs))
		}
		if len(evs) == 1 && evs[0].Revision != want {
			t.Fatalf("%s: the event is at revision %d, want %d", st.name, evs[0].Revision, want)
		}
	}
	if s.Count(watchstream.KindKey(services)) != 0 || s.Count(watchstream.KindKey(secrets)) != 1 || s.Count("/v1/Unknown") != 0 {
		t.Fatalf("counts: %d Services, %d Secrets, want 0 and 1", s.Count(watchstream.KindKey(services)), s.Count(watchstream.KindKey(secrets)))
	}
}

// An object of a kind the store was not configured with is refused, naming the object, and
// is no change: the store holds exactly the configured kinds, which the marker's inventory
// covers.
func TestUpsertOfAKindNotConfiguredIsRefusedNamingTheObject(t *testing.T) {
	s := newStore(t, Config{})
	ing := &watchv1.Object{Kind: &watchv1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, Namespace: "ns", Name: "web", ResourceVersion: "1"}
	changed, err := s.Upsert(ing)
	if err == nil || changed {
		t.Fatalf("Upsert of an Ingress into a store of Services and Secrets: changed %v, error %v; want an error", changed, err)
	}
	if !strings.Contains(err.Error(), "networking.k8s.io/v1/Ingress ns/web") {
		t.Fatalf("the error %q does not name the object", err)
	}
	if s.Revision() != 0 || s.Len() != 0 {
		t.Fatalf("after a refused Upsert: revision %d, %d objects; want 0 and 0", s.Revision(), s.Len())
	}
}

// A delete event carries the object's last stored state (its resourceVersion included),
// not what the caller passed (an informer's tombstone may hold only the key or an older
// state): a receiver's inventory is of the resourceVersions it held.
func TestDeleteCarriesTheLastStoredState(t *testing.T) {
	s := newStore(t, Config{})
	upsert(t, s, object(services, 1, "1"))
	upsert(t, s, object(services, 1, "7"))
	sub, err := s.Subscribe(Request{})
	if err != nil {
		t.Fatal(err)
	}
	s.Delete(&watchv1.Object{Kind: services, Namespace: "ns", Name: object(services, 1, "").GetName(), ResourceVersion: "3"})
	evs := drain(sub)
	if len(evs) != 1 || evs[0].Type != EventDelete || !proto.Equal(evs[0].Object, object(services, 1, "7")) {
		t.Fatalf("events after the delete: %v, want one delete carrying resourceVersion 7", evs)
	}
}

// docs/design.md: every stream begins with a snapshot consistent at one revision, and the
// changes after it follow in store order. A subscription's snapshot plus its events, applied
// in order, is exactly the store; the events' revisions are the next ones, without a gap.
func TestSubscriptionIsItsSnapshotThenEveryLaterChangeInOrder(t *testing.T) {
	s := newStore(t, Config{})
	for i := range 5 {
		upsert(t, s, object(services, i, "1"))
	}
	sub, err := s.Subscribe(Request{})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Resumed || sub.Revision != 5 || sub.Replay != nil || sub.Epoch != "e1" {
		t.Fatalf("a new subscription: resumed %v, revision %d, replay %v, epoch %q; want a snapshot at revision 5 of e1", sub.Resumed, sub.Revision, sub.Replay, sub.Epoch)
	}
	upsert(t, s, object(secrets, 1, "1"))
	s.Delete(object(services, 0, ""))
	upsert(t, s, object(services, 1, "2"))
	upsert(t, s, object(services, 9, "1"))
	s.Delete(object(services, 9, ""))

	held := map[watchstream.ObjectKey]*watchv1.Object{}
	for _, o := range sub.Snapshot() {
		held[watchstream.KeyOf(o)] = o
	}
	if len(held) != 5 {
		t.Fatalf("the snapshot holds %d objects, want the 5 of its revision", len(held))
	}
	next := sub.Revision + 1
	var got []string
	for _, ev := range drain(sub) {
		if ev.Revision != next {
			t.Fatalf("event at revision %d, want %d: no gap and no reorder", ev.Revision, next)
		}
		next++
		got = append(got, describe(ev))
		switch ev.Type {
		case EventUpsert:
			held[watchstream.KeyOf(ev.Object)] = ev.Object
		case EventDelete:
			delete(held, watchstream.KeyOf(ev.Object))
		}
	}
	want := []string{"6 upsert Secret/o00001@1", "7 delete Service/o00000@1", "8 upsert Service/o00001@2", "9 upsert Service/o00009@1", "10 delete Service/o00009@1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	now, err := s.Subscribe(Request{})
	if err != nil {
		t.Fatal(err)
	}
	snap := now.Snapshot()
	if len(snap) != len(held) {
		t.Fatalf("the snapshot plus the events hold %d objects, the store %d", len(held), len(snap))
	}
	for _, o := range snap {
		if !proto.Equal(held[watchstream.KeyOf(o)], o) {
			t.Fatalf("the snapshot plus the events hold %v for %s, the store %v", held[watchstream.KeyOf(o)], watchstream.KeyOf(o), o)
		}
	}
}

// docs/design.md: InitialSyncComplete comes exactly once, at the exact position where the
// store became complete: the barrier is a change of its own. A subscriber that joined
// before sees it among its events, after every change before it and before every change
// after it, with the inventory at that revision; one that joins after has it at its start
// (SyncedAtStart) with its start inventory. Opening it again changes nothing.
func TestBarrierIsAChangeAtTheExactPositionTheStoreBecameComplete(t *testing.T) {
	s := newStore(t, Config{})
	upsert(t, s, object(services, 1, "1"))
	early, err := s.Subscribe(Request{})
	if err != nil {
		t.Fatal(err)
	}
	if early.SyncedAtStart || s.Synced() {
		t.Fatal("a subscription before the barrier is synced at start")
	}
	upsert(t, s, object(secrets, 1, "1"))
	invAtBarrier := s.Inventory(nil)
	s.MarkSynced()
	s.MarkSynced() // once only
	upsert(t, s, object(services, 2, "1"))

	evs := drain(early)
	var got []string
	for _, ev := range evs {
		got = append(got, describe(ev))
	}
	want := []string{"2 upsert Secret/o00001@1", "3 synced", "4 upsert Service/o00002@1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events of a subscription from before the barrier: %v, want %v", got, want)
	}
	if inv := evs[1].Inventory; len(inv) != 2 || !proto.Equal(inv[0], invAtBarrier[0]) || !proto.Equal(inv[1], invAtBarrier[1]) {
		t.Fatalf("the barrier's inventory %v is not the store's at its revision %v", inv, invAtBarrier)
	}
	if inv := evs[1].Inventory; inv[0].GetCount() != 1 || inv[1].GetCount() != 1 {
		t.Fatalf("the barrier's inventory counts %d Services and %d Secrets, want 1 and 1", inv[0].GetCount(), inv[1].GetCount())
	}

	late, err := s.Subscribe(Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !late.SyncedAtStart {
		t.Fatal("a subscription after the barrier is not synced at start")
	}
	if inv := late.StartInventory(); inv[0].GetCount() != 2 || !proto.Equal(inv[0], s.Inventory(nil)[0]) {
		t.Fatalf("the start inventory of a subscription after the barrier is %v, want the store's now", inv)
	}
	if n := len(drain(late)); n != 0 {
		t.Fatalf("a subscription after the barrier got %d events without a change, want none (its marker is at its start)", n)
	}
}

// docs/design.md: a resume within the epoch, when the watcher still holds the history,
// gets the changes since (ResumeStart), else a fresh snapshot. The marker is in the replay
// when the barrier opened after the resumed revision, else it is due right at the start.
func TestResumeReplaysTheHistoryOrFallsBackToASnapshot(t *testing.T) {
	// History of 4: revisions 1..3 upserts, 4 the barrier, 5..7 upserts; 4..7 are held.
	s := newStore(t, Config{HistorySize: 4})
	for i := 1; i <= 3; i++ {
		upsert(t, s, object(services, i, "1"))
	}
	s.MarkSynced()
	for i := 4; i <= 6; i++ {
		upsert(t, s, object(services, i, "1"))
	}
	for _, tc := range []struct {
		name   string
		req    Request
		resume bool
		replay []string
		synced bool
	}{
		{"another epoch", Request{ResumeEpoch: "e0", ResumeRevision: 5}, false, nil, true},
		{"no epoch", Request{ResumeRevision: 5}, false, nil, true},
		{"ahead of the store", Request{ResumeEpoch: "e1", ResumeRevision: 8}, false, nil, true},
		{"older than the history", Request{ResumeEpoch: "e1", ResumeRevision: 2}, false, nil, true},
		{"the oldest revision the history continues", Request{ResumeEpoch: "e1", ResumeRevision: 3}, true,
			[]string{"4 synced", "5 upsert Service/o00004@1", "6 upsert Service/o00005@1", "7 upsert Service/o00006@1"}, false},
		{"after the barrier", Request{ResumeEpoch: "e1", ResumeRevision: 5}, true,
			[]string{"6 upsert Service/o00005@1", "7 upsert Service/o00006@1"}, true},
		{"at the store's revision", Request{ResumeEpoch: "e1", ResumeRevision: 7}, true, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := s.Subscribe(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Unsubscribe(sub)
			if sub.Resumed != tc.resume {
				t.Fatalf("resumed %v, want %v", sub.Resumed, tc.resume)
			}
			if sub.Revision != 7 {
				t.Fatalf("the start is at revision %d, want the store's, 7", sub.Revision)
			}
			var got []string
			for _, ev := range sub.Replay {
				got = append(got, describe(ev))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.replay) {
				t.Fatalf("replay %v, want %v", got, tc.replay)
			}
			if sub.SyncedAtStart != tc.synced {
				t.Fatalf("synced at start %v, want %v", sub.SyncedAtStart, tc.synced)
			}
			if snap := sub.Snapshot(); tc.resume && snap != nil || !tc.resume && len(snap) != 6 {
				t.Fatalf("snapshot of %d objects, want none for a resume and 6 otherwise", len(snap))
			}
		})
	}
}

// Bounded buffers (docs/design.md, "Cold start"): before the barrier no subscriber is dropped
// however far behind it is, since it must receive the whole initial list anyway and a
// reconnect would only start it again from a larger snapshot. After the barrier a subscriber
// that lags more than SubscriberBuffer changes behind what came after it is dropped with
// ErrSlowSubscriber (its client reconnects for a fresh snapshot) and gets nothing more; the
// owner never blocks on it, and a subscriber that keeps up is unaffected.
func TestSubscriberThatLagsPastItsBufferIsDroppedOthersAreNot(t *testing.T) {
	const buffer, initial = 3, 10
	for _, tc := range []struct {
		name string
		// joinAfterBarrier subscribes slow once the barrier opened (no allowance); else it
		// subscribes at the start and reads nothing of the initial list.
		joinAfterBarrier bool
		// takeAtBarrier is how much of its backlog slow takes right after the barrier.
		takeAtBarrier bool
		// afterBarrier is how many changes after the barrier slow may lag (the marker is
		// one) before one more drops it.
		afterBarrier int
	}{
		{name: "joined before the barrier, never reading", afterBarrier: buffer},
		{name: "joined before the barrier, caught up at the barrier", takeAtBarrier: true, afterBarrier: buffer},
		{name: "joined after the barrier", joinAfterBarrier: true, afterBarrier: buffer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Config{SubscriberBuffer: buffer})
			fast, err := s.Subscribe(Request{})
			if err != nil {
				t.Fatal(err)
			}
			var slow *Subscription
			if !tc.joinAfterBarrier {
				if slow, err = s.Subscribe(Request{}); err != nil {
					t.Fatal(err)
				}
			}
			n := 0
			change := func() {
				t.Helper()
				upsert(t, s, object(services, n, "1"))
				n++
				if got := len(drain(fast)); got != 1 {
					t.Fatalf("the reading subscriber got %d events for one change", got)
				}
			}
			for range initial {
				change()
			}
			if slow != nil {
				select {
				case <-slow.Done():
					t.Fatalf("a subscriber %d changes behind before the barrier, with a buffer of %d, was dropped", initial, buffer)
				default:
				}
			}
			s.MarkSynced()
			drain(fast)
			lag := 1 // the marker
			switch {
			case tc.joinAfterBarrier:
				if slow, err = s.Subscribe(Request{}); err != nil {
					t.Fatal(err)
				}
				lag = 0
			case tc.takeAtBarrier:
				if got := len(drain(slow)); got != initial+1 {
					t.Fatalf("slow took %d events at the barrier, want the %d changes and the marker", got, initial)
				}
				lag = 0
			}
			for lag < tc.afterBarrier {
				change()
				lag++
			}
			select {
			case <-slow.Done():
				t.Fatalf("a subscriber %d changes behind after the barrier, with a buffer of %d, was dropped", lag, buffer)
			default:
			}
			change() // one more than the buffer holds
			select {
			case <-slow.Done():
			default:
				t.Fatalf("a subscriber %d changes behind after the barrier, with a buffer of %d, was not dropped", lag+1, buffer)
			}
			if !errors.Is(slow.Err(), ErrSlowSubscriber) {
				t.Fatalf("the slow subscriber ended with %v, want ErrSlowSubscriber", slow.Err())
			}
			change()
			held := len(drain(slow))
			want := buffer
			if !tc.joinAfterBarrier && !tc.takeAtBarrier {
				want += initial
			}
			if held != want {
				t.Fatalf("the dropped subscriber holds %d events, want the %d it had queued and nothing after", held, want)
			}
			if s.Subscribers() != 1 {
				t.Fatalf("%d live subscriptions, want the reading one only", s.Subscribers())
			}
		})
	}
}

// docs/design.md, scenario 11: when the set of served kinds changes, every stream of the old
// epoch ends and nothing of it is sent afterwards. Close(ErrEpochEnded) ends every
// subscription at once, with that error, before it returns (so a stream that takes a
// buffered change sees Done first); changes after it reach no one. Unsubscribe ends one
// without an error, once.
func TestEndedEpochEndsEverySubscriptionAndSendsNothingMore(t *testing.T) {
	s := newStore(t, Config{})
	upsert(t, s, object(services, 1, "1"))
	var subs []*Subscription
	for range 3 {
		sub, err := s.Subscribe(Request{})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	s.Unsubscribe(subs[2])
	s.Unsubscribe(subs[2])
	upsert(t, s, object(services, 2, "1")) // buffered for the two live ones
	s.Close(ErrEpochEnded)
	for i, sub := range subs[:2] {
		select {
		case <-sub.Done():
		default:
			t.Fatalf("subscription %d is not done when Close returned", i)
		}
		if !errors.Is(sub.Err(), ErrEpochEnded) {
			t.Fatalf("subscription %d ended with %v, want ErrEpochEnded", i, sub.Err())
		}
	}
	if err := subs[2].Err(); err != nil {
		t.Fatalf("an unsubscribed subscription ended with %v, want no error", err)
	}
	upsert(t, s, object(services, 3, "1"))
	s.MarkSynced()
	for i, sub := range subs {
		if n := len(drain(sub)); i < 2 && n != 1 || i == 2 && n != 0 {
			t.Fatalf("subscription %d holds %d events; changes after its end reached it", i, n)
		}
	}
	if s.Subscribers() != 0 {
		t.Fatalf("%d subscriptions live after Close", s.Subscribers())
	}
}

// A subscription for a kind the watcher does not serve is refused with ErrUnknownKind,
// naming the kind; one for a subset carries those kinds, in stream order.
func TestSubscriptionToAKindNotServedIsRefused(t *testing.T) {
	s := newStore(t, Config{})
	ing := &watchv1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
	_, err := s.Subscribe(Request{Kinds: []*watchv1.GroupVersionKind{services, ing}})
	if !errors.Is(err, ErrUnknownKind) || !strings.Contains(err.Error(), "networking.k8s.io/v1/Ingress") {
		t.Fatalf("a subscription for Ingresses: %v, want ErrUnknownKind naming the kind", err)
	}
	if s.Subscribers() != 0 {
		t.Fatal("a refused subscription was kept")
	}
	sub, err := s.Subscribe(Request{Kinds: []*watchv1.GroupVersionKind{secrets, services}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.Kinds) != 2 || sub.Kinds[0] != services || sub.Kinds[1] != secrets || !sub.Carries(watchstream.KindKey(secrets)) {
		t.Fatalf("subscription kinds %v, want Services then Secrets (stream order)", sub.Kinds)
	}
}

// A store needs kinds; every store without an epoch gets a fresh one, so that a restarted
// watcher is never mistaken for the old one by a resuming client.
func TestNewRequiresKindsAndGivesEveryStoreItsOwnEpoch(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("a store without kinds was made")
	}
	a, b := newStoreNoEpoch(t), newStoreNoEpoch(t)
	if a.Epoch() == "" || a.Epoch() == b.Epoch() {
		t.Fatalf("epochs %q and %q: want two distinct, non-empty ones", a.Epoch(), b.Epoch())
	}
	if _, ok := a.replay(Request{ResumeEpoch: b.Epoch()}); ok {
		t.Fatal("a store resumes a request of another store's epoch")
	}
}

func newStoreNoEpoch(t *testing.T) *Store {
	t.Helper()
	s, err := New(Config{Kinds: []*watchv1.GroupVersionKind{services}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
