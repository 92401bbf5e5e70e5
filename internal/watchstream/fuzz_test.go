package watchstream

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// fuzzInput turns the fuzzer's bytes into choices; when the bytes run out every choice is 0.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) intn(n int) int { return int(in.byte()) % n }

var (
	fKinds = []*watchv1.GroupVersionKind{
		{Version: "v1", Kind: "Service"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		{Group: "example.com", Version: "v1", Kind: "Thing"},
	}
	fEpochs     = []string{"e1", "e2", ""}
	fNamespaces = []string{"a", "b", ""}
	fNames      = []string{"x", "y", "z", ""}
)

// model is what a stream's events say the watcher holds, followed independently of the
// Mirror: the objects, the stream's kinds, the revision, where in the stream it is.
type model struct {
	epoch     string
	revision  uint64
	kinds     map[string]*watchv1.GroupVersionKind
	objects   map[ObjectKey]*watchv1.Object
	snapshot  bool // between SnapshotStart and SnapshotEnd
	remaining int
	started   bool // the stream began (snapshot or resume)
}

func newModel() *model {
	return &model{objects: map[ObjectKey]*watchv1.Object{}, kinds: map[string]*watchv1.GroupVersionKind{}}
}

// object is an object of one of the stream's kinds.
func (in *fuzzInput) object(md *model) *watchv1.Object {
	kinds := fKinds
	if len(md.kinds) > 0 {
		kinds = nil
		for _, k := range fKinds { // in a fixed order
			if md.kinds[KindKey(k)] != nil {
				kinds = append(kinds, k)
			}
		}
	}
	return &watchv1.Object{Kind: kinds[in.intn(len(kinds))], Namespace: fNamespaces[in.intn(len(fNamespaces))],
		Name: fNames[in.intn(len(fNames)-1)], ResourceVersion: fmt.Sprint(in.intn(4))}
}

// inventory is the marker's inventory of md.
func (in *fuzzInput) inventory(md *model) []*watchv1.KindInventory {
	var inv []*watchv1.KindInventory
	for _, k := range fKinds {
		kk := KindKey(k)
		if md.kinds[kk] == nil {
			continue
		}
		var objs []*watchv1.Object
		for key, o := range md.objects {
			if key.Kind == kk {
				objs = append(objs, o)
			}
		}
		inv = append(inv, InventoryOf(k, objs))
	}
	return inv
}

// event generates the next event of a stream as md sees it: mostly what a watcher would send
// next, sometimes with one thing wrong, sometimes anything off the wire. nil ends the
// stream (a new one starts: a resume or a snapshot).
func (in *fuzzInput) event(md *model) *watchv1.WatchResponse {
	wrong := in.intn(8) == 0
	ev := &watchv1.WatchResponse{Epoch: md.epoch, Revision: md.revision + 1}
	switch {
	case !md.started && (md.epoch == "" || in.intn(2) == 0):
		if md.epoch == "" || in.intn(4) == 0 {
			ev.Epoch = fEpochs[in.intn(2)]
		}
		start := &watchv1.SnapshotStart{Count: uint64(in.intn(5))}
		for _, k := range fKinds {
			if in.intn(3) > 0 {
				start.Kinds = append(start.Kinds, k)
			}
		}
		if len(start.Kinds) == 0 {
			start.Kinds = fKinds[:1]
		}
		ev.Revision = md.revision + uint64(in.intn(4))
		ev.Event = &watchv1.WatchResponse_SnapshotStart{SnapshotStart: start}
	case !md.started:
		ev.Revision = md.revision
		ev.Event = &watchv1.WatchResponse_ResumeStart{ResumeStart: &watchv1.ResumeStart{FromRevision: md.revision}}
	case md.snapshot && md.remaining > 0:
		ev.Revision = md.revision
		ev.Event = &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: in.object(md)}}
	case md.snapshot:
		ev.Revision = md.revision
		ev.Event = &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: &watchv1.SnapshotEnd{}}
	default:
		switch in.intn(8) {
		case 0, 1:
			ev.Event = &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: in.object(md)}}
		case 2:
			o := in.object(md)
			for _, key := range sortedKeys(md.objects) { // mostly an object held
				if in.intn(4) > 0 {
					held := md.objects[key]
					o = &watchv1.Object{Kind: held.GetKind(), Namespace: held.GetNamespace(), Name: held.GetName()}
					break
				}
			}
			ev.Event = &watchv1.WatchResponse_Delete{Delete: &watchv1.Delete{Object: o}}
		case 3:
			ev.Event = &watchv1.WatchResponse_Progress{Progress: &watchv1.Progress{}}
		case 4:
			ev.Revision = md.revision
			ev.Event = &watchv1.WatchResponse_Heartbeat{Heartbeat: &watchv1.Heartbeat{}}
		case 5:
			ev.Revision = md.revision + uint64(in.intn(2))
			ev.Event = &watchv1.WatchResponse_InitialSyncComplete{InitialSyncComplete: &watchv1.InitialSyncComplete{Inventory: in.inventory(md)}}
		case 6:
			return nil
		case 7:
			wrong = true
		}
	}
	if !wrong {
		return ev
	}
	switch in.intn(8) {
	case 0:
		ev.Epoch = fEpochs[in.intn(len(fEpochs))]
	case 1:
		ev.Revision += uint64(in.intn(3)) - 1
	case 2:
		ev.Revision = uint64(in.byte())
	case 3: // another kind, no kind, no name
		o := &watchv1.Object{Kind: fKinds[in.intn(len(fKinds))], Namespace: "a", Name: fNames[in.intn(len(fNames))]}
		if in.intn(4) == 0 {
			o.Kind = nil
		}
		if in.intn(2) == 0 {
			ev.Event = &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: o}}
		} else {
			ev.Event = &watchv1.WatchResponse_Delete{Delete: &watchv1.Delete{Object: o}}
		}
	case 4: // a wrong inventory
		inv := in.inventory(md)
		switch i := in.intn(4); {
		case len(inv) == 0 || i == 0:
			inv = append(inv, InventoryOf(fKinds[in.intn(len(fKinds))], nil))
		case i == 1:
			inv = inv[1:]
		case i == 2:
			inv[0].Count++
		default:
			inv[0].Digest = []byte{in.byte()}
		}
		ev.Event = &watchv1.WatchResponse_InitialSyncComplete{InitialSyncComplete: &watchv1.InitialSyncComplete{Inventory: inv}}
	case 5: // any framing event anywhere
		switch in.intn(4) {
		case 0:
			ev.Event = &watchv1.WatchResponse_SnapshotStart{SnapshotStart: &watchv1.SnapshotStart{Count: uint64(in.intn(3)), Kinds: fKinds[:in.intn(3)]}}
		case 1:
			ev.Event = &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: &watchv1.SnapshotEnd{}}
		case 2:
			ev.Event = &watchv1.WatchResponse_ResumeStart{ResumeStart: &watchv1.ResumeStart{FromRevision: uint64(in.intn(4))}}
		default:
			ev.Event = nil
		}
	default: // a message off the wire
		var m watchv1.WatchResponse
		n := min(in.intn(64), len(in.b))
		_ = proto.Unmarshal(in.b[:n], &m)
		in.b = in.b[n:]
		return &m
	}
	return ev
}

