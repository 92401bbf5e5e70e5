package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/client"
	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

var svcKind = &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}

func svc(name, rv string) *watchv1.Object {
	return &watchv1.Object{Kind: svcKind, Namespace: "ns", Name: name, ResourceVersion: rv, ContentType: watchstream.ContentTypeJSON, Raw: []byte("{}")}
}

func ev(epoch string, rev uint64, e any) *watchv1.WatchResponse {
	m := &watchv1.WatchResponse{Epoch: epoch, Revision: rev}
	switch e := e.(type) {
	case *watchv1.SnapshotStart:
		m.Event = &watchv1.WatchResponse_SnapshotStart{SnapshotStart: e}
	case *watchv1.SnapshotEnd:
		m.Event = &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: e}
	case *watchv1.ResumeStart:
		m.Event = &watchv1.WatchResponse_ResumeStart{ResumeStart: e}
	case *watchv1.Upsert:
		m.Event = &watchv1.WatchResponse_Upsert{Upsert: e}
	case *watchv1.InitialSyncComplete:
		m.Event = &watchv1.WatchResponse_InitialSyncComplete{InitialSyncComplete: e}
	default:
		panic(fmt.Sprintf("%T", e))
	}
	return m
}

// snapshot is a watcher's stream of objs (Services) at revision rev, with its marker; lie
// makes the marker's inventory miss the last object.
func snapshot(epoch string, rev uint64, lie bool, objs ...*watchv1.Object) []*watchv1.WatchResponse {
	out := []*watchv1.WatchResponse{ev(epoch, rev, &watchv1.SnapshotStart{Count: uint64(len(objs)), Kinds: []*watchv1.GroupVersionKind{svcKind}})}
	for _, o := range objs {
		out = append(out, ev(epoch, rev, &watchv1.Upsert{Object: o}))
	}
	inv := objs
	if lie {
		inv = objs[:len(objs)-1]
	}
	return append(out, ev(epoch, rev, &watchv1.SnapshotEnd{}),
		ev(epoch, rev, &watchv1.InitialSyncComplete{Inventory: []*watchv1.KindInventory{watchstream.InventoryOf(svcKind, inv)}}))
}

// fakeWatcher serves one scripted stream per Watch call, in order, and keeps the requests.
// The first `unavailable` calls are refused as a starting watcher refuses them. A stream
// ends after its messages, unless its last is nil: it is then held open until the client
// ends it, which is told on ended.
type fakeWatcher struct {
	watchv1.UnimplementedWatchServiceServer
	mu          sync.Mutex
	unavailable int
	streams     [][]*watchv1.WatchResponse
	requests    []*watchv1.WatchRequest
	ended       chan struct{}
}

func (f *fakeWatcher) Watch(req *watchv1.WatchRequest, s grpc.ServerStreamingServer[watchv1.WatchResponse]) error {
	f.mu.Lock()
	if f.unavailable > 0 {
		f.unavailable--
		f.mu.Unlock()
		return status.Error(codes.Unavailable, "resolving kinds")
	}
	f.requests = append(f.requests, req)
	var msgs []*watchv1.WatchResponse
	if len(f.streams) > 0 {
		msgs, f.streams = f.streams[0], f.streams[1:]
	}
	f.mu.Unlock()
	for _, m := range msgs {
		if m == nil {
			<-s.Context().Done()
			f.ended <- struct{}{}
			return nil
		}
		if err := s.Send(m); err != nil {
			return err
		}
	}
	return nil // the stream ends
}

func serve(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go s.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// streamEnded waits until the server saw the client end a stream it was holding open; the
// bound only turns a stream left open into a failure rather than a hang.
func streamEnded(t *testing.T, ended <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s was left open", what)
	}
}

// until reads w until want (or an error).
func until(t *testing.T, w *client.Watch, want client.Event) {
	t.Helper()
	for {
		_, e, err := w.Next()
		if err != nil {
			t.Fatalf("before %v: %v", want, err)
		}
		if e == want {
			return
		}
	}
}

