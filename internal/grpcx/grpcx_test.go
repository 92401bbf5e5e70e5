package grpcx

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// CountSent is told the size of every message the server sends, with its method: the bytes
// gRPC serialized, counted without serializing again.
func TestCountSentReportsEveryMessageWithItsMethod(t *testing.T) {
	var mu sync.Mutex
	sent := map[string]int{}
	srv, err := NewServer(ServerConfig{Logger: hclog.NewNullLogger(), CountSent: func(method string, n int) {
		mu.Lock()
		sent[method] += n
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Server.Serve(lis)
	defer srv.Stop()
	conn, err := Dial(lis.Addr().String(), ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := sent[healthpb.Health_Check_FullMethodName], proto.Size(resp); got != want || len(sent) != 1 {
		t.Fatalf("counted %v, want %d bytes for %s", sent, want, healthpb.Health_Check_FullMethodName)
	}
}

// Issue 10: translators name every watcher replica; the connection uses the first that
// answers and moves to another when it goes away.
func TestDialMovesToTheNextReplica(t *testing.T) {
	serve := func(name string) (string, func()) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		h := health.NewServer()
		h.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
		healthpb.RegisterHealthServer(s, h)
		go func() { _ = s.Serve(lis) }()
		return lis.Addr().String(), s.Stop
	}
	// A replica that is down: a port nothing listens on.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	a, stopA := serve("a")
	b, stopB := serve("b")
	defer stopB()
	conn, err := Dial(deadAddr+","+a+","+b, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	answers := func(service string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
		return err == nil
	}
	if !answers("a") {
		t.Fatal("the first live replica (a) did not answer")
	}
	stopA()
	testenv.Eventually(t, 10*time.Second, "the connection to move to b after a went away", func() (bool, error) {
		return answers("b"), nil
	})
}
