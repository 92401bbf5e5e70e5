package watchstream

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Unit tests of what both ends of the watch stream agree on (docs/design.md, "The watch
// stream"), beyond the fuzzer's general properties: the exact inventory digest, the exact
// effect of each event on a Mirror, and each lie it refuses, by name.

var (
	uSvc = &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}
	uIng = &watchv1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
)

func uObj(kind *watchv1.GroupVersionKind, ns, name, rv string) *watchv1.Object {
	return &watchv1.Object{Kind: kind, Namespace: ns, Name: name, ResourceVersion: rv, ContentType: ContentTypeJSON, Raw: []byte("{}")}
}

func snapshotStart(epoch string, rev, count uint64, kinds ...*watchv1.GroupVersionKind) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_SnapshotStart{SnapshotStart: &watchv1.SnapshotStart{Count: count, Kinds: kinds}}}
}

func snapshotEnd(epoch string, rev uint64) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: &watchv1.SnapshotEnd{}}}
}

func upsertEv(epoch string, rev uint64, o *watchv1.Object) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: o}}}
}

func deleteEv(epoch string, rev uint64, o *watchv1.Object) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_Delete{Delete: &watchv1.Delete{Object: o}}}
}

func markerEv(epoch string, rev uint64, inv ...*watchv1.KindInventory) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_InitialSyncComplete{InitialSyncComplete: &watchv1.InitialSyncComplete{Inventory: inv}}}
}

func heartbeatEv(epoch string, rev uint64) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_Heartbeat{Heartbeat: &watchv1.Heartbeat{}}}
}

func progressEv(epoch string, rev uint64) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_Progress{Progress: &watchv1.Progress{}}}
}

func resumeEv(epoch string, rev, from uint64) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_ResumeStart{ResumeStart: &watchv1.ResumeStart{FromRevision: from}}}
}

// holding lists a mirror's objects as "key@resourceVersion", in the mirror's order.
func holding(m *Mirror) []string {
	var out []string
	for _, k := range m.Keys() {
		rv, _ := m.ResourceVersion(k)
		out = append(out, k.String()+"@"+rv)
	}
	return out
}

// applyAll applies evs to m and fails on the first error.
func applyAll(t *testing.T, m *Mirror, evs ...*watchv1.WatchResponse) {
	t.Helper()
	for i, ev := range evs {
		if _, err := m.Apply(ev); err != nil {
			t.Fatalf("event %d (%T at %s/%d): %v", i, ev.GetEvent(), ev.GetEpoch(), ev.GetRevision(), err)
		}
	}
}

// docs/design.md: the marker's inventory per kind is the object count and a digest of the
// keys and resourceVersions: the SHA-256 of the sorted lines "namespace/name/rv\n". Both ends
// compute it alone, so it must not depend on the order objects are held in, nor on anything
// but keys and resourceVersions.
func TestInventoryDigestIsOfTheSortedKeysAndResourceVersions(t *testing.T) {
	sum := func(lines ...string) []byte {
		h := sha256.Sum256([]byte(strings.Join(lines, "")))
		return h[:]
	}
	a, b, c := uObj(uSvc, "ns", "a", "3"), uObj(uSvc, "ns", "b", "10"), uObj(uSvc, "", "c", "2")
	for _, tc := range []struct {
		name  string
		objs  []*watchv1.Object
		count uint64
		want  []byte
	}{
		{"no objects", nil, 0, sum()},
		{"one", []*watchv1.Object{a}, 1, sum("ns/a/3\n")},
		{"in order", []*watchv1.Object{c, a, b}, 3, sum("/c/2\n", "ns/a/3\n", "ns/b/10\n")},
		{"in another order", []*watchv1.Object{b, a, c}, 3, sum("/c/2\n", "ns/a/3\n", "ns/b/10\n")},
		{"other raw bytes and uid: the same", []*watchv1.Object{{Kind: uSvc, Namespace: "ns", Name: "a", ResourceVersion: "3", Uid: "x", Raw: []byte("other")}}, 1, sum("ns/a/3\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := InventoryOf(uSvc, tc.objs)
			if inv.GetKind() != uSvc || inv.GetCount() != tc.count || string(inv.GetDigest()) != string(tc.want) {
				t.Fatalf("inventory: kind %v, count %d, digest %x; want %v, %d, %x", inv.GetKind(), inv.GetCount(), inv.GetDigest(), uSvc, tc.count, tc.want)
			}
		})
	}
	if string(InventoryOf(uSvc, []*watchv1.Object{a}).GetDigest()) == string(InventoryOf(uSvc, []*watchv1.Object{uObj(uSvc, "ns", "a", "4")}).GetDigest()) {
		t.Fatal("another resourceVersion gives the same digest")
	}
}

