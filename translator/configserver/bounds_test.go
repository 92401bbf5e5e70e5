package configserver

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/syncbuf"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// recorder is a Metrics that remembers what the bounds tests look at.
type recorder struct {
	mu        sync.Mutex
	slow      int
	tooLarge  chan struct{} // one value per TooLarge
	forgotten []string
}

func newRecorder() *recorder { return &recorder{tooLarge: make(chan struct{}, 16)} }

func (r *recorder) SetPushers(int)     {}
func (r *recorder) Ack(string, uint64) {}
func (r *recorder) Nack(string)        {}
func (r *recorder) Published(uint64)   {}
func (r *recorder) SlowPusherDropped() { r.mu.Lock(); r.slow++; r.mu.Unlock() }
func (r *recorder) TooLarge()          { r.tooLarge <- struct{}{} }
func (r *recorder) Forget(p string)    { r.mu.Lock(); r.forgotten = append(r.forgotten, p); r.mu.Unlock() }

// lockedBuffer is a log output the test reads while the code under test writes.
type lockedBuffer = syncbuf.Buffer

// serve runs s on a 127.0.0.1:0 listener with the given server options.
func serve(t *testing.T, s *Server, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	configv1.RegisterConfigServiceServer(gs, s)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// pusherStream opens a stream on a connection of its own (so that its flow control is its
// own) and says Hello as pusher id.
func pusherStream(t *testing.T, addr, id string) *client {
	t.Helper()
	return helloStream(t, addr, &configv1.Hello{PusherId: id})
}

// helloStream opens a stream on a connection of its own and says hello.
func helloStream(t *testing.T, addr string, hello *configv1.Hello) *client {
	t.Helper()
	// Received as a pusher receives: up to the server's default message limit.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcx.DefaultMaxMessageSize)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := configv1.NewConfigServiceClient(conn).StreamConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	return &client{t: t, stream: stream}
}

// publishBig publishes version v as a complete state of one host carrying size bytes.
func publishBig(s *Server, epoch string, v uint64, size int) {
	st := contract.NewState()
	h := &configv1.VirtualHost{Hostname: "big.example.com", Routes: []*configv1.Route{{Name: fmt.Sprintf("v%d-%s", v, strings.Repeat("x", size))}}}
	st.Put(contract.VirtualHosts, h.GetHostname(), h)
	st.TakeDelta()
	s.Publish(&configv1.Config{Epoch: epoch, Version: v, Hash: st.Hash(), Resources: st.Resources()}, st)
}

// Bounded resources: a pusher that stops reading is dropped once a send has not completed
// within SendTimeout, the stream's sender goroutine ends with it (what it held is released),
// the drop is counted, and a pusher that keeps reading gets every version meanwhile.
func TestPusherThatStopsReadingIsDroppedAndOthersKeepUp(t *testing.T) {
	stopping := make(chan struct{})
	t.Cleanup(func() { close(stopping) })
	m := newRecorder()
	s, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: stopping, Metrics: m, SendTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	senderEnded := map[string]chan struct{}{"slow": make(chan struct{}), "reader": make(chan struct{})}
	s.senderDone = func(id string) { close(senderEnded[id]) }
	addr := serve(t, s)

	s.NewEpoch("e1")
	publishBig(s, "e1", 1, 1<<10)
	reader := pusherStream(t, addr, "reader")
	reader.readUntil(1)
	slow := pusherStream(t, addr, "slow") // never reads

	// 48 MiB is more than the slow stream's transport buffers and flow-control windows
	// (at most 16 MiB) can take, so its sends block for good.
	v := uint64(1)
	for range 48 {
		v++
		publishBig(s, "e1", v, 1<<20)
		reader.readUntil(v)
	}
	select {
	case <-senderEnded["slow"]:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream of a pusher that stopped reading still has its sender 30s after the last version")
	}
	v++
	publishBig(s, "e1", v, 1<<10)
	reader.readUntil(v)
	select {
	case <-senderEnded["reader"]:
		t.Fatal("the reading pusher's stream ended too")
	default:
	}
	m.mu.Lock()
	dropped := m.slow
	m.mu.Unlock()
	if dropped != 1 {
		t.Fatalf("SlowPusherDropped counted %d times, want 1", dropped)
	}

	// What the slow pusher finds when it reads again: what was buffered, then the end.
	var end error
	for end == nil {
		_, end = slow.stream.Recv()
	}
	if status.Code(end) != codes.ResourceExhausted || !strings.Contains(end.Error(), "stopped reading") {
		t.Fatalf("the slow pusher's stream ended with %v, want RESOURCE_EXHAUSTED saying it stopped reading", end)
	}
	st, err := s.GetStatus(context.Background(), &configv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.GetPushers() {
		if p.GetPusherId() == "slow" && p.GetConnected() {
			t.Fatal("the dropped pusher is still shown connected")
		}
	}
}

// A version whose message exceeds the limit is not sent, is logged once (naming the version,
// its size and the limit) and counted once however many streams meet it, and does not end
// the streams: they keep what they hold and get the next version that fits, as a delta from
// what they hold.
func TestVersionOverTheMessageLimitIsNotSentAndStreamsStay(t *testing.T) {
	const limit = 4096
	stopping := make(chan struct{})
	t.Cleanup(func() { close(stopping) })
	m := newRecorder()
	logs := &lockedBuffer{}
	nacks := make(chan *configv1.Nack, 16)
	s, err := New(Config{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}), Stopping: stopping, Metrics: m, MaxMessageSize: limit,
		OnNack: func(n *configv1.Nack) { nacks <- n }})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s, grpc.MaxSendMsgSize(limit))
	src := &source{epoch: "e1"}
	src.first(s)
	a, b := pusherStream(t, addr, "a"), pusherStream(t, addr, "b")
	a.readUntil(1)
	b.readUntil(1)

	// Version 2 adds a host larger than the limit, built from one Ingress.
	huge := &configv1.ObjectRef{Kind: "Ingress", Namespace: "shop", Name: "huge"}
	big := &configv1.VirtualHost{Hostname: "big.example.com", Routes: []*configv1.Route{{Name: strings.Repeat("x", 2*limit), Source: huge}}}
	src.st.Put(contract.VirtualHosts, big.GetHostname(), big)
	d := src.st.TakeDelta()
	src.version++
	d.Epoch, d.Version, d.BaseVersion, d.Hash = src.epoch, src.version, src.version-1, src.st.Hash()
	s.PublishDelta(d, contract.Digests{})
	select {
	case <-m.tooLarge:
	case <-time.After(10 * time.Second):
		t.Fatal("version 2, over the limit, was not reported")
	}

	// The object it was built from is handed on as refused, once, so that the engine leaves
	// it out with a finding (a single resource over the bound is a finding on its object).
	select {
	case n := <-nacks:
		if len(n.GetObjectsAtFault()) != 1 || n.GetObjectsAtFault()[0].GetName() != "huge" || n.GetConfig().GetVersion() != 2 ||
			!strings.Contains(n.GetError(), fmt.Sprintf("--max-message-size %d", limit)) {
			t.Fatalf("refusal handed on as %v; want version 2, Ingress shop/huge, naming the limit", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the oversized resource's source was not handed on as refused")
	}

	// Version 3 removes it again (and changes a small host): it fits, as one delta from 1.
	src.st.Remove(contract.VirtualHosts, big.GetHostname())
	src.next(s, 1, 2)
	for _, c := range []*client{a, b} {
		m, err := c.stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended after a version over the limit: %v", err)
		}
		if dl := m.GetDelta(); dl.GetVersion() != 3 || dl.GetBaseVersion() != 1 {
			t.Fatalf("after version 2 (over the limit) a stream got %v, want the delta from 1 to 3", m)
		}
		if _, err := c.chain.Receive(m); err != nil {
			t.Fatal(err)
		}
		if c.chain.State.Hash() != src.st.Hash() {
			t.Fatal("a stream holds another state than the source")
		}
	}
	if n := len(m.tooLarge); n != 0 {
		t.Fatalf("version 2 counted %d more times, want once", n)
	}
	if n := len(nacks); n != 0 {
		t.Fatalf("the oversized resource's source handed on %d more times, want once", n)
	}
	out := logs.String()
	if n := strings.Count(out, "larger than the message limit"); n != 1 {
		t.Fatalf("the oversized version was logged %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{"[ERROR]", "version=2", fmt.Sprintf("limit=%d", limit), "size="} {
		if !strings.Contains(out, want) {
			t.Fatalf("the log of the oversized version does not say %q:\n%s", want, out)
		}
	}
}

// Per-pusher state and metric series go once a pusher has had no stream for ForgetAfter,
// and only then. The sweep runs on what the server already does (here: a status read).
func TestGonePushersAreForgottenAfterForgetAfter(t *testing.T) {
	const forgetAfter = 10 * time.Minute
	type step struct {
		connect, disconnect bool
		advance             time.Duration
	}
	connect, disconnect := step{connect: true}, step{disconnect: true}
	wait := func(d time.Duration) step { return step{advance: d} }
	for _, tc := range []struct {
		name      string
		steps     []step
		forgotten bool
	}{
		{"gone for less than ForgetAfter: kept", []step{connect, disconnect, wait(forgetAfter - time.Second)}, false},
		{"gone for ForgetAfter: forgotten", []step{connect, disconnect, wait(forgetAfter)}, true},
		{"connected for longer than ForgetAfter: kept", []step{connect, wait(3 * forgetAfter)}, false},
		{"one of two streams gone for long: kept", []step{connect, connect, disconnect, wait(3 * forgetAfter)}, false},
		{"back before ForgetAfter, then gone again: the wait starts over", []step{connect, disconnect, wait(forgetAfter - time.Second), connect, disconnect, wait(forgetAfter - time.Second)}, false},
		{"back and gone again, for ForgetAfter: forgotten", []step{connect, disconnect, wait(forgetAfter - time.Second), connect, disconnect, wait(forgetAfter)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			m := newRecorder()
			s, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: make(chan struct{}), Metrics: m, ForgetAfter: forgetAfter,
				Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range tc.steps {
				switch {
				case st.connect:
					s.register(&configv1.Hello{PusherId: "p"})
				case st.disconnect:
					s.unregister("p")
				}
				now = now.Add(st.advance)
			}
			resp, err := s.GetStatus(context.Background(), &configv1.GetStatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			shown := len(resp.GetPushers()) == 1
			if shown == tc.forgotten {
				t.Fatalf("pusher shown in GetStatus: %v, want %v", shown, !tc.forgotten)
			}
			wantForget := []string(nil)
			if tc.forgotten {
				wantForget = []string{"p"}
			}
			if fmt.Sprint(m.forgotten) != fmt.Sprint(wantForget) {
				t.Fatalf("metric series forgotten: %v, want %v", m.forgotten, wantForget)
			}
		})
	}
}
