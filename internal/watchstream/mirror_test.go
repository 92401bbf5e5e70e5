package watchstream

import (
	"errors"
	"testing"
	"unsafe"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// A lying watcher (docs/design.md, reliability scenario 10): a marker whose inventory names one kind twice, so that the
// count of kinds matches while another kind is left out, is refused; the kind it leaves out
// holds an object the marker never accounted for.
func TestMarkerNamingAKindTwiceIsRefused(t *testing.T) {
	ing := &watchv1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
	svc := &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}
	obj := &watchv1.Object{Kind: svc, Namespace: "ns", Name: "s", ResourceVersion: "1", ContentType: ContentTypeJSON, Raw: []byte("{}")}
	m := NewMirror()
	for _, ev := range []*watchv1.WatchResponse{
		{Epoch: "e", Revision: 1, Event: &watchv1.WatchResponse_SnapshotStart{SnapshotStart: &watchv1.SnapshotStart{Count: 1, Kinds: []*watchv1.GroupVersionKind{ing, svc}}}},
		{Epoch: "e", Revision: 1, Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: obj}}},
		{Epoch: "e", Revision: 1, Event: &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: &watchv1.SnapshotEnd{}}},
	} {
		if _, err := m.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	empty := InventoryOf(ing, nil)
	_, err := m.Apply(&watchv1.WatchResponse{Epoch: "e", Revision: 1, Event: &watchv1.WatchResponse_InitialSyncComplete{
		InitialSyncComplete: &watchv1.InitialSyncComplete{Inventory: []*watchv1.KindInventory{empty, empty}}}})
	if !errors.Is(err, ErrInventory) || m.Synced() {
		t.Fatalf("a marker naming Ingress twice and leaving Services out: %v (synced %v), want ErrInventory", err, m.Synced())
	}
}

// The translator keeps an object once (docs/design.md, "Cold start"): the mirror's keys share
// one string per kind and one per namespace, also once the client attached what it keeps to
// an entry under a key of its own strings (as the engine does with every object).
func TestMirrorKeysShareKindAndNamespaceAfterAttach(t *testing.T) {
	svc := &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}
	fresh := func(s string) string { return string([]byte(s)) } // each message has its own copy
	m := NewMirror()
	if _, err := m.Apply(&watchv1.WatchResponse{Epoch: "e", Revision: 1, Event: &watchv1.WatchResponse_SnapshotStart{
		SnapshotStart: &watchv1.SnapshotStart{Count: 2, Kinds: []*watchv1.GroupVersionKind{svc}}}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		obj := &watchv1.Object{Kind: &watchv1.GroupVersionKind{Version: fresh("v1"), Kind: fresh("Service")}, Namespace: fresh("ns"),
			Name: name, ResourceVersion: "1", ContentType: ContentTypeJSON, Raw: []byte("{}")}
		if _, err := m.Apply(&watchv1.WatchResponse{Epoch: "e", Revision: 1, Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: obj}}}); err != nil {
			t.Fatal(err)
		}
		if !m.Attach(KeyOf(obj), name) {
			t.Fatalf("%s: not held", name)
		}
	}
	keys := m.Keys()
	if len(keys) != 2 {
		t.Fatalf("keys %v, want two", keys)
	}
	a, b := keys[0], keys[1]
	if unsafe.StringData(a.Kind) != unsafe.StringData(b.Kind) {
		t.Error("the two Services' keys hold a kind string each, want one shared")
	}
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Error("the two Services' keys hold a namespace string each, want one shared")
	}
	if m.Value(a) == nil || m.Value(b) == nil {
		t.Error("attached values lost")
	}
}