// Kinds and objects have one canonical name on both ends: "group/version/Kind" (core kinds
// with an empty group), and keys print as "kind namespace/name" ("kind name" for
// cluster-scoped objects), as errors name them.
func TestKindAndObjectKeysAreCanonical(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{KindKey(uSvc), "/v1/Service"},
		{KindKey(uIng), "networking.k8s.io/v1/Ingress"},
		{KeyOf(uObj(uSvc, "ns", "web", "1")).String(), "/v1/Service ns/web"},
		{KeyOf(uObj(&watchv1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "IngressClass"}, "", "sluice", "1")).String(), "networking.k8s.io/v1/IngressClass sluice"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// docs/design.md: a stream is a snapshot (SnapshotStart, one upsert per object, SnapshotEnd,
// all at one revision), the marker (right after the snapshot, or later among the deltas),
// then deltas at one revision each. The Mirror applies each event to its copy: a snapshot
// replaces the objects, an upsert adds or replaces one, a delete removes one; heartbeats and
// progress change nothing but the position; it reports what each event did.
func TestMirrorAppliesSnapshotDeltasAndMarkerInOrder(t *testing.T) {
	a1, b1 := uObj(uSvc, "ns", "a", "1"), uObj(uIng, "ns", "b", "1")
	steps := []struct {
		ev     *watchv1.WatchResponse
		change Change
		rev    uint64
		synced bool
		held   []string
	}{
		{snapshotStart("e1", 5, 2, uSvc, uIng), ChangeReset, 5, false, nil},
		{upsertEv("e1", 5, b1), ChangeNone, 5, false, []string{"networking.k8s.io/v1/Ingress ns/b@1"}},
		{upsertEv("e1", 5, a1), ChangeNone, 5, false, []string{"/v1/Service ns/a@1", "networking.k8s.io/v1/Ingress ns/b@1"}},
		{snapshotEnd("e1", 5), ChangeSnapshot, 5, false, []string{"/v1/Service ns/a@1", "networking.k8s.io/v1/Ingress ns/b@1"}},
		{upsertEv("e1", 6, uObj(uSvc, "ns", "c", "6")), ChangeObject, 6, false, []string{"/v1/Service ns/a@1", "/v1/Service ns/c@6", "networking.k8s.io/v1/Ingress ns/b@1"}},
		// The barrier opened after the snapshot: the marker is the next revision.
		{markerEv("e1", 7, InventoryOf(uSvc, []*watchv1.Object{a1, uObj(uSvc, "ns", "c", "6")}), InventoryOf(uIng, []*watchv1.Object{b1})), ChangeSynced, 7, true, nil},
		{upsertEv("e1", 8, uObj(uSvc, "ns", "a", "8")), ChangeObject, 8, true, []string{"/v1/Service ns/a@8", "/v1/Service ns/c@6", "networking.k8s.io/v1/Ingress ns/b@1"}},
		{heartbeatEv("e1", 8), ChangeNone, 8, true, nil},
		{deleteEv("e1", 9, &watchv1.Object{Kind: uIng, Namespace: "ns", Name: "b"}), ChangeObject, 9, true, []string{"/v1/Service ns/a@8", "/v1/Service ns/c@6"}},
		{progressEv("e1", 10), ChangeNone, 10, true, []string{"/v1/Service ns/a@8", "/v1/Service ns/c@6"}},
	}
	m := NewMirror()
	m.StartStream()
	var last []string
	for i, st := range steps {
		change, err := m.Apply(st.ev)
		if err != nil {
			t.Fatalf("step %d (%T): %v", i, st.ev.GetEvent(), err)
		}
		if change != st.change || m.Revision() != st.rev || m.Synced() != st.synced || m.Epoch() != "e1" {
			t.Fatalf("step %d (%T): change %d, at %s/%d, synced %v; want change %d, at e1/%d, synced %v",
				i, st.ev.GetEvent(), change, m.Epoch(), m.Revision(), m.Synced(), st.change, st.rev, st.synced)
		}
		if st.held != nil {
			last = st.held
		}
		if got := holding(m); fmt.Sprint(got) != fmt.Sprint(last) || m.Len() != len(last) {
			t.Fatalf("step %d (%T): holds %v, want %v", i, st.ev.GetEvent(), got, last)
		}
	}
	if rv, ok := m.ResourceVersion(ObjectKey{Kind: "/v1/Service", Namespace: "ns", Name: "a"}); rv != "8" || !ok {
		t.Fatalf("ResourceVersion returns %q, %v, want Service ns/a at resourceVersion 8", rv, ok)
	}
}

// docs/design.md: a resume (ResumeStart at exactly where the mirror is) keeps the objects
// and the verified marker of this epoch, and the deltas continue from there; a snapshot of
// another epoch replaces the objects and the mirror is not complete again until that
// epoch's marker verified. A snapshot of the same epoch keeps it complete (the marker of
// this epoch was verified; its stream sends it again).
func TestResumeKeepsTheObjectsAndANewEpochWaitsForItsMarker(t *testing.T) {
	a1 := uObj(uSvc, "ns", "a", "1")
	m := NewMirror()
	m.StartStream()
	applyAll(t, m, snapshotStart("e1", 3, 1, uSvc), upsertEv("e1", 3, a1), snapshotEnd("e1", 3), markerEv("e1", 3, InventoryOf(uSvc, []*watchv1.Object{a1})))

	m.StartStream()
	if _, err := m.Apply(resumeEv("e1", 3, 3)); err != nil {
		t.Fatal(err)
	}
	if !m.Synced() || m.Len() != 1 {
		t.Fatalf("after a resume: synced %v, %d objects; want synced with the object kept", m.Synced(), m.Len())
	}
	applyAll(t, m, upsertEv("e1", 4, uObj(uSvc, "ns", "b", "4")))
	if fmt.Sprint(holding(m)) != "[/v1/Service ns/a@1 /v1/Service ns/b@4]" {
		t.Fatalf("after a resumed delta: %v", holding(m))
	}

	m.StartStream()
	applyAll(t, m, snapshotStart("e1", 4, 1, uSvc), upsertEv("e1", 4, a1), snapshotEnd("e1", 4))
	if !m.Synced() {
		t.Fatal("a snapshot of the epoch whose marker verified made the mirror incomplete")
	}

	m.StartStream()
	applyAll(t, m, snapshotStart("e2", 1, 0, uSvc), snapshotEnd("e2", 1))
	if m.Synced() || m.Len() != 0 || m.Epoch() != "e2" {
		t.Fatalf("after a snapshot of another epoch: synced %v, %d objects, epoch %s; want not synced, empty, e2", m.Synced(), m.Len(), m.Epoch())
	}
	applyAll(t, m, markerEv("e2", 1, InventoryOf(uSvc, nil)))
	if !m.Synced() {
		t.Fatal("the marker of the new epoch (zero objects: scenario 3) did not make the mirror complete")
	}
}

// docs/design.md, scenario 10: a lying or broken watcher (a revision gap or reorder, an
// epoch change mid-stream, a second marker, a delete of an unknown object, a marker whose
// inventory does not match, misplaced framing) is refused with one of the Mirror's errors,
// whose message names the lie (and the object or kind at fault), and the mirror is not
// complete on its word.
func TestMirrorRefusesEachLieNamingIt(t *testing.T) {
	a1 := uObj(uSvc, "ns", "a", "1")
	snap := []*watchv1.WatchResponse{snapshotStart("e1", 5, 1, uSvc, uIng), upsertEv("e1", 5, a1), snapshotEnd("e1", 5)}
	okMarker := markerEv("e1", 5, InventoryOf(uSvc, []*watchv1.Object{a1}), InventoryOf(uIng, nil))
	then := func(evs ...*watchv1.WatchResponse) []*watchv1.WatchResponse {
		return append(append([]*watchv1.WatchResponse(nil), snap...), evs...)
	}
	for _, tc := range []struct {
		name   string
		before []*watchv1.WatchResponse
		lie    *watchv1.WatchResponse
		want   error
		msg    string
	}{
		{"an event without epoch", nil, snapshotStart("", 1, 0, uSvc), ErrProtocol, "event without epoch"},
		{"a delta before the snapshot", nil, upsertEv("e1", 1, a1), ErrProtocol, "*watchv1.WatchResponse_Upsert before SnapshotStart or ResumeStart"},
		{"a snapshot without kinds", nil, snapshotStart("e1", 1, 0), ErrProtocol, "SnapshotStart without kinds"},
		{"a resume of a position the mirror is not at", nil, resumeEv("e1", 4, 4), ErrProtocol, "resume at e1/4, but the mirror is at /0"},
		{"a second snapshot start", snap[:1], snapshotStart("e1", 5, 1, uSvc), ErrProtocol, "SnapshotStart in the middle of a stream"},
		{"a snapshot object at another revision", snap[:1], upsertEv("e1", 6, a1), ErrProtocol, "snapshot event at revision 6, snapshot is at 5"},
		{"more snapshot objects than announced", snap[:2], upsertEv("e1", 5, uObj(uSvc, "ns", "b", "1")), ErrProtocol, "more snapshot objects than SnapshotStart announced"},
		{"a snapshot ending short", snap[:1], snapshotEnd("e1", 5), ErrProtocol, "SnapshotEnd with 1 announced objects missing"},
		{"a delete inside the snapshot", snap[:1], deleteEv("e1", 5, a1), ErrProtocol, "*watchv1.WatchResponse_Delete inside a snapshot"},
		{"an object of a kind the stream does not carry", snap[:1], upsertEv("e1", 5, uObj(&watchv1.GroupVersionKind{Version: "v1", Kind: "Secret"}, "ns", "s", "1")), ErrProtocol, "object /v1/Secret ns/s of a kind the stream does not carry"},
		{"an upsert without a name", snap[:1], upsertEv("e1", 5, uObj(uSvc, "ns", "", "1")), ErrProtocol, "upsert without an object, kind or name"},
		{"an epoch change mid-stream", snap, upsertEv("e2", 6, a1), ErrEpoch, "from e1 to e2"},
		{"a revision gap", snap, upsertEv("e1", 7, a1), ErrGap, "revision 7 after 5"},
		{"a revision repeated", snap, upsertEv("e1", 5, a1), ErrGap, "revision 5 after 5"},
		{"a revision going back", snap, deleteEv("e1", 4, a1), ErrGap, "revision 4 after 5"},
		{"a heartbeat at another revision", snap, heartbeatEv("e1", 6), ErrGap, "heartbeat at revision 6, last event was 5"},
		{"a delete of an unknown object", snap, deleteEv("e1", 6, uObj(uIng, "ns", "never", "")), ErrProtocol, "delete of networking.k8s.io/v1/Ingress ns/never, which the stream never sent"},
		{"a second marker", then(okMarker), markerEv("e1", 5, InventoryOf(uSvc, []*watchv1.Object{a1}), InventoryOf(uIng, nil)), ErrProtocol, "a second InitialSyncComplete on one stream"},
		{"a marker two revisions on", snap, markerEv("e1", 7, InventoryOf(uSvc, []*watchv1.Object{a1}), InventoryOf(uIng, nil)), ErrGap, "InitialSyncComplete at revision 7 after 5"},
		{"a marker with another count", snap, markerEv("e1", 5, InventoryOf(uSvc, nil), InventoryOf(uIng, nil)), ErrInventory, "kind /v1/Service: holding 1 objects"},
		{"a marker with another resourceVersion", snap, markerEv("e1", 5, InventoryOf(uSvc, []*watchv1.Object{uObj(uSvc, "ns", "a", "2")}), InventoryOf(uIng, nil)), ErrInventory, "kind /v1/Service: holding 1 objects"},
		{"a marker leaving a kind out", snap, markerEv("e1", 5, InventoryOf(uSvc, []*watchv1.Object{a1})), ErrInventory, "inventory has 1 kinds, the stream carries 2"},
		{"a marker naming a kind not carried", snap, markerEv("e1", 5, InventoryOf(uSvc, []*watchv1.Object{a1}), InventoryOf(&watchv1.GroupVersionKind{Version: "v1", Kind: "Secret"}, nil)), ErrInventory, "inventory names kind /v1/Secret, which the stream does not carry"},
		{"an event of no known type", snap, &watchv1.WatchResponse{Epoch: "e1", Revision: 6}, ErrProtocol, "unexpected <nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMirror()
			m.StartStream()
			applyAll(t, m, tc.before...)
			wasSynced := m.Synced()
			change, err := m.Apply(tc.lie)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v; want %v saying %q", err, tc.want, tc.msg)
			}
			if change != ChangeNone || m.Synced() != wasSynced {
				t.Fatalf("a refused event reported change %d and synced %v (was %v)", change, m.Synced(), wasSynced)
			}
		})
	}
}