func sortedKeys(objs map[ObjectKey]*watchv1.Object) []ObjectKey {
	keys := make([]ObjectKey, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	return keys
}

// follow updates md with an event the Mirror accepted.
func (md *model) follow(ev *watchv1.WatchResponse) {
	md.epoch, md.revision = ev.GetEpoch(), ev.GetRevision()
	switch e := ev.GetEvent().(type) {
	case *watchv1.WatchResponse_SnapshotStart:
		md.objects = map[ObjectKey]*watchv1.Object{}
		md.kinds = map[string]*watchv1.GroupVersionKind{}
		for _, k := range e.SnapshotStart.GetKinds() {
			md.kinds[KindKey(k)] = k
		}
		md.snapshot, md.remaining, md.started = true, int(e.SnapshotStart.GetCount()), true
	case *watchv1.WatchResponse_ResumeStart:
		md.started = true
	case *watchv1.WatchResponse_SnapshotEnd:
		md.snapshot = false
	case *watchv1.WatchResponse_Upsert:
		md.objects[KeyOf(e.Upsert.GetObject())] = e.Upsert.GetObject()
		md.remaining--
	case *watchv1.WatchResponse_Delete:
		delete(md.objects, KeyOf(e.Delete.GetObject()))
	}
}

// FuzzMirror feeds a Mirror streams of events, mostly well-formed (so that it gets deep
// into them), sometimes anything. The Mirror never panics; an error is one of its four and
// the stream (and the mirror's content) is dropped; while it accepts events it holds exactly
// the objects they describe, at their revision, which never goes down within a stream; when
// it reports synced, what it holds is the marker's inventory.
func FuzzMirror(f *testing.F) {
	f.Add([]byte{})
	// A snapshot of two objects, its marker, a change and a heartbeat.
	f.Add([]byte{0, 0, 2, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 5, 0, 0, 1, 0, 2, 1, 0, 0, 0, 0, 0, 5, 0, 0})
	f.Add(bytes.Repeat([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 0}, 30))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &fuzzInput{b: b}
		m, md := NewMirror(), newModel()
		m.StartStream()
		var streamRev uint64
		for steps := 0; len(in.b) > 0 && steps < 500; steps++ {
			ev := in.event(md)
			if ev == nil {
				m.StartStream()
				md.snapshot, md.started = false, false
				continue
			}
			if !md.started {
				streamRev = 0
			}
			change, err := m.Apply(ev)
			if err != nil {
				if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrGap) && !errors.Is(err, ErrEpoch) && !errors.Is(err, ErrInventory) {
					t.Fatalf("step %d: %v is none of the Mirror's errors", steps, err)
				}
				// The stream is dropped and the client starts over with a fresh mirror.
				m, md = NewMirror(), newModel()
				m.StartStream()
				continue
			}
			md.follow(ev)
			if m.Revision() != md.revision || m.Epoch() != md.epoch {
				t.Fatalf("step %d: the mirror is at %s/%d, the events say %s/%d", steps, m.Epoch(), m.Revision(), md.epoch, md.revision)
			}
			if _, ok := ev.GetEvent().(*watchv1.WatchResponse_SnapshotStart); !ok && m.Revision() < streamRev {
				t.Fatalf("step %d: the revision went down from %d to %d", steps, streamRev, m.Revision())
			}
			streamRev = m.Revision()
			keys := m.Keys()
			if len(keys) != len(md.objects) || m.Len() != len(keys) {
				t.Fatalf("step %d: the mirror holds %d objects, the events say %d", steps, len(keys), len(md.objects))
			}
			for _, k := range keys {
				rv, _ := m.ResourceVersion(k)
				if want, ok := md.objects[k]; !ok || rv != want.GetResourceVersion() {
					t.Fatalf("step %d: the mirror holds %s at %q, the events say %v", steps, k, rv, want)
				}
				if md.kinds[k.Kind] == nil {
					t.Fatalf("step %d: the mirror holds %s, of a kind the stream does not carry", steps, k)
				}
			}
			if change == ChangeSynced {
				if !m.Synced() {
					t.Fatalf("step %d: ChangeSynced, but the mirror is not synced", steps)
				}
				inv := ev.GetInitialSyncComplete().GetInventory()
				if len(inv) != len(m.Kinds()) {
					t.Fatalf("step %d: synced on an inventory of %d kinds, the stream carries %d", steps, len(inv), len(m.Kinds()))
				}
				for _, want := range inv {
					var held []*watchv1.Object
					for _, k := range keys {
						if k.Kind == KindKey(want.GetKind()) {
							held = append(held, md.objects[k])
						}
					}
					if got := InventoryOf(want.GetKind(), held); !proto.Equal(got, want) {
						t.Fatalf("step %d: synced holding %v, the marker says %v", steps, got, want)
					}
				}
			}
		}
	})
}

// FuzzDecode: any bytes, as either content type, decode to an object or an error, never a
// panic.
func FuzzDecode(f *testing.F) {
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", ResourceVersion: "7"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	pb, err := runtime.Encode(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), svc)
	if err != nil {
		f.Fatal(err)
	}
	js, err := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), svc)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pb, true)
	f.Add(js, false)
	f.Add([]byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x"},"spec":{"a":[1,2]}}`), false)
	f.Add([]byte("k8s\x00"+string(protowire.AppendTag(nil, 1, protowire.BytesType))), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, raw []byte, isProtobuf bool) {
		ct := ContentTypeJSON
		if isProtobuf {
			ct = ContentTypeProtobuf
		}
		obj, err := Decode(&watchv1.Object{ContentType: ct, Raw: raw})
		if err == nil && obj == nil {
			t.Fatal("no object and no error")
		}
		if _, err := Decode(&watchv1.Object{ContentType: string(raw), Raw: raw}); err == nil && string(raw) != ContentTypeJSON && string(raw) != ContentTypeProtobuf {
			t.Fatal("an unknown content type decoded")
		}
	})
}
