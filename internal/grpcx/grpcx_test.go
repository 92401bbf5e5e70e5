package grpcx

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// CountSent is told the size of every message the server sends, with its method: the bytes
// gRPC serialized, counted without serializing again.
func TestCountSentReportsEveryMessageWithItsMethod(t *testing.T) {
	var mu sync.Mutex
	sent := map[string]int{}
	_, addr := serve(t, ServerConfig{CountSent: func(method string, n int) {
		mu.Lock()
		sent[method] += n
		mu.Unlock()
	}})
	conn, err := Dial(addr, ClientConfig{})
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

// docs/design.md, "Reconnects": translators name every watcher replica; the connection uses the first that
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

// Health answers for every service the server registered, by its full name, while it
// serves, and NOT_SERVING once it stops; a name it does not serve is NOT_FOUND.
func TestHealthAnswersForEachRegisteredService(t *testing.T) {
	srv, err := NewServer(ServerConfig{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, time.Second) }()
	conn, err := Dial(lis.Addr().String(), ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	check := func(service string) (healthpb.HealthCheckResponse_ServingStatus, codes.Code) {
		t.Helper()
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
		return resp.GetStatus(), status.Code(err)
	}
	for _, name := range []string{"", healthpb.Health_ServiceDesc.ServiceName, "grpc.reflection.v1.ServerReflection"} {
		if got, code := check(name); got != healthpb.HealthCheckResponse_SERVING || code != codes.OK {
			t.Errorf("health of %q: %v %v, want SERVING", name, got, code)
		}
	}
	if _, code := check("sluice.nothing.v1.Nothing"); code != codes.NotFound {
		t.Errorf("health of a service not served: %v, want NotFound", code)
	}
	// Shutdown turns every name NOT_SERVING before connections close; read it off the
	// health server itself, since the connection is about to go.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var h healthpb.HealthServer = srv.Health
	resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: healthpb.Health_ServiceDesc.ServiceName})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health after Serve returned: %v %v, want NOT_SERVING", resp.GetStatus(), err)
	}
}
