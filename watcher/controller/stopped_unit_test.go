package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sluice-io/sluice/watcher/store"
)

// A retired epoch's controller answers every Subscribe, never leaves one waiting: once Run
// returned nobody drains its queue, so a request queued before (the owner exited without
// reaching it) or made after gets the error that ended the store's subscriptions at once.
func TestSubscribeIsAnsweredOnceRunReturned(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error // the cause Run's context ends with
		want  error
	}{
		{"epoch retired", store.ErrEpochEnded, store.ErrEpochEnded},
		{"watcher stopping", context.Canceled, ErrShutdown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inf := newScriptedInformer()
			c, err := New(Config{Logger: hclog.NewNullLogger(), SyncTimeout: time.Hour, Store: store.Config{Epoch: "e1"},
				Kinds: []WatchedKind{{Kind: testKind("KindA"), Informers: []Informer{inf}}}})
			if err != nil {
				t.Fatal(err)
			}
			answers := make(chan error, 2)
			subscribe := func() {
				sub, err := c.Subscribe(context.Background(), store.Request{})
				if sub != nil {
					err = errors.New("got a subscription from a stopped controller")
				}
				answers <- err
			}
			// Queued while the owner runs: Run returns without ever popping it.
			go subscribe()
			select {
			case <-c.q.Notify():
			case <-time.After(watchdog):
				t.Fatal("the request was not queued")
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(tc.cause)
			if err := c.Run(ctx); err != nil {
				t.Fatalf("Run: %v", err)
			}
			// Made after Run returned.
			go subscribe()
			for i := range 2 {
				select {
				case err := <-answers:
					if !errors.Is(err, tc.want) {
						t.Fatalf("answer %d: %v, want %v", i, err, tc.want)
					}
				case <-time.After(watchdog):
					t.Fatalf("a Subscribe on a stopped controller was never answered (%d of 2 answered)", i)
				}
			}
			c.Unsubscribe(nil) // nothing to release; must not block or panic
		})
	}
}
