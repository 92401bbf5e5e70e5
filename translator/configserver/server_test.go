package configserver

import (
	"context"
	"net"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

func start(t *testing.T) (*Server, configv1.ConfigServiceClient) {
	t.Helper()
	stopping := make(chan struct{})
	t.Cleanup(func() { close(stopping) })
	s, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: stopping})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	configv1.RegisterConfigServiceServer(gs, s)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, configv1.NewConfigServiceClient(conn)
}

// source builds versions the way the engine does: a state, changed by one host per version.
type source struct {
	st      *contract.State
	epoch   string
	version uint64
}

func (src *source) host(i int) *configv1.VirtualHost {
	return &configv1.VirtualHost{Hostname: "h" + string(rune('a'+i%26)) + ".example.com",
		Routes: []*configv1.Route{{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/" + string(rune('a'+i%7))}}}}
}

func (src *source) first(s *Server) {
	src.version = 1
	src.st = contract.NewState()
	for i := range 3 {
		src.st.Put(contract.VirtualHosts, src.host(i).GetHostname(), src.host(i))
	}
	src.st.TakeDelta()
	s.NewEpoch(src.epoch)
	s.Publish(&configv1.Config{Epoch: src.epoch, Version: 1, Hash: src.st.Hash(), Resources: src.st.Resources()}, src.st.Clone())
}

// next publishes one delta: host i upserted (changed), and host j removed when held.
func (src *source) next(s *Server, i, j int) {
	h := src.host(i)
	h.Routes[0].Name = "r" + string(rune('0'+src.version%10))
	src.st.Put(contract.VirtualHosts, h.GetHostname(), h)
	src.st.Remove(contract.VirtualHosts, src.host(j).GetHostname())
	d := src.st.TakeDelta()
	if d == nil {
		return
	}
	src.version++
	d.Epoch, d.Version, d.BaseVersion, d.Hash = src.epoch, src.version, src.version-1, src.st.Hash()
	s.PublishDelta(d, contract.Digests{})
}

// client follows a stream as a pusher does (contract.Chain), reading only when told.
type client struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[configv1.StreamConfigRequest, configv1.StreamConfigResponse]
	chain  contract.Chain
	fulls  int
	deltas int
	// chunks counts the ConfigChunks read, largest is the largest message read (encoded).
	chunks, largest int
}

func follow(t *testing.T, c configv1.ConfigServiceClient) *client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.StreamConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{PusherId: t.Name()}}}); err != nil {
		t.Fatal(err)
	}
	return &client{t: t, stream: stream}
}

// readUntil reads until the client holds version want; every delta must apply onto what it
// holds with its hash.
func (c *client) readUntil(want uint64) {
	c.t.Helper()
	for c.chain.Version.GetVersion() < want {
		m, err := c.stream.Recv()
		if err != nil {
			c.t.Fatalf("stream ended at version %d, want %d: %v", c.chain.Version.GetVersion(), want, err)
		}
		if _, err := c.chain.Receive(m); err != nil {
			c.t.Fatal(err)
		}
		c.largest = max(c.largest, proto.Size(m))
		switch m.GetMessage().(type) {
		case *configv1.StreamConfigResponse_Config, *configv1.StreamConfigResponse_ConfigEnd:
			c.fulls++
		case *configv1.StreamConfigResponse_ConfigChunk:
			c.chunks++
		case *configv1.StreamConfigResponse_Delta:
			c.deltas++
		}
	}
}

// docs/design.md, "The config stream": the first message after the marker is the complete state,
// later versions are deltas onto the version the stream holds; a slow client that skipped
// versions gets one merged delta (a host added and removed in between is not in it), and a
// client further behind than the history gets the complete state; every result has the
// source's hash.
func TestSlowClientGetsOneMergedDeltaOrTheCompleteState(t *testing.T) {
	s, c := start(t)
	src := &source{epoch: "e1"}
	src.first(s)
	v1 := src.st.Resources()
	fast := follow(t, c)
	fast.readUntil(1)
	for v := range 5 {
		src.next(s, 3+v, v) // adds hosts d.., removes a, b, c and then the ones it added
		fast.readUntil(src.version)
	}
	if fast.fulls != 1 || fast.deltas != int(src.version)-1 {
		t.Fatalf("the fast client got %d complete states and %d deltas, want 1 and %d", fast.fulls, fast.deltas, src.version-1)
	}

	// What a stream that was sent version 1 and nothing since gets next. (A real stream
	// falls behind only when its transport blocks, so the choice is tested where it is made.)
	slow, err := contract.StateOf(v1)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	next := s.nextLocked(1)
	s.mu.Unlock()
	d := next.GetDelta()
	if d == nil || d.GetBaseVersion() != 1 || d.GetVersion() != src.version {
		t.Fatalf("a stream at version 1 gets %v, want one delta from 1 to %d", next, src.version)
	}
	if err := slow.ApplyDelta(d); err != nil {
		t.Fatalf("the merged delta does not apply onto version 1: %v", err)
	}
	if slow.Hash() != src.st.Hash() || fast.chain.State.Hash() != src.st.Hash() {
		t.Fatal("a client holds another state than the source")
	}
	for _, h := range d.GetRemovedVirtualHosts() {
		if h == src.host(3).GetHostname() {
			t.Fatalf("the merged delta removes %s, which version 1 never held", h)
		}
	}

	// Further behind than the history: the complete state. (The fast client keeps up.)
	for v := range maxHistory + 5 {
		src.next(s, v, v+11)
		fast.readUntil(src.version)
	}
	s.mu.Lock()
	next = s.nextLocked(1)
	s.mu.Unlock()
	if next.GetConfig().GetVersion() != src.version || next.GetConfig().GetHash() != src.st.Hash() {
		t.Fatalf("a stream behind the whole history gets %T, want the complete state of version %d", next.GetMessage(), src.version)
	}
	fast.readUntil(src.version)
	if fast.fulls != 1 || fast.chain.State.Hash() != src.st.Hash() {
		t.Fatalf("the fast client got %d complete states, want only the first", fast.fulls)
	}
}

// A Resync is answered with the complete state of the newest version; a new stream (a
// restarted pusher) starts with the marker and the complete state.
func TestResyncAndNewStreamGetTheCompleteState(t *testing.T) {
	s, c := start(t)
	src := &source{epoch: "e1"}
	src.first(s)
	src.next(s, 4, 0)
	cl := follow(t, c)
	cl.readUntil(src.version)
	if err := cl.stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Resync{Resync: &configv1.Resync{Reason: "test"}}}); err != nil {
		t.Fatal(err)
	}
	m, err := cl.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if m.GetConfig().GetVersion() != src.version || m.GetConfig().GetHash() != src.st.Hash() {
		t.Fatalf("answer to a Resync = %v, want the complete state of version %d", m, src.version)
	}

	restarted := follow(t, c)
	m, err = restarted.stream.Recv()
	if err != nil || m.GetInitialSyncComplete().GetVersion() != 1 {
		t.Fatalf("a new stream starts with %v (%v), want the marker of version 1", m, err)
	}
	restarted.readUntil(src.version)
	if restarted.fulls != 1 || restarted.deltas != 0 {
		t.Fatalf("a new stream got %d complete states and %d deltas, want the complete state only", restarted.fulls, restarted.deltas)
	}
}