// docs/design.md, "The watch stream": a Watch trusts its view only once the marker's
// inventory matched the objects received; when the watcher merely ends the stream, the next
// one resumes after the revision held and carries only the changes; the watcher still
// starting (UNAVAILABLE) is waited for.
func TestWatchVerifiesTheMarkerAndResumesAfterAnEndedStream(t *testing.T) {
	f := &fakeWatcher{unavailable: 2, streams: [][]*watchv1.WatchResponse{
		snapshot("e1", 5, false, svc("a", "1"), svc("b", "2")),
		{ev("e1", 5, &watchv1.ResumeStart{FromRevision: 5}), ev("e1", 6, &watchv1.Upsert{Object: svc("c", "3")})},
	}}
	conn := serve(t, func(s *grpc.Server) { watchv1.RegisterWatchServiceServer(s, f) })
	ctx := context.Background()
	w := client.NewWatch(conn, client.WatchOptions{ClientName: "test", ConnectTimeout: time.Minute, KeepObjects: true})
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, w, client.EventSynced)
	if !w.Synced() || w.Len() != 2 || w.Epoch() != "e1" || w.Revision() != 5 {
		t.Fatalf("after the marker: synced %v, %d objects, at %s/%d", w.Synced(), w.Len(), w.Epoch(), w.Revision())
	}
	if inv := w.Inventory(); len(inv) != 1 || inv[0].GetCount() != 2 || client.KindKey(inv[0].GetKind()) != "/v1/Service" {
		t.Fatalf("inventory %v", inv)
	}
	if _, _, err := w.Next(); !errors.Is(err, client.ErrStreamEnded) {
		t.Fatalf("at the stream's end: %v, want ErrStreamEnded", err)
	}
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, w, client.EventObject)
	if f.requests[1].GetResumeEpoch() != "e1" || f.requests[1].GetResumeRevision() != 5 {
		t.Fatalf("second stream asked for %s/%d, want a resume after e1/5", f.requests[1].GetResumeEpoch(), f.requests[1].GetResumeRevision())
	}
	if got := w.Object(svcKind, "ns", "c"); got == nil || w.Len() != 3 || !w.Synced() {
		t.Fatalf("after the resumed delta: c=%v, %d objects, synced %v", got, w.Len(), w.Synced())
	}
	if rv, ok := w.ResourceVersion(svcKind, "ns", "a"); !ok || rv != "1" {
		t.Fatalf("a's resourceVersion %q %v", rv, ok)
	}
}

// docs/design.md, reliability scenario 10, from a consumer's side: a marker whose inventory
// does not match what was received, or a revision gap, is an error naming the cause, the view
// is dropped (never reported synced), the stream is ended, and the next stream starts from
// a fresh snapshot.
func TestWatchRefusesALyingWatcherAndStartsOver(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream []*watchv1.WatchResponse
		want   error
	}{
		{"inventory missing an object", snapshot("e1", 5, true, svc("a", "1"), svc("b", "2")), client.ErrInventory},
		{"revision gap", append(snapshot("e1", 5, false, svc("a", "1")), ev("e1", 7, &watchv1.Upsert{Object: svc("b", "2")})), client.ErrGap},
		{"epoch changed mid-stream", append(snapshot("e1", 5, false, svc("a", "1")), ev("e2", 6, &watchv1.Upsert{Object: svc("b", "2")})), client.ErrEpoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeWatcher{ended: make(chan struct{}, 1), streams: [][]*watchv1.WatchResponse{append(tc.stream, nil), snapshot("e1", 9, false, svc("a", "1"))}}
			conn := serve(t, func(s *grpc.Server) { watchv1.RegisterWatchServiceServer(s, f) })
			w := client.NewWatch(conn, client.WatchOptions{})
			if err := w.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			var err error
			for err == nil {
				_, _, err = w.Next()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == client.ErrInventory && w.Synced() {
				t.Fatal("synced after a lying marker")
			}
			streamEnded(t, f.ended, "the stream it refused")
			if _, _, err := w.Next(); !errors.Is(err, client.ErrNotOpen) {
				t.Fatalf("Next after the refusal: %v, want ErrNotOpen", err)
			}
			if err := w.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			if r := f.requests[1]; r.GetResumeEpoch() != "" {
				t.Fatalf("after %v the next stream resumed at %s/%d, want a fresh snapshot", tc.want, r.GetResumeEpoch(), r.GetResumeRevision())
			}
			until(t, w, client.EventSynced)
		})
	}
}

// fakeTranslator sends a scripted config stream after the client's Hello.
type fakeTranslator struct {
	configv1.UnimplementedConfigServiceServer
	msgs  []*configv1.StreamConfigResponse
	hello chan *configv1.Hello
	ended chan struct{}
}

