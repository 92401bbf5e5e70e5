package status

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/grpcx"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// reports records what reaches a Writer.
type reports struct {
	mu  sync.Mutex
	got []*watchv1.ReportStatusRequest
	new chan struct{}
}

func (r *reports) Report(_ Origin, req *watchv1.ReportStatusRequest) {
	r.mu.Lock()
	r.got = append(r.got, req)
	r.mu.Unlock()
	select {
	case r.new <- struct{}{}:
	default:
	}
}

func (r *reports) wait(t *testing.T, n int) []*watchv1.ReportStatusRequest {
	t.Helper()
	for {
		r.mu.Lock()
		got := append([]*watchv1.ReportStatusRequest(nil), r.got...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.new:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d reports arrived, want %d", len(got), n)
		}
	}
}

type replica struct {
	addr string
	svc  *Service
	lead *leadership
	rep  *reports
}

func startReplica(t *testing.T) *replica {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopping := make(chan struct{})
	var mu sync.Mutex
	var conns []*grpc.ClientConn
	svc, err := NewService(ServiceConfig{Logger: hclog.NewNullLogger(), Stopping: stopping, Dial: func(addr string) (grpc.ClientConnInterface, error) {
		c, err := grpcx.Dial(addr, grpcx.ClientConfig{})
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return c, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	watchv1.RegisterStatusServiceServer(gs, svc)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() {
		close(stopping)
		gs.Stop()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return &replica{addr: lis.Addr().String(), svc: svc, lead: newLeadership(), rep: &reports{new: make(chan struct{}, 1)}}
}

func (r *replica) serve() { r.svc.SetLeadership(r.lead, r.rep) }

func openStream(t *testing.T, addr string, md ...string) (grpc.BidiStreamingClient[watchv1.ReportStatusRequest, watchv1.ReportStatusResponse], func()) {
	t.Helper()
	conn, err := grpcx.Dial(addr, grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	s, err := watchv1.NewStatusServiceClient(conn).ReportStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, func() { cancel(); _ = conn.Close() }
}

func wantUnavailable(t *testing.T, s grpc.BidiStreamingClient[watchv1.ReportStatusRequest, watchv1.ReportStatusResponse], why string) {
	t.Helper()
	for {
		_, err := s.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: stream ended with %v, want UNAVAILABLE", why, err)
		}
		return
	}
}

// docs/operations.md, "Status write-back and leader election": translators may connect to any replica. A follower relays the status stream to
// the leader, whose Writer gets the reports; when leadership changes the stream ends with
// UNAVAILABLE, so that the translator reports in full to the new leader.
func TestServiceFollowerRelaysToTheLeader(t *testing.T) {
	leader, follower := startReplica(t), startReplica(t)
	leader.lead.set(Leader{Identity: Identity("a", leader.addr), Address: leader.addr, Self: true})
	follower.lead.set(Leader{Identity: Identity("a", leader.addr), Address: leader.addr})
	leader.serve()
	follower.serve()

	s, done := openStream(t, follower.addr)
	defer done()
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetRelayed() || resp.GetLeader() != Identity("a", leader.addr) {
		t.Fatalf("first answer = %v, want the leader a, relayed", resp)
	}
	req := &watchv1.ReportStatusRequest{Source: "sluice.io/ingress-controller/sluice", Full: true,
		Objects: []*watchv1.ObjectStatus{{Key: &watchv1.ObjectKey{Kind: "Ingress", Namespace: "ns", Name: "x"}, Uid: "u"}}}
	if err := s.Send(req); err != nil {
		t.Fatal(err)
	}
	if got := leader.rep.wait(t, 1); got[0].GetObjects()[0].GetKey().GetName() != "x" {
		t.Fatalf("the leader got %v", got)
	}
	follower.rep.mu.Lock()
	n := len(follower.rep.got)
	follower.rep.mu.Unlock()
	if n != 0 {
		t.Fatalf("the follower's own writer got %d reports", n)
	}
	// The follower learns of a new leader: its relayed stream ends.
	follower.lead.set(Leader{Identity: "b@10.0.0.1:1", Address: "10.0.0.1:1"})
	wantUnavailable(t, s, "after a leader change on the follower")

	// And on the leader: losing the lease ends its own streams.
	s2, done2 := openStream(t, leader.addr)
	defer done2()
	if resp, err := s2.Recv(); err != nil || resp.GetRelayed() {
		t.Fatalf("first answer of the leader = %v, %v", resp, err)
	}
	leader.lead.set(Leader{})
	wantUnavailable(t, s2, "after the leader lost the lease")
}

// docs/operations.md, "Status write-back and leader election": a replica refuses reports until it can place them: before its barrier opened
// (no leadership yet), while nobody leads, and a relayed stream when it does not lead itself
// (two replicas that disagree about the leader never relay in a loop).
func TestServiceRefusesWhatItCannotPlace(t *testing.T) {
	r := startReplica(t)
	s, done := openStream(t, r.addr)
	wantUnavailable(t, s, "before SetLeadership")
	done()

	r.serve()
	s, done = openStream(t, r.addr)
	wantUnavailable(t, s, "while nobody leads")
	done()

	r.lead.set(Leader{Identity: "b@127.0.0.1:1", Address: "127.0.0.1:1"})
	s, done = openStream(t, r.addr, relayedKey, "1")
	wantUnavailable(t, s, "a relayed stream on a follower")
	done()
}
