// Package store owns the watcher's ordered view of the cluster: every change gets the next
// revision of the process's epoch, a bounded history of changes serves resumes, and
// subscriptions see a snapshot at one revision followed by every later change in order. The
// store is not safe for concurrent use: one goroutine (the watcher's controller) owns it.
package store

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/fifo"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// EventType is the type of a store change.
type EventType int

// Event types.
const (
	EventUpsert EventType = iota + 1
	EventDelete
	// EventSynced is the store becoming complete: the barrier opened.
	EventSynced
)

// Event is one change of the store.
type Event struct {
	Revision uint64
	Type     EventType
	// Object is the upserted object, or the last state of the deleted one.
	Object *watchv1.Object
	// Inventory is set on EventSynced: every kind's inventory at this revision.
	Inventory []*watchv1.KindInventory
}

// Config configures a Store.
type Config struct {
	// Epoch names this lifetime of the store; a random one when empty.
	Epoch string
	// Kinds are the kinds the store holds, in stream order.
	Kinds []*watchv1.GroupVersionKind
	// HistorySize is how many changes are kept for resumes.
	HistorySize int
	// SubscriberBuffer is how many changes made after the barrier opened a subscriber may
	// lag behind before it is dropped. Before the barrier nobody is dropped: a subscriber
	// must receive the whole initial list whatever its pace, and dropping it would only
	// make it start again from a larger snapshot (docs/design.md, "Cold start").
	SubscriberBuffer int
}

// Store is the ordered object store.
type Store struct {
	epoch    string
	kinds    []*watchv1.GroupVersionKind
	kindSet  map[string]int // KindKey -> index in kinds
	kindKeys []string       // KindKey by index: one string per kind, shared by every key
	objects  objectSet
	counts   []int
	revision uint64
	synced   bool
	// syncedRev is the revision of the EventSynced change.
	syncedRev uint64

	history    []Event // ring buffer
	histStart  int     // index of the oldest event
	histLen    int
	bufferSize int
	subs       map[*Subscription]struct{}
}

type watchv1Key = watchstream.ObjectKey

// NewEpoch returns a fresh, random epoch name: the start time and 8 random bytes.
func NewEpoch() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("store: random epoch: %v", err))
	}
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// New returns an empty store at revision 0.
func New(cfg Config) (*Store, error) {
	if len(cfg.Kinds) == 0 {
		return nil, errors.New("store: no kinds")
	}
	if cfg.HistorySize <= 0 {
		cfg.HistorySize = 16384
	}
	if cfg.SubscriberBuffer <= 0 {
		cfg.SubscriberBuffer = 16384
	}
	if cfg.Epoch == "" {
		cfg.Epoch = NewEpoch()
	}
	s := &Store{
		epoch:      cfg.Epoch,
		kinds:      cfg.Kinds,
		kindSet:    make(map[string]int, len(cfg.Kinds)),
		counts:     make([]int, len(cfg.Kinds)),
		history:    make([]Event, cfg.HistorySize),
		bufferSize: cfg.SubscriberBuffer,
		subs:       map[*Subscription]struct{}{},
	}
	for i, k := range cfg.Kinds {
		s.kindSet[watchstream.KindKey(k)] = i
		s.kindKeys = append(s.kindKeys, watchstream.KindKey(k))
	}
	return s, nil
}

// Epoch is the store's epoch.
func (s *Store) Epoch() string { return s.epoch }

// Revision is the revision of the last change.
func (s *Store) Revision() uint64 { return s.revision }

// Synced reports whether the barrier opened.
func (s *Store) Synced() bool { return s.synced }

// Kinds are the store's kinds.
func (s *Store) Kinds() []*watchv1.GroupVersionKind { return s.kinds }

// Count is the number of objects of kind (by KindKey).
func (s *Store) Count(kind string) int {
	if i, ok := s.kindSet[kind]; ok {
		return s.counts[i]
	}
	return 0
}

// Len is the number of objects.
func (s *Store) Len() int { return s.objects.len() }

// Subscribers is the number of live subscriptions.
func (s *Store) Subscribers() int { return len(s.subs) }

// Upsert adds or replaces o. An object whose resourceVersion equals the stored one is not a
// change (informers redeliver unchanged objects on relist) and gets no revision.
func (s *Store) Upsert(o *watchv1.Object) (bool, error) {
	k := watchstream.KeyOf(o)
	i, ok := s.kindSet[k.Kind]
	if !ok {
		return false, fmt.Errorf("store: object %s of an unknown kind", k)
	}
	k.Kind = s.kindKeys[i] // the key the store keeps shares its kind's string
	old, had := s.objects.get(k)
	if had && old.GetResourceVersion() == o.GetResourceVersion() && old.GetUid() == o.GetUid() {
		return false, nil
	}
	if !had {
		s.counts[i]++
	}
	s.objects.put(k, o)
	s.append(Event{Type: EventUpsert, Object: o})
	return true, nil
}

