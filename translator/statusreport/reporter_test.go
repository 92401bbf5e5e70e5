package statusreport

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/grpcx"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// statusServer is a StatusService that hands each stream to the test.
type statusServer struct {
	watchv1.UnimplementedStatusServiceServer
	streams chan *serverStream
}

type serverStream struct {
	reqs chan *watchv1.ReportStatusRequest
	end  chan error
}

func (s *statusServer) ReportStatus(stream grpc.BidiStreamingServer[watchv1.ReportStatusRequest, watchv1.ReportStatusResponse]) error {
	ss := &serverStream{reqs: make(chan *watchv1.ReportStatusRequest, 64), end: make(chan error, 1)}
	if err := stream.Send(&watchv1.ReportStatusResponse{Leader: "watcher-0@127.0.0.1:1"}); err != nil {
		return err
	}
	go func() {
		defer close(ss.reqs)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			ss.reqs <- r
		}
	}()
	s.streams <- ss
	select {
	case err := <-ss.end:
		return err
	case <-stream.Context().Done():
		return nil
	}
}

func (ss *serverStream) next(t *testing.T) *watchv1.ReportStatusRequest {
	t.Helper()
	select {
	case r, ok := <-ss.reqs:
		if !ok {
			t.Fatal("the reporter closed the stream")
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a report")
		return nil
	}
}

func nextStream(t *testing.T, s *statusServer) *serverStream {
	t.Helper()
	select {
	case ss := <-s.streams:
		return ss
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a status stream")
		return nil
	}
}

func startReporter(t *testing.T) (*Reporter, *statusServer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &statusServer{streams: make(chan *serverStream, 4)}
	gs := grpc.NewServer()
	watchv1.RegisterStatusServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpcx.Dial(lis.Addr().String(), grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r, err := New(Config{Logger: hclog.NewNullLogger(), Client: watchv1.NewStatusServiceClient(conn), Source: "sluice.io/ingress-controller/sluice",
		BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r, srv
}

func run(t *testing.T, r *Reporter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func st(name string, ips ...string) *watchv1.ObjectStatus {
	s := &watchv1.ObjectStatus{Key: &watchv1.ObjectKey{Kind: "Ingress", Namespace: "ns", Name: name}, Uid: "u-" + name, ManageAddresses: true}
	for _, ip := range ips {
		s.Addresses = append(s.Addresses, &watchv1.GatewayAddress{Type: "IPAddress", Value: ip})
	}
	return s
}

func names(sts []*watchv1.ObjectStatus) []string {
	var out []string
	for _, s := range sts {
		out = append(out, s.GetKey().GetName())
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNewRejectsMissingDependencies(t *testing.T) {
	if _, err := New(Config{Logger: hclog.NewNullLogger(), Source: "s"}); err == nil {
		t.Fatal("New accepted a Config without a Client")
	}
}

// docs/protocol.md, "The status stream": the status stream starts with the full, newest desired statuses (offers never
// block and the latest wins), then carries only what changed.
func TestReporterSendsTheNewestInFullThenOnlyChanges(t *testing.T) {
	r, srv := startReporter(t)
	// Offers before Run never block; only the newest is kept.
	r.Replace([]*watchv1.ObjectStatus{st("a", "10.0.0.1")})
	r.Replace([]*watchv1.ObjectStatus{st("a", "10.0.0.2"), st("b", "10.0.0.2"), st("c", "10.0.0.2")})
	run(t, r)
	ss := nextStream(t, srv)
	full := ss.next(t)
	if !full.GetFull() || full.GetSource() != "sluice.io/ingress-controller/sluice" || !equalStrings(names(full.GetObjects()), []string{"a", "b", "c"}) ||
		full.GetObjects()[0].GetAddresses()[0].GetValue() != "10.0.0.2" {
		t.Fatalf("first report = %v, want the newest offer in full", full)
	}
	// b changes, c goes away, d arrives; a is unchanged and is not sent again.
	r.Replace([]*watchv1.ObjectStatus{st("a", "10.0.0.2"), st("b", "10.0.0.3"), st("d", "10.0.0.2")})
	d := ss.next(t)
	if d.GetFull() || !equalStrings(names(d.GetObjects()), []string{"b", "d"}) || len(d.GetRemovedObjects()) != 1 || d.GetRemovedObjects()[0].GetName() != "c" {
		t.Fatalf("second report = %v, want b and d changed and c removed", d)
	}
}

// docs/protocol.md, "The status stream": a new stream (a watcher restart, a leader change) gets the full desired statuses
// again, including what was offered while no stream was open.
func TestReporterReportsInFullOnEveryNewStream(t *testing.T) {
	r, srv := startReporter(t)
	r.Replace([]*watchv1.ObjectStatus{st("a", "10.0.0.1")})
	run(t, r)
	ss := nextStream(t, srv)
	if first := ss.next(t); !first.GetFull() {
		t.Fatalf("first report = %v, want full", first)
	}
	ss.end <- status.Error(codes.Unavailable, "leadership changed; report again")
	r.Replace([]*watchv1.ObjectStatus{st("a", "10.0.0.1"), st("b", "10.0.0.1")})
	ss2 := nextStream(t, srv)
	again := ss2.next(t)
	if !again.GetFull() || !equalStrings(names(again.GetObjects()), []string{"a", "b"}) {
		t.Fatalf("report on the new stream = %v, want a and b in full", again)
	}
	// An offer equal to what the stream has sends nothing; the next change is a diff.
	r.Replace([]*watchv1.ObjectStatus{st("a", "10.0.0.1"), st("b", "10.0.0.1")})
	r.Replace([]*watchv1.ObjectStatus{st("a", "10.0.0.1"), st("b", "10.0.0.9")})
	d := ss2.next(t)
	want := &watchv1.ReportStatusRequest{Source: "sluice.io/ingress-controller/sluice", Objects: []*watchv1.ObjectStatus{st("b", "10.0.0.9")}}
	if !proto.Equal(d, want) {
		t.Fatalf("report = %v, want %v", d, want)
	}
}