func (f *fakeTranslator) StreamConfig(s grpc.BidiStreamingServer[configv1.StreamConfigRequest, configv1.StreamConfigResponse]) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	f.hello <- req.GetHello()
	for _, m := range f.msgs {
		if err := s.Send(m); err != nil {
			return err
		}
	}
	<-s.Context().Done() // held open until the client ends it
	f.ended <- struct{}{}
	return nil
}

func vhost(name string) *configv1.VirtualHost {
	return &configv1.VirtualHost{Hostname: name, Routes: []*configv1.Route{{Name: name,
		Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}}}}
}

// docs/design.md, "The config stream", from a consumer's side: a complete state sent in
// chunks counts when whole; each delta applies onto the version held and its hash is
// checked; a delta whose hash is not the state's it makes is refused with ErrBrokenChain
// and the state held stays as it was; the stream is ended then, not followed further.
func TestConfigFollowsChunksAndDeltasAndRefusesABrokenChain(t *testing.T) {
	res := &configv1.Resources{}
	for i := range 200 {
		res.VirtualHosts = append(res.VirtualHosts, vhost(fmt.Sprintf("h%03d.example.com", i)))
	}
	first := &configv1.Config{Epoch: "c1", Version: 1, Hash: contract.Hash(res), Resources: res}
	msgs := []*configv1.StreamConfigResponse{{Message: &configv1.StreamConfigResponse_InitialSyncComplete{InitialSyncComplete: &configv1.InitialSyncComplete{Epoch: "c1", Version: 1}}}}
	chunks, err := contract.Chunk(first, 2048, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 3 {
		t.Fatalf("the complete state went in %d messages, want it chunked", len(chunks))
	}
	msgs = append(msgs, chunks...)
	next := proto.Clone(res).(*configv1.Resources)
	next.VirtualHosts = append(next.VirtualHosts, vhost("new.example.com"))
	delta := &configv1.ConfigDelta{Epoch: "c1", Version: 2, BaseVersion: 1, Hash: contract.Hash(next), VirtualHosts: []*configv1.VirtualHost{vhost("new.example.com")}}
	broken := &configv1.ConfigDelta{Epoch: "c1", Version: 3, BaseVersion: 2, Hash: delta.GetHash(), RemovedVirtualHosts: []string{"h000.example.com"}}
	for _, d := range []*configv1.ConfigDelta{delta, broken} {
		msgs = append(msgs, &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: d}})
	}
	f := &fakeTranslator{msgs: msgs, hello: make(chan *configv1.Hello, 1), ended: make(chan struct{}, 1)}
	conn := serve(t, func(s *grpc.Server) { configv1.RegisterConfigServiceServer(s, f) })
	c, err := client.FollowConfig(context.Background(), conn, client.ConfigOptions{ID: "test-client"})
	if err != nil {
		t.Fatal(err)
	}
	if h := <-f.hello; h.GetPusherId() != "test-client" || h.GetDataPlane() != configv1.DataPlaneKind_DATA_PLANE_KIND_NONE || !h.GetTakesChunks() {
		t.Fatalf("hello %v: want the ID, no data plane, and chunks taken", h)
	}
	var versions []uint64
	for {
		_, v, err := c.Next()
		if err != nil {
			if !errors.Is(err, client.ErrBrokenChain) {
				t.Fatalf("after versions %v: %v, want ErrBrokenChain for the delta whose hash is wrong", versions, err)
			}
			break
		}
		if v != nil {
			versions = append(versions, v.GetVersion())
			if v.GetVersion() == 1 && (c.Counts().VirtualHosts != 200 || c.Chunks() != len(chunks)-2) {
				t.Fatalf("version 1: %+v in %d chunks, want 200 virtual hosts in %d", c.Counts(), c.Chunks(), len(chunks)-2)
			}
		}
	}
	if fmt.Sprint(versions) != "[1 2]" || c.Version().GetVersion() != 2 || c.Marker().GetEpoch() != "c1" {
		t.Fatalf("versions %v, holding %d, marker %v", versions, c.Version().GetVersion(), c.Marker())
	}
	if !proto.Equal(c.Resources(), next) {
		t.Fatal("the state held after the refused delta is not version 2's")
	}
	// The chain is broken: the stream is not followed further, even by a complete state.
	if _, _, err := c.Next(); !errors.Is(err, client.ErrBrokenChain) {
		t.Fatalf("after the broken chain: %v, want the same ErrBrokenChain again", err)
	}
	streamEnded(t, f.ended, "the broken chain's stream")
}

