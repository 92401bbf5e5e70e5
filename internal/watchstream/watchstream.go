// Package watchstream holds what both ends of the watch stream must agree on: the identity of
// kinds and objects, the inventory digest of InitialSyncComplete, and the Mirror, which
// applies a stream's events to a local copy of the watcher's store while checking framing,
// epoch, revision continuity and the marker's inventory. The watcher's tests, sluicectl and
// the translator all follow a stream through a Mirror. A Mirror keeps of each object only
// its identity and resourceVersion (what the inventory digests) and one value its client
// attaches, so that a client holding decoded objects holds them in one map.
package watchstream

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"unique"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// KindKey is the canonical name of a kind: "group/version/Kind" ("/v1/Service" for core).
func KindKey(k *watchv1.GroupVersionKind) string {
	return k.GetGroup() + "/" + k.GetVersion() + "/" + k.GetKind()
}

// ObjectKey identifies an object within a stream.
type ObjectKey struct {
	Kind      string // KindKey
	Namespace string
	Name      string
}

func (k ObjectKey) String() string {
	if k.Namespace == "" {
		return k.Kind + " " + k.Name
	}
	return k.Kind + " " + k.Namespace + "/" + k.Name
}

// KeyOf returns the key of an object.
func KeyOf(o *watchv1.Object) ObjectKey {
	return ObjectKey{Kind: KindKey(o.GetKind()), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// InventoryOf computes one kind's inventory over objs (all of that kind): the count and the
// SHA-256 of the sorted lines "namespace/name/resourceVersion\n".
func InventoryOf(kind *watchv1.GroupVersionKind, objs []*watchv1.Object) *watchv1.KindInventory {
	lines := make([]string, len(objs))
	for i, o := range objs {
		lines[i] = inventoryLine(o.GetNamespace(), o.GetName(), o.GetResourceVersion())
	}
	return inventoryOfLines(kind, lines)
}

func inventoryLine(namespace, name, rv string) string {
	return namespace + "/" + name + "/" + rv + "\n"
}

func inventoryOfLines(kind *watchv1.GroupVersionKind, lines []string) *watchv1.KindInventory {
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
	}
	return &watchv1.KindInventory{Kind: kind, Count: uint64(len(lines)), Digest: h.Sum(nil)}
}

// Errors a Mirror reports. Every one of them means the stream must be dropped and a new one
// started with a fresh snapshot.
var (
	// ErrProtocol is a malformed or out-of-place message.
	ErrProtocol = errors.New("watch stream protocol violation")
	// ErrGap is a revision that is not the next one: a lost or reordered event.
	ErrGap = errors.New("watch stream revision gap")
	// ErrEpoch is an epoch change within a stream.
	ErrEpoch = errors.New("watch stream epoch changed")
	// ErrInventory is a marker whose inventory does not match the objects received.
	ErrInventory = errors.New("watch stream inventory mismatch")
)

// Change is what one applied event did.
type Change int

// Changes.
const (
	ChangeNone     Change = iota // heartbeat, progress, snapshot framing
	ChangeReset                  // a snapshot started: every object was dropped
	ChangeObject                 // an object was upserted or deleted
	ChangeSnapshot               // a snapshot ended: the objects are those of the snapshot
	ChangeSynced                 // the stream's InitialSyncComplete arrived and verified
)

// maxCountHint bounds the capacity reserved from a count a peer announced.
const maxCountHint = 4096

type phase int

const (
	phaseStart    phase = iota // nothing received on this stream yet
	phaseSnapshot              // between SnapshotStart and SnapshotEnd
	phaseLive                  // deltas
)

// Mirror is a client's copy of the watcher's store, built from one stream at a time. It is
// not safe for concurrent use.
type Mirror struct {
	epoch    string
	revision uint64
	kinds    []*watchv1.GroupVersionKind
	// kindSet maps each KindKey of the stream to itself: keys held share one string per kind.
	kindSet   map[string]string
	objects   map[ObjectKey]held
	phase     phase
	remaining uint64
	marker    bool // InitialSyncComplete seen on the current stream
	synced    bool // the objects are known complete (a marker was verified in this epoch)
}

// held is what a Mirror keeps of one object: the resourceVersion the inventory digests, and
// the client's value (Attach).
type held struct {
	rv  string
	val any
}

// NewMirror returns an empty mirror.
func NewMirror() *Mirror {
	return &Mirror{objects: map[ObjectKey]held{}}
}

// StartStream prepares for a new stream; the objects are kept for a resume.
func (m *Mirror) StartStream() {
	m.phase = phaseStart
	m.marker = false
}

// Epoch and Revision are the position of the mirror in the watcher's history.
func (m *Mirror) Epoch() string    { return m.epoch }
func (m *Mirror) Revision() uint64 { return m.revision }

// Synced reports whether the objects are complete: the marker of this epoch was verified.
func (m *Mirror) Synced() bool { return m.synced }

// Kinds are the kinds of the current stream.
func (m *Mirror) Kinds() []*watchv1.GroupVersionKind { return m.kinds }

// Len is the number of objects held.
func (m *Mirror) Len() int { return len(m.objects) }

// ResourceVersion returns the resourceVersion of the object held under k.
func (m *Mirror) ResourceVersion(k ObjectKey) (string, bool) {
	h, ok := m.objects[k]
	return h.rv, ok
}

// Value returns what the client attached to the object held under k (nil if nothing).
func (m *Mirror) Value(k ObjectKey) any { return m.objects[k].val }

// Attach keeps v with the object held under k, until the object is replaced or deleted; it
// reports whether k is held.
func (m *Mirror) Attach(k ObjectKey, v any) bool {
	h, ok := m.objects[k]
	if ok {
		h.val = v
		// Assigning to a key held replaces the key's strings as well: k's own would undo the
		// sharing put gave the entry.
		m.objects[m.intern(k)] = h
	}
	return ok
}

// ApplyKeeping is Apply for a client that wants the objects themselves (a test, a printer):
// each upserted object is attached to its entry, for Object and Objects.
func (m *Mirror) ApplyKeeping(ev *watchv1.WatchResponse) (Change, error) {
	c, err := m.Apply(ev)
	if u := ev.GetUpsert(); err == nil && u != nil {
		m.Attach(KeyOf(u.GetObject()), u.GetObject())
	}
	return c, err
}

// Object returns the object held under k, as ApplyKeeping attached it (nil otherwise).
func (m *Mirror) Object(k ObjectKey) *watchv1.Object {
	o, _ := m.Value(k).(*watchv1.Object)
	return o
}

// Objects returns the objects ApplyKeeping attached, sorted by key.
func (m *Mirror) Objects() []*watchv1.Object {
	var out []*watchv1.Object
	for _, k := range m.Keys() {
		if o := m.Object(k); o != nil {
			out = append(out, o)
		}
	}
	return out
}

// Keys returns the keys of the objects held, sorted.
func (m *Mirror) Keys() []ObjectKey {
	out := make([]ObjectKey, 0, len(m.objects))
	for k := range m.objects {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return lessKey(out[i], out[j]) })
	return out
}