// Delete removes the object with o's key; deleting an object the store does not hold is no
// change.
func (s *Store) Delete(o *watchv1.Object) bool {
	k := watchstream.KeyOf(o)
	old, had := s.objects.get(k)
	if !had {
		return false
	}
	s.objects.del(k)
	s.counts[s.kindSet[k.Kind]]--
	s.append(Event{Type: EventDelete, Object: old})
	return true
}

// MarkSynced records that the store became complete, with every kind's inventory. It is a
// change of its own, so that subscribers that joined before it see it at exactly this point.
func (s *Store) MarkSynced() {
	if s.synced {
		return
	}
	s.synced = true
	s.syncedRev = s.revision + 1 // the EventSynced change's, known before append bounds by it
	s.append(Event{Type: EventSynced, Inventory: s.Inventory(nil)})
}

// Inventory returns the inventory of the given kinds (all when nil), in stream order.
func (s *Store) Inventory(kinds map[string]bool) []*watchv1.KindInventory {
	return inventory(&s.objects.shards, s.kinds, s.kindSet, kinds) // read by the owner: nothing to share
}

// inventory is the inventory of the given kinds (all when nil) of objs, in stream order.
func inventory(objs *objectShards, all []*watchv1.GroupVersionKind, kindSet map[string]int, kinds map[string]bool) []*watchv1.KindInventory {
	byKind := make([][]*watchv1.Object, len(all))
	objs.each(func(k watchv1Key, o *watchv1.Object) {
		byKind[kindSet[k.Kind]] = append(byKind[kindSet[k.Kind]], o)
	})
	var out []*watchv1.KindInventory
	for i, kind := range all {
		if kinds != nil && !kinds[watchstream.KindKey(kind)] {
			continue
		}
		out = append(out, watchstream.InventoryOf(kind, byKind[i]))
	}
	return out
}

func (s *Store) append(ev Event) {
	s.revision++
	ev.Revision = s.revision
	idx := (s.histStart + s.histLen) % len(s.history)
	if s.histLen == len(s.history) {
		s.histStart = (s.histStart + 1) % len(s.history)
	} else {
		s.histLen++
	}
	s.history[idx] = ev
	for sub := range s.subs {
		if !sub.queue.PushWithin(ev, s.bound(sub, ev.Revision)) {
			s.drop(sub, ErrSlowSubscriber)
		}
	}
}

// bound is how many changes sub may have waiting when the change at rev comes: no bound
// until it was sent bufferSize changes made after the barrier opened (the marker is one),
// bufferSize from then on. What was queued before the barrier, the initial list, never
// counts against it: a subscriber is dropped for falling behind what came after only.
func (s *Store) bound(sub *Subscription, rev uint64) int {
	if !s.synced {
		return -1
	}
	// Every change goes to every subscription; those after the barrier (or after a later
	// start) and before rev are the ones that count.
	if after := rev - 1 - max(sub.Revision, s.syncedRev-1); after < uint64(s.bufferSize) {
		return -1
	}
	return s.bufferSize
}

// ErrSlowSubscriber ends a subscription that fell more than SubscriberBuffer changes behind
// after the barrier opened.
var ErrSlowSubscriber = errors.New("subscriber fell too far behind")

// ErrEpochEnded ends the subscriptions of a store whose epoch is over: the set of kinds the
// watcher serves changed, and a new store (a new epoch) replaces this one.
var ErrEpochEnded = errors.New("the watcher's epoch ended: the set of served kinds changed")

// ErrUnknownKind is a subscription asking for a kind the store does not hold.
var ErrUnknownKind = errors.New("kind not served by this watcher")

// Request asks for a subscription.
type Request struct {
	// Kinds restricts the subscription (nil: all of the store's kinds).
	Kinds []*watchv1.GroupVersionKind
	// ResumeEpoch and ResumeRevision ask for the changes after that revision only.
	ResumeEpoch    string
	ResumeRevision uint64
}

// Subscription is one subscriber's view: a start (a snapshot, or the history it resumes
// with) and then every change, in order, on Events.
type Subscription struct {
	Epoch string
	// Kinds are the kinds of the subscription, in stream order; Filter holds their KindKeys
	// when the subscription carries a subset, and is nil when it carries every kind.
	Kinds  []*watchv1.GroupVersionKind
	Filter map[string]bool

	// Resumed tells which start the subscription has. A snapshot: Snapshot returns every
	// object (of the subscription's kinds) at Revision, sorted. A resume: Replay holds the
	// changes after the requested revision up to Revision.
	Resumed  bool
	Revision uint64
	Replay   []Event
	// SyncedAtStart tells whether the barrier had opened at Revision. If so, the stream's
	// marker follows the start directly, with StartInventory.
	SyncedAtStart bool

	// objects are the store's objects at Revision, shared with the store, which never
	// changes them (copy-on-write): the subscriber copies, sorts and digests them in its own
	// goroutine, not the store's owner.
	objects  *objectShards
	allKinds []*watchv1.GroupVersionKind
	kindSet  map[string]int // the store's, never changed after New

	// queue holds the changes after the start not yet taken: appended by the store's owner,
	// which bounds it (Store.bound), and taken by the subscriber.
	queue *fifo.Queue[Event]

	done chan struct{}
	err  error
}

