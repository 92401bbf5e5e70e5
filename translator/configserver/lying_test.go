package configserver

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/syncbuf"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// liarLog is a log output the test reads while the code under test writes.
type liarLog = syncbuf.Buffer

// countingMetrics counts NACKs and connected pushers, and signals every change.
type countingMetrics struct {
	nopMetrics
	mu        sync.Mutex
	nacks     int
	acks      int
	connected int
	changed   chan struct{}
}

func (m *countingMetrics) Nack(string) {
	m.mu.Lock()
	m.nacks++
	m.mu.Unlock()
	m.signal()
}

func (m *countingMetrics) Ack(string, uint64) {
	m.mu.Lock()
	m.acks++
	m.mu.Unlock()
	m.signal()
}

func (m *countingMetrics) SetPushers(n int) {
	m.mu.Lock()
	m.connected = n
	m.mu.Unlock()
	m.signal()
}

func (m *countingMetrics) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

func (m *countingMetrics) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		m.mu.Lock()
		ok := cond()
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-m.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// liarEnv is a config server on 127.0.0.1:0 whose log and metrics the test reads; its clock
// stands still, so that what it logs does not depend on the test's speed.
type liarEnv struct {
	s       *Server
	client  configv1.ConfigServiceClient
	log     *liarLog
	metrics *countingMetrics
	src     *source
	acks    atomic.Int32 // OnAck's calls: ACKs of versions the stream was sent
}

func startLiarEnv(t *testing.T) *liarEnv {
	t.Helper()
	stopping := make(chan struct{})
	t.Cleanup(func() { close(stopping) })
	e := &liarEnv{log: &liarLog{}, metrics: &countingMetrics{changed: make(chan struct{}, 1)}, src: &source{epoch: "e1"}}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	s, err := New(Config{Logger: hclog.New(&hclog.LoggerOptions{Output: e.log, Level: hclog.Info}), Stopping: stopping,
		Metrics: e.metrics, Now: func() time.Time { return now }, OnAck: func() { e.acks.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
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
	e.client = configv1.NewConfigServiceClient(conn)
	return e
}

// scriptedPusher is a config stream the test writes by hand.
type scriptedPusher struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[configv1.StreamConfigRequest, configv1.StreamConfigResponse]
	cancel context.CancelFunc
	got    []*configv1.StreamConfigResponse
}

func (e *liarEnv) open(t *testing.T) *scriptedPusher {
	t.Helper()
	// The deadline ends a stream the server failed to end, so that such a test fails.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	stream, err := e.client.StreamConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &scriptedPusher{t: t, stream: stream, cancel: cancel}
}

func (p *scriptedPusher) send(msgs ...*configv1.StreamConfigRequest) {
	p.t.Helper()
	for _, m := range msgs {
		if err := p.stream.Send(m); err != nil {
			p.t.Fatalf("send %v: %v", m, err)
		}
	}
}

// readVersion reads until the stream brought version v (a complete state or a delta).
func (p *scriptedPusher) readVersion(v uint64) {
	p.t.Helper()
	for {
		m, err := p.stream.Recv()
		if err != nil {
			p.t.Fatalf("stream ended before version %d: %v", v, err)
		}
		p.got = append(p.got, m)
		if m.GetConfig().GetVersion() == v || m.GetDelta().GetVersion() == v {
			return
		}
	}
}

// ended reads until the stream ends and returns its error.
func (p *scriptedPusher) ended() error {
	p.t.Helper()
	for {
		if _, err := p.stream.Recv(); err != nil {
			return err
		}
	}
}

func hello(id string) *configv1.StreamConfigRequest {
	return &configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{PusherId: id}}}
}

func ack(epoch string, v uint64, hash string) *configv1.StreamConfigRequest {
	return &configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Ack{Ack: &configv1.Ack{Config: &configv1.ConfigRef{Epoch: epoch, Version: v, Hash: hash}}}}
}

func nack(epoch string, v uint64, hash, why string) *configv1.StreamConfigRequest {
	return &configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Nack{Nack: &configv1.Nack{
		Config: &configv1.ConfigRef{Epoch: epoch, Version: v, Hash: hash}, Error: why}}}
}