func lessKey(a, b ObjectKey) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// Apply applies one event. An error means the stream (and, for ErrEpoch and ErrInventory, the
// mirror's content) cannot be trusted: the caller drops the stream and starts over.
func (m *Mirror) Apply(ev *watchv1.WatchResponse) (Change, error) {
	if ev.GetEpoch() == "" {
		return ChangeNone, fmt.Errorf("%w: event without epoch", ErrProtocol)
	}
	switch e := ev.GetEvent().(type) {
	case *watchv1.WatchResponse_SnapshotStart:
		if m.phase != phaseStart {
			return ChangeNone, fmt.Errorf("%w: SnapshotStart in the middle of a stream", ErrProtocol)
		}
		if len(e.SnapshotStart.GetKinds()) == 0 {
			return ChangeNone, fmt.Errorf("%w: SnapshotStart without kinds", ErrProtocol)
		}
		if m.epoch != ev.GetEpoch() {
			m.synced = false
		}
		m.epoch, m.revision = ev.GetEpoch(), ev.GetRevision()
		m.setKinds(e.SnapshotStart.GetKinds())
		// The count is the peer's word, not a size to allocate: a lying or broken watcher
		// could claim 2^64 objects. It is only a hint, bounded; the map grows as objects come.
		m.objects = make(map[ObjectKey]held, min(e.SnapshotStart.GetCount(), maxCountHint))
		m.remaining = e.SnapshotStart.GetCount()
		m.phase = phaseSnapshot
		return ChangeReset, nil
	case *watchv1.WatchResponse_ResumeStart:
		if m.phase != phaseStart {
			return ChangeNone, fmt.Errorf("%w: ResumeStart in the middle of a stream", ErrProtocol)
		}
		if ev.GetEpoch() != m.epoch || e.ResumeStart.GetFromRevision() != m.revision || ev.GetRevision() != m.revision {
			return ChangeNone, fmt.Errorf("%w: resume at %s/%d, but the mirror is at %s/%d", ErrProtocol,
				ev.GetEpoch(), e.ResumeStart.GetFromRevision(), m.epoch, m.revision)
		}
		m.phase = phaseLive
		return ChangeNone, nil
	}
	if m.phase == phaseStart {
		return ChangeNone, fmt.Errorf("%w: %T before SnapshotStart or ResumeStart", ErrProtocol, ev.GetEvent())
	}
	if ev.GetEpoch() != m.epoch {
		return ChangeNone, fmt.Errorf("%w: from %s to %s", ErrEpoch, m.epoch, ev.GetEpoch())
	}
	if m.phase == phaseSnapshot {
		if ev.GetRevision() != m.revision {
			return ChangeNone, fmt.Errorf("%w: snapshot event at revision %d, snapshot is at %d", ErrProtocol, ev.GetRevision(), m.revision)
		}
		switch e := ev.GetEvent().(type) {
		case *watchv1.WatchResponse_Upsert:
			if m.remaining == 0 {
				return ChangeNone, fmt.Errorf("%w: more snapshot objects than SnapshotStart announced", ErrProtocol)
			}
			if err := m.put(e.Upsert.GetObject()); err != nil {
				return ChangeNone, err
			}
			m.remaining--
			return ChangeNone, nil
		case *watchv1.WatchResponse_SnapshotEnd:
			if m.remaining != 0 {
				return ChangeNone, fmt.Errorf("%w: SnapshotEnd with %d announced objects missing", ErrProtocol, m.remaining)
			}
			m.phase = phaseLive
			return ChangeSnapshot, nil
		default:
			return ChangeNone, fmt.Errorf("%w: %T inside a snapshot", ErrProtocol, ev.GetEvent())
		}
	}

	// Live deltas.
	if ev.GetRevision() < m.revision { // also the successor of the largest revision, which wraps to 0
		return ChangeNone, fmt.Errorf("%w: revision %d after %d", ErrGap, ev.GetRevision(), m.revision)
	}
	switch e := ev.GetEvent().(type) {
	case *watchv1.WatchResponse_Heartbeat:
		if ev.GetRevision() != m.revision {
			return ChangeNone, fmt.Errorf("%w: heartbeat at revision %d, last event was %d", ErrGap, ev.GetRevision(), m.revision)
		}
		return ChangeNone, nil
	case *watchv1.WatchResponse_InitialSyncComplete:
		if m.marker {
			return ChangeNone, fmt.Errorf("%w: a second InitialSyncComplete on one stream", ErrProtocol)
		}
		switch ev.GetRevision() {
		case m.revision + 1:
		case m.revision: // directly after the snapshot or the resumed deltas
		default:
			return ChangeNone, fmt.Errorf("%w: InitialSyncComplete at revision %d after %d", ErrGap, ev.GetRevision(), m.revision)
		}
		if err := m.verify(e.InitialSyncComplete); err != nil {
			return ChangeNone, err
		}
		m.revision = ev.GetRevision()
		m.marker, m.synced = true, true
		return ChangeSynced, nil
	case *watchv1.WatchResponse_Upsert, *watchv1.WatchResponse_Delete, *watchv1.WatchResponse_Progress:
		if ev.GetRevision() != m.revision+1 {
			return ChangeNone, fmt.Errorf("%w: revision %d after %d", ErrGap, ev.GetRevision(), m.revision)
		}
	default:
		return ChangeNone, fmt.Errorf("%w: unexpected %T", ErrProtocol, ev.GetEvent())
	}
	m.revision = ev.GetRevision()
	switch e := ev.GetEvent().(type) {
	case *watchv1.WatchResponse_Upsert:
		return ChangeObject, m.put(e.Upsert.GetObject())
	case *watchv1.WatchResponse_Delete:
		o := e.Delete.GetObject()
		k := KeyOf(o)
		if _, ok := m.objects[k]; !ok {
			return ChangeNone, fmt.Errorf("%w: delete of %s, which the stream never sent", ErrProtocol, k)
		}
		delete(m.objects, k)
		return ChangeObject, nil
	}
	return ChangeNone, nil // Progress
}

