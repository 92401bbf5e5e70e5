package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/store"
)

// fakeInformer hands its initial list to the handler and reports synced the moment the last
// object has been handed over: the edge of scenario 4.
type fakeInformer struct {
	objs    []*kinds.Stored
	handler cache.ResourceEventHandler
	synced  chan struct{}
}

func (f *fakeInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.handler = h
	return f, nil
}

func (f *fakeInformer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return nil
}

func (f *fakeInformer) RunWithContext(ctx context.Context) {
	for _, o := range f.objs {
		f.handler.OnAdd(o, true)
	}
	close(f.synced) // exactly as the last object was delivered
	<-ctx.Done()
}

func (f *fakeInformer) HasSynced() bool {
	select {
	case <-f.synced:
		return true
	default:
		return false
	}
}

func (f *fakeInformer) HasSyncedChecker() cache.DoneChecker { return f }
func (f *fakeInformer) Name() string                        { return "fake" }
func (f *fakeInformer) Done() <-chan struct{}               { return f.synced }

// Scenario 4 (docs/design.md): the last object of the initial list arrives just before the
// informer reports synced. The barrier waits for it: the first snapshot after the marker
// holds every object of every kind, the last ones included, and its inventory says so.
// Repeated, because the edge is a race when the rule is broken.
func TestLastInitialObjectIsInTheFirstSnapshot(t *testing.T) {
	gvks := []schema.GroupVersionKind{
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		{Version: "v1", Kind: "Service"},
	}
	const perKind = 50
	for run := 0; run < 100; run++ {
		var watched []WatchedKind
		for _, gvk := range gvks {
			k := &kinds.Kind{Spec: kinds.Spec{GVR: gvk.GroupVersion().WithResource(gvk.Kind), Required: true}, GVK: gvk, Served: true}
			inf := &fakeInformer{synced: make(chan struct{})}
			for i := 0; i < perKind; i++ {
				name := fmt.Sprintf("o%d", i)
				inf.objs = append(inf.objs, &kinds.Stored{Wire: &watchv1.Object{Kind: k.Wire(), Namespace: "ns", Name: name, ResourceVersion: fmt.Sprint(i + 1),
					ContentType: watchstream.ContentTypeJSON, Raw: []byte("{}")}})
			}
			watched = append(watched, WatchedKind{Kind: k, Informers: []Informer{inf}})
		}
		if got, want := firstSnapshot(t, run, watched), perKind*len(gvks); got != want {
			t.Fatalf("run %d: the first snapshot after the barrier holds %d objects, want %d (the last ones were not waited for)", run, got, want)
		}
	}
}

// firstSnapshot runs a controller over watched until its barrier opens and returns how many
// objects the first subscription's snapshot holds; run numbers the attempt in messages.
func firstSnapshot(t *testing.T, run int, watched []WatchedKind) int {
	t.Helper()
	c, err := New(Config{Logger: hclog.NewNullLogger(), Kinds: watched, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	select {
	case <-c.Synced():
	case err := <-done:
		t.Fatalf("run %d: the controller stopped before the barrier: %v", run, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("run %d: the barrier never opened", run)
	}
	var req store.Request
	for _, wk := range watched {
		req.Kinds = append(req.Kinds, wk.Kind.Wire())
	}
	sub, err := c.Subscribe(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unsubscribe(sub)
	if !sub.SyncedAtStart {
		t.Fatalf("run %d: a subscription after the barrier is not synced at start", run)
	}
	return len(sub.Snapshot())
}

// Scenario 11 (docs/design.md): a controller whose context ends with store.ErrEpochEnded
// ends its subscriptions with that error (the Watch server then tells clients the epoch
// ended); any other end is a shutdown.
func TestRetiredEpochEndsSubscriptionsWithErrEpochEnded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
		want  error
	}{{"epoch ended", store.ErrEpochEnded, store.ErrEpochEnded}, {"shutdown", nil, ErrShutdown}} {
		t.Run(tc.name, func(t *testing.T) {
			k := &kinds.Kind{Spec: kinds.Spec{GVR: schema.GroupVersionResource{Version: "v1", Resource: "services"}, Required: true},
				GVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"}, Served: true}
			inf := &fakeInformer{synced: make(chan struct{})}
			c, err := New(Config{Logger: hclog.NewNullLogger(), Kinds: []WatchedKind{{Kind: k, Informers: []Informer{inf}}}, SyncTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			sub, err := c.Subscribe(ctx, store.Request{})
			if err != nil {
				t.Fatal(err)
			}
			cancel(tc.cause)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			<-sub.Done()
			if !errors.Is(sub.Err(), tc.want) {
				t.Fatalf("subscription ended with %v, want %v", sub.Err(), tc.want)
			}
		})
	}
}