func (e *liarEnv) pusherStatus(t *testing.T, id string) *configv1.PusherStatus {
	t.Helper()
	resp, err := e.client.GetStatus(context.Background(), &configv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetPushers() {
		if p.GetPusherId() == id {
			return p
		}
	}
	return nil
}

// A lying pusher on the config stream (docs/design.md, reliability scenario 10):
// a first message that is not a Hello (or one without an id), a second Hello, and an ACK or
// NACK of a version the stream was never sent (a later one, another epoch, another hash, or
// before anything was sent) end the stream with INVALID_ARGUMENT naming the lie, and change
// nothing the server records of the pusher: GetStatus shows what it honestly answered.
func TestLyingPusherAnswersAreRefusedStatusUnchanged(t *testing.T) {
	cases := []struct {
		name string
		// unpublished: the server has started an epoch but published no version yet.
		unpublished bool
		script      func(e *liarEnv, p *scriptedPusher)
		wantErr     string
		// wantApplied is the version GetStatus shows as applied (0: none, or no pusher).
		wantApplied uint64
		// wantPusher: the pusher was registered (its Hello was taken).
		wantPusher bool
	}{{
		name:    "FirstMessageIsNotAHello",
		script:  func(e *liarEnv, p *scriptedPusher) { p.send(ack("e1", 1, "")) },
		wantErr: "the first message must be a Hello with a pusher_id",
	}, {
		name:    "HelloWithoutAnID",
		script:  func(e *liarEnv, p *scriptedPusher) { p.send(hello("")) },
		wantErr: "the first message must be a Hello with a pusher_id",
	}, {
		name: "SecondHello",
		script: func(e *liarEnv, p *scriptedPusher) {
			p.send(hello("p"))
			p.readVersion(1)
			p.send(ack("e1", 1, e.s.chain.Version.GetHash()), hello("p"))
		},
		wantErr: "unexpected *configv1.StreamConfigRequest_Hello after Hello", wantApplied: 1, wantPusher: true,
	}, {
		name: "AckOfAVersionNeverSent",
		script: func(e *liarEnv, p *scriptedPusher) {
			p.send(hello("p"))
			p.readVersion(1)
			p.send(ack("e1", 1, e.s.chain.Version.GetHash()), ack("e1", 7, "")) // 7 was never built
		},
		wantErr: "ACK of version e1/7, which this stream was never sent (it was sent e1/1..1)", wantApplied: 1, wantPusher: true,
	}, {
		name: "NackOfAnotherEpoch",
		script: func(e *liarEnv, p *scriptedPusher) {
			p.send(hello("p"))
			p.readVersion(1)
			p.send(ack("e1", 1, ""), nack("e0", 1, "", "a lie"))
		},
		wantErr: "NACK of version e0/1, which this stream was never sent", wantApplied: 1, wantPusher: true,
	}, {
		name: "AckWithAnotherHash",
		script: func(e *liarEnv, p *scriptedPusher) {
			p.send(hello("p"))
			p.readVersion(1)
			p.send(ack("e1", 1, "00000000000000000000"))
		},
		wantErr: "ACK of version e1/1 with hash 000000000000; that version was sent with hash", wantPusher: true,
	}, {
		name:        "AckBeforeAnythingWasSent",
		unpublished: true,
		script: func(e *liarEnv, p *scriptedPusher) {
			p.send(hello("p"), nack("e1", 1, "", "a lie"))
		},
		wantErr: "NACK of version e1/1; this stream was sent no version yet", wantPusher: true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startLiarEnv(t)
			if tc.unpublished {
				e.s.NewEpoch("e1")
			} else {
				e.src.first(e.s)
			}
			p := e.open(t)
			tc.script(e, p)
			err := p.ended()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.wantErr) {
				t.Fatalf("the stream ended with %v; want INVALID_ARGUMENT saying %q", err, tc.wantErr)
			}
			ps := e.pusherStatus(t, "p")
			if (ps != nil) != tc.wantPusher {
				t.Fatalf("GetStatus shows pusher p: %v; want %v", ps, tc.wantPusher)
			}
			if ps.GetConnected() {
				t.Fatalf("the lying stream ended, yet GetStatus shows pusher p connected")
			}
			if ps.GetApplied().GetVersion() != tc.wantApplied || ps.GetRejected() != nil {
				t.Fatalf("GetStatus shows applied %v, rejected %v; want applied version %d, nothing rejected (the lie changed nothing)",
					ps.GetApplied(), ps.GetRejected(), tc.wantApplied)
			}
			// OnAck (the translator's end of its cold start) hears only the honest ACK.
			if wantAcks := int32(min(tc.wantApplied, 1)); e.acks.Load() != wantAcks {
				t.Fatalf("OnAck called %d times; want %d (the honest ACKs only)", e.acks.Load(), wantAcks)
			}
			if tc.wantPusher && !strings.Contains(e.log.String(), tc.wantErr) {
				t.Fatalf("the server's log does not name the lie %q:\n%s", tc.wantErr, e.log)
			}
		})
	}
}

// docs/design.md, reliability scenario 10: a NACK storm. A pusher that NACKs a version it was sent hundreds of times in a
// row is told nothing new and breaks no rule, so its stream stays: every NACK is recorded
// (GetStatus, the metric), but the log says the first and then, once the stream ends, how
// many it left out, instead of one line per NACK. The stream keeps serving versions.
func TestLyingPusherNackStormIsRecordedNotLogged(t *testing.T) {
	const storm = 500
	e := startLiarEnv(t)
	e.src.first(e.s)
	p := e.open(t)
	p.send(hello("p"))
	p.readVersion(1)
	for range storm {
		p.send(nack("e1", 1, e.s.chain.Version.GetHash(), "the data plane refuses it"))
	}
	e.metrics.waitFor(t, "every NACK recorded", func() bool { return e.metrics.nacks == storm })

	ps := e.pusherStatus(t, "p")
	if !ps.GetConnected() || ps.GetRejected().GetVersion() != 1 || ps.GetRejectedError() != "the data plane refuses it" {
		t.Fatalf("GetStatus after the storm: %v; want p connected, version 1 rejected", ps)
	}
	if n := strings.Count(e.log.String(), "config rejected by the data plane"); n != 1 {
		t.Fatalf("%d NACKs logged of a storm of %d; want the first only:\n%s", n, storm, e.log)
	}

	// The stream still serves: the next version comes, and its ACK is recorded.
	e.src.next(e.s, 5, 0)
	p.readVersion(2)
	p.send(ack("e1", 2, e.s.chain.Version.GetHash()))
	e.metrics.waitFor(t, "the ACK recorded", func() bool { return e.metrics.acks == 1 })
	p.cancel()
	e.metrics.waitFor(t, "the stream ended", func() bool { return e.metrics.connected == 0 })
	ps = e.pusherStatus(t, "p")
	if ps.GetApplied().GetVersion() != 2 || ps.GetRejected() != nil {
		t.Fatalf("GetStatus after the ACK of version 2: applied %v, rejected %v", ps.GetApplied(), ps.GetRejected())
	}
	if !strings.Contains(e.log.String(), "more NACKs on this stream than were logged: pusher=p not_logged=499") {
		t.Fatalf("the end of the stream does not say how many NACKs were not logged:\n%s", e.log)
	}
}