func (m *Mirror) setKinds(kinds []*watchv1.GroupVersionKind) {
	m.kinds = kinds
	m.kindSet = make(map[string]string, len(kinds))
	for _, k := range kinds {
		kk := KindKey(k)
		m.kindSet[kk] = kk
	}
}

func (m *Mirror) put(o *watchv1.Object) error {
	if o == nil || o.GetName() == "" || o.GetKind() == nil {
		return fmt.Errorf("%w: upsert without an object, kind or name", ErrProtocol)
	}
	k := KeyOf(o)
	if _, ok := m.kindSet[k.Kind]; !ok {
		return fmt.Errorf("%w: object %s of a kind the stream does not carry", ErrProtocol, k)
	}
	m.objects[m.intern(k)] = held{rv: o.GetResourceVersion()}
	return nil
}

// intern returns k with the strings its entry shares: one per kind of the stream and one per
// namespace, not one per object (each message has its own copies).
func (m *Mirror) intern(k ObjectKey) ObjectKey {
	if kind, ok := m.kindSet[k.Kind]; ok {
		k.Kind = kind
	}
	k.Namespace = unique.Make(k.Namespace).Value()
	return k
}

// verify checks a marker's inventory against the objects held.
func (m *Mirror) verify(marker *watchv1.InitialSyncComplete) error {
	byKind := map[string][]string{}
	for k, h := range m.objects {
		byKind[k.Kind] = append(byKind[k.Kind], inventoryLine(k.Namespace, k.Name, h.rv))
	}
	inv := marker.GetInventory()
	if len(inv) != len(m.kinds) {
		return fmt.Errorf("%w: inventory has %d kinds, the stream carries %d", ErrInventory, len(inv), len(m.kinds))
	}
	seen := make(map[string]bool, len(inv))
	for _, want := range inv {
		kk := KindKey(want.GetKind())
		if _, ok := m.kindSet[kk]; !ok {
			return fmt.Errorf("%w: inventory names kind %s, which the stream does not carry", ErrInventory, kk)
		}
		// With as many entries as kinds, a kind named twice means another is left out:
		// that one would never be verified.
		if seen[kk] {
			return fmt.Errorf("%w: inventory names kind %s twice", ErrInventory, kk)
		}
		seen[kk] = true
		got := inventoryOfLines(want.GetKind(), byKind[kk])
		if got.GetCount() != want.GetCount() || !bytes.Equal(got.GetDigest(), want.GetDigest()) {
			return fmt.Errorf("%w: kind %s: holding %d objects (digest %x), watcher has %d (digest %x)",
				ErrInventory, kk, got.GetCount(), got.GetDigest()[:6], want.GetCount(), safePrefix(want.GetDigest()))
		}
	}
	return nil
}

func safePrefix(b []byte) []byte {
	if len(b) > 6 {
		return b[:6]
	}
	return b
}
