package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/controller"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/store"
)

// raceWatchdog bounds each wait of the race test, so that a Watch left waiting fails the
// test instead of hanging it; it is not a synchronisation.
const raceWatchdog = 10 * time.Second

// The epoch-change race, forced: Watch handlers take the current epoch's controller, the
// epoch then retires exactly as the watcher retires one (Pause, its context ended with
// store.ErrEpochEnded, its controller's Run returned, so nobody drains its queue any more),
// and only then do they subscribe. Every one of them is answered UNAVAILABLE naming the
// ended epoch, the old epoch drains, and the next epoch serves a new Watch its snapshot.
// Without that answer each handler waits for its client to give up, and the drain, and so
// the next epoch, with it.
func TestWatchSubscribingWhileItsEpochRetiresIsAnswered(t *testing.T) {
	const racers = 3
	taken := make(chan string, racers)
	subscribe := make(chan struct{})
	srv, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: make(chan struct{}), subscribing: func(client string) {
		if strings.HasPrefix(client, "racer") {
			taken <- client
			<-subscribe
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	old, oldDone, retire := runController(t, "old")
	srv.SetSource(old)

	addr := serveWatch(t, srv)
	client := dialWatch(t, addr)
	// The clients never give up by themselves within the test: only the watcher can end
	// their wait.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	answers := make(chan error, racers)
	for i := range racers {
		go func() {
			m, err := recvFirst(ctx, client, &watchv1.WatchRequest{ClientName: "racer" + string(rune('0'+i))})
			if err == nil {
				err = errors.New("got a message: " + m.String())
			}
			answers <- err
		}()
	}
	for range racers {
		select {
		case <-taken:
		case <-time.After(raceWatchdog):
			t.Fatal("the Watch handlers never took the epoch's controller")
		}
	}

	// The epoch retires while every handler holds its controller and has not subscribed.
	drained := srv.Pause("watcher is starting a new epoch: the set of served kinds changed")
	if since, _ := srv.Unserved(); since.IsZero() {
		t.Fatal("paused, yet the server says an epoch serves")
	}
	retire(store.ErrEpochEnded)
	select {
	case <-oldDone:
	case <-time.After(raceWatchdog):
		t.Fatal("the retired epoch's controller did not stop")
	}
	close(subscribe)

	for i := range racers {
		select {
		case err := <-answers:
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "epoch ended") {
				t.Fatalf("a Watch subscribing to a retired epoch got %v, want UNAVAILABLE saying its epoch ended", err)
			}
		case <-time.After(raceWatchdog):
			t.Fatalf("a Watch subscribing to a retired epoch was never answered (%d of %d answered)", i, racers)
		}
	}
	select {
	case <-drained:
	case <-time.After(raceWatchdog):
		t.Fatal("the retired epoch never drained")
	}

	next, _, _ := runController(t, "new")
	srv.SetSource(next)
	if since, _ := srv.Unserved(); !since.IsZero() {
		t.Fatal("an epoch serves, yet the server says none does")
	}
	wctx, wcancel := context.WithTimeout(ctx, raceWatchdog)
	defer wcancel()
	first, err := recvFirst(wctx, client, &watchv1.WatchRequest{ClientName: "after"})
	if err != nil {
		t.Fatalf("a Watch after the epoch change: %v", err)
	}
	if first.GetEpoch() != "new" || first.GetSnapshotStart() == nil {
		t.Fatalf("a Watch after the epoch change got %v, want a snapshot of epoch new", first)
	}
}

// runController runs a controller of epoch over one kind whose informer synced empty, and
// waits for its barrier. retire ends its context with a cause; done is closed when its Run
// returned.
func runController(t *testing.T, epoch string) (c *controller.Controller, done <-chan struct{}, retire context.CancelCauseFunc) {
	t.Helper()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "KindA"}
	k := &kinds.Kind{Spec: kinds.Spec{GVR: gvk.GroupVersion().WithResource("kindas"), Required: true}, GVK: gvk, Served: true}
	c, err := controller.New(controller.Config{Logger: hclog.NewNullLogger(), SyncTimeout: time.Hour, Store: store.Config{Epoch: epoch},
		Kinds: []controller.WatchedKind{{Kind: k, Informers: []controller.Informer{syncedInformer{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := c.Run(ctx); err != nil {
			t.Errorf("controller of epoch %s: %v", epoch, err)
		}
	}()
	t.Cleanup(func() {
		cancel(nil)
		<-stopped
	})
	select {
	case <-c.Synced():
	case <-time.After(raceWatchdog):
		t.Fatalf("the controller of epoch %s never synced", epoch)
	}
	return c, stopped, cancel
}

// syncedInformer is an informer whose initial list was empty and is delivered.
type syncedInformer struct{}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (syncedInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return syncedInformer{}, nil
}
func (syncedInformer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return nil
}
func (syncedInformer) RunWithContext(ctx context.Context)  { <-ctx.Done() }
func (syncedInformer) HasSynced() bool                     { return true }
func (syncedInformer) HasSyncedChecker() cache.DoneChecker { return syncedInformer{} }
func (syncedInformer) Name() string                        { return "synced" }
func (syncedInformer) Done() <-chan struct{}               { return closed }

// endsOnSubscribe hands out a subscription its store ends (the epoch retires) right after
// taking it, before the handler sent anything of it.
type endsOnSubscribe struct{ st *store.Store }

func (e endsOnSubscribe) Subscribe(_ context.Context, req store.Request) (*store.Subscription, error) {
	sub, err := e.st.Subscribe(req)
	e.st.Close(store.ErrEpochEnded)
	return sub, err
}
func (e endsOnSubscribe) Unsubscribe(sub *store.Subscription) { e.st.Unsubscribe(sub) }

// A stream whose epoch retires while its snapshot is being sent sends nothing more of it:
// the old epoch drains within one send, not after whole snapshots.
func TestSnapshotOfARetiredEpochIsNotSent(t *testing.T) {
	st, err := store.New(store.Config{Epoch: "old", Kinds: testKinds})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := st.Upsert(&watchv1.Object{Kind: testKinds[0], Namespace: "ns", Name: "o" + string(rune('0'+i)), ResourceVersion: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	st.MarkSynced()
	srv, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: make(chan struct{})})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetSource(endsOnSubscribe{st})
	addr := serveWatch(t, srv)
	client := dialWatch(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), raceWatchdog)
	defer cancel()
	m, err := recvFirst(ctx, client, &watchv1.WatchRequest{})
	if err == nil {
		t.Fatalf("a stream of a retired epoch was sent %v", m)
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "epoch old ended") {
		t.Fatalf("got %v, want UNAVAILABLE naming epoch old", err)
	}
}
