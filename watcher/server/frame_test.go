package server

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
)

var testKinds = []*watchv1.GroupVersionKind{
	{Group: "", Version: "v1", Kind: "Service"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
	{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"},
}

// client is one subscriber followed through a Mirror.
type client struct {
	sub    *store.Subscription
	f      *framer
	mirror *watchstream.Mirror
	want   map[string]bool // kinds carried (nil: all)
	kinds  []*watchv1.GroupVersionKind
	marks  int
}

func (c *client) apply(t *testing.T, m *watchv1.WatchResponse) error {
	// Every message must survive the wire.
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got watchv1.WatchResponse
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	ch, err := c.mirror.ApplyKeeping(&got)
	if ch == watchstream.ChangeSynced {
		c.marks++
	}
	return err
}

func (c *client) drain(t *testing.T) {
	t.Helper()
	for _, ev := range c.sub.Take() {
		if err := c.f.event(ev, func(m *watchv1.WatchResponse) error { return c.apply(t, m) }); err != nil {
			t.Fatalf("event: %v", err)
		}
	}
}

// runStreamProperty drives a store with random changes, subscribers joining (fresh or
// resuming) at random points, with random kind subsets, and checks docs/design.md's watch stream
// invariants: what each client holds equals the store (restricted to its kinds), revisions
// have no gap (the Mirror checks), the marker comes exactly once per stream, only after the
// barrier opened, and its inventory verifies.
func runStreamProperty(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	st, err := store.New(store.Config{Kinds: testKinds, HistorySize: 1 + rng.Intn(64), SubscriberBuffer: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	var clients []*client
	syncAt := rng.Intn(steps + 1)
	subscribe := func(resumeFrom *client) {
		req := store.Request{}
		pos := len(clients)
		var want map[string]bool
		if resumeFrom == nil && rng.Intn(3) == 0 {
			want = map[string]bool{}
			for _, k := range testKinds {
				if rng.Intn(2) == 0 {
					req.Kinds = append(req.Kinds, k)
					want[watchstream.KindKey(k)] = true
				}
			}
			if len(req.Kinds) == 0 {
				req.Kinds, want = testKinds[:1], map[string]bool{watchstream.KindKey(testKinds[0]): true}
			}
		}
		m := watchstream.NewMirror()
		if resumeFrom != nil {
			m = resumeFrom.mirror
			req.ResumeEpoch, req.ResumeRevision = m.Epoch(), m.Revision()
			req.Kinds = resumeFrom.kinds // a resume asks for the same kinds
			st.Unsubscribe(resumeFrom.sub)
			want = resumeFrom.want
			for i, c := range clients {
				if c == resumeFrom {
					pos = i
				}
			}
		}
		sub, err := st.Subscribe(req)
		if err != nil {
			t.Fatal(err)
		}
		m.StartStream()
		c := &client{sub: sub, f: &framer{sub: sub}, mirror: m, want: want, kinds: req.Kinds}
		if resumeFrom != nil && resumeFrom.marks > 1 {
			t.Fatalf("seed %d: a stream carried %d markers", seed, resumeFrom.marks)
		}
		if err := c.f.start(func(msg *watchv1.WatchResponse) error { return c.apply(t, msg) }); err != nil {
			t.Fatalf("seed %d: start: %v", seed, err)
		}
		if pos == len(clients) {
			clients = append(clients, c)
		} else {
			clients[pos] = c
		}
	}
	for i := 0; i < steps; i++ {
		if i == syncAt {
			st.MarkSynced()
		}
		switch r := rng.Intn(10); {
		case r < 5:
			k := testKinds[rng.Intn(len(testKinds))]
			o := &watchv1.Object{Kind: k, Namespace: fmt.Sprintf("ns%d", rng.Intn(3)), Name: fmt.Sprintf("o%d", rng.Intn(12)),
				ResourceVersion: fmt.Sprint(i), Raw: []byte{byte(i)}}
			if _, err := st.Upsert(o); err != nil {
				t.Fatal(err)
			}
		case r < 7:
			k := testKinds[rng.Intn(len(testKinds))]
			st.Delete(&watchv1.Object{Kind: k, Namespace: fmt.Sprintf("ns%d", rng.Intn(3)), Name: fmt.Sprintf("o%d", rng.Intn(12))})
		case r < 8:
			subscribe(nil)
		case r < 9 && len(clients) > 0:
			// A client drains, drops its stream and resumes where it was.
			c := clients[rng.Intn(len(clients))]
			c.drain(t)
			subscribe(c)
		default:
			if len(clients) > 0 {
				clients[rng.Intn(len(clients))].drain(t)
			}
		}
	}
	if syncAt == steps {
		st.MarkSynced()
	}
	subscribe(nil)
	for _, c := range clients {
		c.drain(t)
		// The barrier opened, so every stream carries exactly one marker.
		if c.marks != 1 {
			t.Fatalf("seed %d: a stream carried %d markers, want 1", seed, c.marks)
		}
	}
	for _, c := range clients {
		inv := st.Inventory(c.want)
		got := map[string][]*watchv1.Object{}
		for _, o := range c.mirror.Objects() {
			kk := watchstream.KindKey(o.GetKind())
			got[kk] = append(got[kk], o)
		}
		for _, want := range inv {
			have := watchstream.InventoryOf(want.GetKind(), got[watchstream.KindKey(want.GetKind())])
			if !proto.Equal(have, want) {
				t.Fatalf("seed %d: client holds %d %s, store has %d", seed, have.GetCount(), watchstream.KindKey(want.GetKind()), want.GetCount())
			}
		}
		if !c.mirror.Synced() {
			t.Fatalf("seed %d: client never verified a marker", seed)
		}
		if c.mirror.Revision() != st.Revision() {
			t.Fatalf("seed %d: client at revision %d, store at %d", seed, c.mirror.Revision(), st.Revision())
		}
	}
}

func TestStreamEqualsStoreProperty(t *testing.T) {
	for seed := int64(0); seed < 150; seed++ {
		runStreamProperty(t, seed, 200)
	}
}

func FuzzStreamEqualsStore(f *testing.F) {
	for _, s := range []uint64{1, 42, 1 << 40, 99999} {
		b := make([]byte, 10)
		binary.LittleEndian.PutUint64(b, s)
		b[8] = 150
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 9 {
			return
		}
		runStreamProperty(t, int64(binary.LittleEndian.Uint64(b)), 1+int(b[8]))
	})
}