// Ready receives when changes are waiting; one signal may stand for many. Take takes them.
func (s *Subscription) Ready() <-chan struct{} { return s.queue.Notify() }

// Take returns every change waiting, oldest first.
func (s *Subscription) Take() []Event { return s.queue.PopAll() }

// Done is closed when the store ended the subscription; Err says why.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is why the store ended the subscription (after Done).
func (s *Subscription) Err() error { return s.err }

// Carries reports whether the subscription carries objects of kind (a KindKey).
func (s *Subscription) Carries(kind string) bool { return s.Filter == nil || s.Filter[kind] }

// Snapshot returns every object of the subscription's kinds at Revision, sorted in stream
// order (nil for a resume). Each call copies and sorts: the subscriber calls it once.
func (s *Subscription) Snapshot() []*watchv1.Object {
	if s.Resumed {
		return nil
	}
	var out []*watchv1.Object
	s.objects.each(func(k watchv1Key, o *watchv1.Object) {
		if s.Carries(k.Kind) {
			out = append(out, o)
		}
	})
	sortObjects(out, s.kindSet)
	return out
}

// StartInventory is the inventory of the subscription's kinds at Revision: the marker's
// when SyncedAtStart.
func (s *Subscription) StartInventory() []*watchv1.KindInventory {
	return inventory(s.objects, s.allKinds, s.kindSet, s.Filter)
}

// Subscribe starts a subscription at the current revision.
func (s *Store) Subscribe(req Request) (*Subscription, error) {
	sub := &Subscription{Epoch: s.epoch, Kinds: s.kinds, Revision: s.revision, queue: fifo.New[Event](), done: make(chan struct{}),
		allKinds: s.kinds, kindSet: s.kindSet}
	if len(req.Kinds) > 0 {
		sub.Filter = map[string]bool{}
		for _, k := range req.Kinds {
			kk := watchstream.KindKey(k)
			if _, ok := s.kindSet[kk]; !ok {
				return nil, fmt.Errorf("%w: %s", ErrUnknownKind, kk)
			}
			sub.Filter[kk] = true
		}
		sub.Kinds = nil
		for _, k := range s.kinds {
			if sub.Filter[watchstream.KindKey(k)] {
				sub.Kinds = append(sub.Kinds, k)
			}
		}
	}
	if replay, ok := s.replay(req); ok {
		sub.Resumed, sub.Replay = true, replay
		// The marker comes in the replay when the barrier opened after the resumed revision;
		// otherwise right after the replay, with the inventory as of now.
		sub.SyncedAtStart = s.synced && s.syncedRev <= req.ResumeRevision
	} else {
		sub.SyncedAtStart = s.synced
	}
	// The objects as they are now, taken at the cost of the shard pointers: copying,
	// sorting and digesting them is the subscriber's work, in its own goroutine.
	sub.objects = s.objects.view()
	s.subs[sub] = struct{}{}
	return sub, nil
}

// replay returns the history after the requested revision, when the request resumes within
// this epoch and the history still holds every change after it.
func (s *Store) replay(req Request) ([]Event, bool) {
	if req.ResumeEpoch == "" || req.ResumeEpoch != s.epoch || req.ResumeRevision > s.revision {
		return nil, false
	}
	oldest := s.revision - uint64(s.histLen) // changes after this one are held
	if req.ResumeRevision < oldest {
		return nil, false
	}
	n := int(s.revision - req.ResumeRevision)
	out := make([]Event, 0, n)
	for i := s.histLen - n; i < s.histLen; i++ {
		out = append(out, s.history[(s.histStart+i)%len(s.history)])
	}
	return out, true
}

// Unsubscribe ends a subscription (its subscriber went away).
func (s *Store) Unsubscribe(sub *Subscription) { s.drop(sub, nil) }

// Close ends every subscription with err.
func (s *Store) Close(err error) {
	for sub := range s.subs {
		s.drop(sub, err)
	}
}

func (s *Store) drop(sub *Subscription, err error) {
	if _, ok := s.subs[sub]; !ok {
		return
	}
	delete(s.subs, sub)
	sub.err = err
	close(sub.done)
}

func sortObjects(objs []*watchv1.Object, kindIndex map[string]int) {
	// Each object's kind index is looked up once, not at every comparison: a snapshot of a
	// large cluster sorts hundreds of thousands of objects.
	type ranked struct {
		kind int
		o    *watchv1.Object
	}
	rs := make([]ranked, len(objs))
	for i, o := range objs {
		rs[i] = ranked{kindIndex[watchstream.KindKey(o.GetKind())], o}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), strings.Compare(a.o.GetNamespace(), b.o.GetNamespace()), strings.Compare(a.o.GetName(), b.o.GetName()))
	})
	for i, r := range rs {
		objs[i] = r.o
	}
}
