package engine

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/sluice-io/sluice/internal/grpcx"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// docs/design.md, "Reconnects": a translator started before its watcher opens its watch
// stream as soon as the watcher listens, not a stream backoff later. The backoff here is
// an hour: had the first attempt failed while the connection was being made, the stream
// would not open within the test.
func TestWatchStreamOpensOnceTheWatcherListens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// An address nothing listens on yet.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()

	conn, err := grpcx.Dial(addr, grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e, err := New(Config{Logger: hclog.NewNullLogger(), Client: watchv1.NewWatchServiceClient(conn), Publisher: &firstPublisher{done: make(chan *configv1.Config, 1)},
		Options: translate.Options{IngressClass: "sluice"}, BackoffMin: time.Hour, BackoffMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = e.Run(runCtx) }()

	// The engine's first attempt found nobody listening.
	for s := conn.GetState(); s != connectivity.TransientFailure; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatal("the engine never tried to connect")
		}
	}
	opened := make(chan struct{}, 1)
	fw := &fakeWatcher{scripts: make(chan func(func(*watchv1.WatchResponse)) error), onWatch: func() {
		select {
		case opened <- struct{}{}:
		default:
		}
	}}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	gs := grpc.NewServer()
	watchv1.RegisterWatchServiceServer(gs, fw)
	go gs.Serve(lis)
	defer gs.Stop()
	select {
	case <-opened:
	case <-ctx.Done():
		t.Fatal("the watch stream did not open after the watcher started listening")
	}
}
