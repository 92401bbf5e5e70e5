package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
	"github.com/sluice-io/sluice/watcher/store/storetest"
)

// Scenario 11 (docs/design.md), the server's half: when the watcher retires an epoch, its
// streams end UNAVAILABLE naming the epoch, nothing of it is sent after its store ended them
// (not even changes still buffered), new streams are refused while no epoch serves, Pause's
// channel closes only once every stream of the old epoch ended, and the next source serves
// a snapshot of the new epoch, also to a client resuming with the old epoch.
func TestEpochChangeEndsOldStreamsBeforeTheNewEpochServes(t *testing.T) {
	old, err := store.New(store.Config{Epoch: "old", Kinds: testKinds})
	if err != nil {
		t.Fatal(err)
	}
	old.MarkSynced()
	oldSrc := storetest.New(old)
	var ended atomic.Int32 // streams of the old epoch whose handler returned
	srv, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: make(chan struct{}), streamDone: func(client string) {
		if client == "old" {
			ended.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetSource(oldSrc)
	addr := serveWatch(t, srv)
	client := dialWatch(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stream, err := client.Watch(ctx, &watchv1.WatchRequest{ClientName: "old"})
	if err != nil {
		t.Fatal(err)
	}
	var lastRev uint64
	for { // snapshot start, end, marker
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetInitialSyncComplete() != nil {
			lastRev = m.GetRevision()
			break
		}
	}
	waitSubscribers(t, oldSrc, 1)

	drained := srv.Pause("watcher is starting a new epoch")
	select {
	case <-drained:
		t.Fatal("drained while a stream of the old epoch is still open")
	default:
	}
	if _, err := recvFirst(ctx, client, &watchv1.WatchRequest{}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "starting a new epoch") {
		t.Fatalf("a stream opened while paused: %v, want UNAVAILABLE naming the new epoch", err)
	}
	// The owner changes the store and retires it in one step: the change is buffered in the
	// subscription when it ends, and must not be sent.
	oldSrc.Do(func(st *store.Store) {
		if _, err := st.Upsert(&watchv1.Object{Kind: testKinds[0], Namespace: "ns", Name: "late", ResourceVersion: "1"}); err != nil {
			t.Fatal(err)
		}
		st.Close(store.ErrEpochEnded)
	})
	select {
	case <-drained:
		if ended.Load() != 1 {
			t.Fatal("Pause reported the old epoch drained while its stream was still being served")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Pause never reported the old epoch's streams ended")
	}
	for {
		m, err := stream.Recv()
		if err == nil {
			if m.GetUpsert() != nil {
				t.Fatalf("a change of the retired epoch was sent: %v", m)
			}
			continue // heartbeats
		}
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "epoch old ended") {
			t.Fatalf("old stream ended with %v, want UNAVAILABLE naming epoch old", err)
		}
		break
	}

	next, err := store.New(store.Config{Epoch: "new", Kinds: testKinds})
	if err != nil {
		t.Fatal(err)
	}
	next.MarkSynced()
	srv.SetSource(storetest.New(next))
	first, err := recvFirst(ctx, client, &watchv1.WatchRequest{ResumeEpoch: "old", ResumeRevision: lastRev})
	if err != nil {
		t.Fatal(err)
	}
	if first.GetEpoch() != "new" || first.GetSnapshotStart() == nil {
		t.Fatalf("a client resuming the old epoch got %v, want a snapshot of epoch new", first)
	}
}

func recvFirst(ctx context.Context, c watchv1.WatchServiceClient, req *watchv1.WatchRequest) (*watchv1.WatchResponse, error) {
	s, err := c.Watch(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.Recv()
}