// Decoding: built-in kinds decode to their typed objects, custom resources (JSON) to
// Unstructured, and a content type that is neither JSON nor protobuf is refused, naming it.
// Redacting a Secret that does not decode fails naming the Secret.
func TestDecodeTypedCustomAndRefusedContent(t *testing.T) {
	svc, err := Decode(&watchv1.Object{ContentType: ContentTypeJSON, Raw: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"}}`)})
	if s, ok := svc.(*corev1.Service); err != nil || !ok || s.Name != "web" {
		t.Fatalf("a Service decoded as %T (%v), want *v1.Service web", svc, err)
	}
	cr, err := Decode(&watchv1.Object{ContentType: ContentTypeJSON, Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x"}}`)})
	if u, ok := cr.(*unstructured.Unstructured); err != nil || !ok || u.GetName() != "x" || u.GetKind() != "Thing" {
		t.Fatalf("a custom resource decoded as %T (%v), want Unstructured Thing x", cr, err)
	}
	if _, err := Decode(&watchv1.Object{ContentType: "application/yaml", Raw: []byte("kind: Service")}); err == nil || !strings.Contains(err.Error(), `"application/yaml"`) {
		t.Fatalf("a YAML object: %v, want an error naming the content type", err)
	}
	if _, err := Decode(&watchv1.Object{ContentType: ContentTypeProtobuf, Raw: []byte("not protobuf")}); err == nil {
		t.Fatal("bytes that are not protobuf decoded")
	}
	bad := &watchv1.Object{Kind: &watchv1.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespace: "ns", Name: "tls", ContentType: ContentTypeJSON, Raw: []byte("{")}
	if _, err := Redact(bad); err == nil || !strings.Contains(err.Error(), "ns/tls") {
		t.Fatalf("redacting a Secret that does not decode: %v, want an error naming ns/tls", err)
	}
}
