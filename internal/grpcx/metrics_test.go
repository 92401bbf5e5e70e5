package grpcx

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// docs/operations.md, "Metrics": every process's gRPC servers and clients count their RPCs (go-grpc-middleware's
// Prometheus provider): a call shows up as handled, with its method and code, on both sides,
// and a server's methods exist at 0 before any call.
func TestServerAndClientCountRPCs(t *testing.T) {
	srvReg, cliReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	srv, err := NewServer(ServerConfig{Logger: hclog.NewNullLogger(), Metrics: srvReg})
	if err != nil {
		t.Fatal(err)
	}
	// A second server on the same registry shares the first one's collectors.
	if _, err := NewServer(ServerConfig{Logger: hclog.NewNullLogger(), Metrics: srvReg}); err != nil {
		t.Fatalf("a second server on one registry: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis, time.Second) }()
	t.Cleanup(func() { cancel(); <-served })

	conn, err := Dial(lis.Addr().String(), ClientConfig{Metrics: cliReg})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for range 2 {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "no-such-service"}); err == nil {
		t.Fatal("a check of an unknown service succeeded")
	}

	want := []struct {
		reg    *prometheus.Registry
		name   string
		labels map[string]string
		value  float64
	}{
		{srvReg, "grpc_server_handled_total", map[string]string{"grpc_method": "Check", "grpc_code": "OK"}, 2},
		{srvReg, "grpc_server_handled_total", map[string]string{"grpc_method": "Check", "grpc_code": "NotFound"}, 1},
		{srvReg, "grpc_server_started_total", map[string]string{"grpc_method": "Watch", "grpc_service": "grpc.health.v1.Health"}, 0},
		{cliReg, "grpc_client_handled_total", map[string]string{"grpc_method": "Check", "grpc_code": "OK"}, 2},
		{cliReg, "grpc_client_handled_total", map[string]string{"grpc_method": "Check", "grpc_code": "NotFound"}, 1},
	}
	for _, w := range want {
		got, ok := counter(t, w.reg, w.name, w.labels)
		if !ok || got != w.value {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metric
				}
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}