// docs/design.md, "The watch stream": a view is complete only from its marker on. A fresh
// snapshot of the same epoch (the watcher sends one when a resume is too far behind) makes
// the view incomplete until its own marker; a stream that breaks within a snapshot leaves a
// partial view, which the next stream does not resume from.
func TestWatchIsCompleteOnlyFromTheMarkerOfTheViewHeld(t *testing.T) {
	part := snapshot("e1", 9, false, svc("a", "1"), svc("b", "2"))
	f := &fakeWatcher{streams: [][]*watchv1.WatchResponse{
		snapshot("e1", 5, false, svc("a", "1")),
		snapshot("e1", 9, false, svc("a", "1"), svc("b", "2")),
		part[:2], // ends after SnapshotStart and one object
		snapshot("e1", 12, false, svc("a", "1")),
	}}
	conn := serve(t, func(s *grpc.Server) { watchv1.RegisterWatchServiceServer(s, f) })
	ctx := context.Background()
	w := client.NewWatch(conn, client.WatchOptions{})
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, w, client.EventSynced)
	if _, _, err := w.Next(); !errors.Is(err, client.ErrStreamEnded) {
		t.Fatal(err)
	}
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, w, client.EventReset)
	if w.Synced() || w.Inventory() != nil {
		t.Fatalf("within a fresh snapshot of the same epoch: synced %v, inventory %v; want neither", w.Synced(), w.Inventory())
	}
	until(t, w, client.EventSynced)
	if inv := w.Inventory(); len(inv) != 1 || inv[0].GetCount() != 2 {
		t.Fatalf("inventory %v, want the new snapshot's", inv)
	}
	if _, _, err := w.Next(); !errors.Is(err, client.ErrStreamEnded) {
		t.Fatal(err)
	}
	if err := w.Open(ctx); err != nil { // resumes after revision 9
		t.Fatal(err)
	}
	var err error
	for err == nil {
		_, _, err = w.Next()
	}
	if !errors.Is(err, client.ErrStreamEnded) || w.Synced() {
		t.Fatalf("a stream ended within its snapshot: %v, synced %v", err, w.Synced())
	}
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if r := f.requests[3]; r.GetResumeEpoch() != "" {
		t.Fatalf("after a stream ended within its snapshot, the next resumed at %s/%d; want a fresh snapshot", r.GetResumeEpoch(), r.GetResumeRevision())
	}
	until(t, w, client.EventSynced)
}

// FollowConfig's ConnectTimeout: a client started before its translator listens (a
// connection that failed already) waits for it and is introduced once it listens; without
// ConnectTimeout it fails at once, and with one that runs out it says so.
func TestFollowConfigWaitsForATranslatorThatIsNotListeningYet(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there until the translator starts below
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Wait until the connection has failed once, so that the stream is opened on a failed one.
	conn.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for st := conn.GetState(); st != connectivity.TransientFailure; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			t.Fatalf("the connection to a closed port never failed (state %v)", st)
		}
	}
	if _, err := client.FollowConfig(context.Background(), conn, client.ConfigOptions{ID: "once"}); status.Code(errors.Unwrap(err)) != codes.Unavailable {
		t.Fatalf("without ConnectTimeout: %v, want UNAVAILABLE at once", err)
	}
	if _, err := client.FollowConfig(context.Background(), conn, client.ConfigOptions{ID: "short", ConnectTimeout: 50 * time.Millisecond}); err == nil ||
		!strings.Contains(err.Error(), "no translator took the stream within 50ms") {
		t.Fatalf("with a ConnectTimeout that runs out: %v", err)
	}

	type followed struct {
		c   *client.Config
		err error
	}
	done := make(chan followed, 1)
	go func() {
		c, err := client.FollowConfig(context.Background(), conn, client.ConfigOptions{ID: "patient", ConnectTimeout: time.Minute})
		done <- followed{c, err}
	}()
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	f := &fakeTranslator{hello: make(chan *configv1.Hello, 1), ended: make(chan struct{}, 1)}
	s := grpc.NewServer()
	configv1.RegisterConfigServiceServer(s, f)
	go s.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(s.Stop)
	got := <-done
	if got.err != nil {
		t.Fatalf("with ConnectTimeout: %v, want the stream once the translator listens", got.err)
	}
	defer got.c.Close()
	if h := <-f.hello; h.GetPusherId() != "patient" {
		t.Fatalf("hello %v, want the patient client's", h)
	}
}
