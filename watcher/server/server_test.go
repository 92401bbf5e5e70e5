package server

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
	"github.com/sluice-io/sluice/watcher/store/storetest"
)

// A client that stops reading is dropped with RESOURCE_EXHAUSTED once it is a bounded number
// of changes behind; the store never waits for it, and a client that reads gets every change.
func TestSlowClientDroppedOthersUnaffected(t *testing.T) {
	st, err := store.New(store.Config{Kinds: testKinds, SubscriberBuffer: 100})
	if err != nil {
		t.Fatal(err)
	}
	st.MarkSynced()
	src := storetest.New(st)
	stopping := make(chan struct{})
	srv, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: stopping})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetSource(src)
	addr := serveWatch(t, srv)
	dial := func() watchv1.WatchServiceClient {
		// Fixed, small flow-control windows: a client that does not read stalls the sender.
		client := dialWatch(t, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		return client
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slow, err := dial().Watch(ctx, &watchv1.WatchRequest{ClientName: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Recv(); err != nil { // the stream is open; now it stops reading
		t.Fatal(err)
	}
	fast, err := dial().Watch(ctx, &watchv1.WatchRequest{ClientName: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	const changes = 3000
	got := make(chan uint64, 1)
	var fastAt atomic.Uint64
	go func() {
		for {
			m, err := fast.Recv()
			if err != nil {
				got <- fastAt.Load()
				return
			}
			if m.GetUpsert() != nil {
				fastAt.Store(m.GetRevision())
				if m.GetRevision() == changes+1 { // the marker took revision 1
					got <- m.GetRevision()
					return
				}
			}
		}
	}()
	waitSubscribers(t, src, 2)
	raw := make([]byte, 4096)
	for i := 0; i < changes; i++ {
		// Pace the changes to the reading client (never more than 50 ahead of it): a burst
		// larger than the buffer would rightly drop any client.
		testenv.EventuallyEvery(t, time.Millisecond, time.Minute, "the reading client to catch up", func() (bool, error) {
			select {
			case last := <-got:
				return false, testenv.Permanent(fmt.Errorf("its stream ended at revision %d", last))
			default:
			}
			return uint64(i) <= fastAt.Load()+50, nil
		})
		src.Do(func(st *store.Store) { // the store's owner: it must never wait on a subscriber
			if _, err := st.Upsert(&watchv1.Object{Kind: testKinds[0], Namespace: "ns", Name: fmt.Sprintf("o%d", i), ResourceVersion: fmt.Sprint(i), Raw: raw}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if last := <-got; last != changes+1 {
		t.Fatalf("the reading client got up to revision %d, want %d", last, changes+1)
	}
	for {
		_, err := slow.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("slow client's stream ended with %v, want RESOURCE_EXHAUSTED", err)
		}
		return
	}
}

func waitSubscribers(t *testing.T, src *storetest.Locked, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d subscribers", n), func() (bool, error) {
		var got int
		src.Do(func(st *store.Store) { got = st.Subscribers() })
		return got >= n, fmt.Errorf("%d subscribed", got)
	})
}

// serveWatch serves srv's Watch service on a loopback listener until the test ends and
// returns the address.
func serveWatch(t *testing.T, srv *Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	watchv1.RegisterWatchServiceServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// dialWatch returns a Watch client of addr (plaintext, with opts), closed when the test ends.
func dialWatch(t *testing.T, addr string, opts ...grpc.DialOption) watchv1.WatchServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return watchv1.NewWatchServiceClient(conn)
}
