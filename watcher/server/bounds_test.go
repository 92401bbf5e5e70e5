package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
	"github.com/sluice-io/sluice/watcher/store/storetest"
)

// countingMetrics counts dropped clients.
type countingMetrics struct{ dropped chan struct{} }

func (countingMetrics) StreamOpened()    {}
func (countingMetrics) StreamClosed()    {}
func (m countingMetrics) ClientDropped() { m.dropped <- struct{}{} }

// A client that stops reading while its subscription's buffer still has room is dropped
// once a send has not completed within SendTimeout: the stream ends with RESOURCE_EXHAUSTED
// saying so, its sender goroutine ends and its subscription is released, the drop is
// counted, and a client that reads gets every change meanwhile.
func TestClientThatStopsReadingIsDroppedAfterTheSendTimeout(t *testing.T) {
	st, err := store.New(store.Config{Kinds: testKinds, SubscriberBuffer: 1 << 20}) // the buffer never drops it
	if err != nil {
		t.Fatal(err)
	}
	st.MarkSynced()
	src := storetest.New(st)
	senderEnded := map[string]chan struct{}{"slow": make(chan struct{}), "reader": make(chan struct{})}
	m := countingMetrics{dropped: make(chan struct{}, 4)}
	srv, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: make(chan struct{}), Metrics: m, SendTimeout: time.Second,
		senderDone: func(client string) { close(senderEnded[client]) }})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetSource(src)
	addr := serveWatch(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	watch := func(name string) watchv1.WatchService_WatchClient {
		t.Helper()
		// Fixed, small flow-control windows: a client that does not read stalls the sender.
		client := dialWatch(t, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		w, err := client.Watch(ctx, &watchv1.WatchRequest{ClientName: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil { // the stream is open
			t.Fatal(err)
		}
		return w
	}
	slow, reader := watch("slow"), watch("reader")
	waitSubscribers(t, src, 2)

	// 300 changes of 64 KiB: more than the slow client's windows and socket buffers hold,
	// far less than its subscription's buffer.
	raw := make([]byte, 64<<10)
	for i := range 300 {
		src.Do(func(st *store.Store) {
			if _, err := st.Upsert(&watchv1.Object{Kind: testKinds[0], Namespace: "ns", Name: fmt.Sprintf("o%d", i), ResourceVersion: fmt.Sprint(i), Raw: raw}); err != nil {
				t.Fatal(err)
			}
		})
		// The reader keeps up; the marker took revision 1.
		rev := uint64(i) + 2
		for {
			msg, err := reader.Recv()
			if err != nil {
				t.Fatalf("the reading client's stream ended before revision %d: %v", rev, err)
			}
			if msg.GetRevision() == rev && msg.GetUpsert() != nil {
				break
			}
		}
	}
	select {
	case <-senderEnded["slow"]:
	case <-ctx.Done():
		t.Fatal("the stream of a client that stopped reading still has its sender")
	}
	select {
	case <-m.dropped:
	default:
		t.Fatal("the drop was not counted")
	}
	select {
	case <-senderEnded["reader"]:
		t.Fatal("the reading client's stream ended too")
	default:
	}
	// The handler returned; its deferred Unsubscribe is on its way to the owner.
	testenv.Eventually(t, 30*time.Second, "the reader's subscription only", func() (bool, error) {
		var n int
		src.Do(func(st *store.Store) { n = st.Subscribers() })
		return n == 1, fmt.Errorf("%d subscriptions", n)
	})
	var end error
	for end == nil {
		_, end = slow.Recv()
	}
	if status.Code(end) != codes.ResourceExhausted || !strings.Contains(end.Error(), "stopped reading") {
		t.Fatalf("the slow client's stream ended with %v, want RESOURCE_EXHAUSTED saying it stopped reading", end)
	}
}
