package engine

import (
	"context"
	"runtime"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/sluice-io/sluice/internal/grpcx"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// received is one message of the watch stream, with its object decoded when it is an
// upsert. Decoding is the largest share of taking a snapshot in, and it needs nothing of
// the engine's state, so it runs on every core ahead of the goroutine that owns the state
// (docs/design.md, "Cold start"); that goroutine still applies messages one by one, in
// stream order.
type received struct {
	msg *watchv1.WatchResponse
	err error // the error that ended the stream

	// ready is closed when obj and decodeErr are set; nil when there is nothing to decode.
	ready     chan struct{}
	obj       k8sruntime.Object
	decodeErr error
}

// wait returns once the message's object is decoded.
func (r *received) wait() {
	if r.ready != nil {
		<-r.ready
	}
}

// decodeOf decodes an upsert's object (the work decodeAhead spreads over cores).
func decodeOf(m *watchv1.WatchResponse) (k8sruntime.Object, error) {
	return translate.Decode(m.GetUpsert().GetObject())
}

// decodeAhead hands in's messages on in order, each upsert's object decoded by one of
// workers goroutines. Every message given to a worker is decoded even after ctx ends, so
// that a reader waiting on one never waits forever.
func decodeAhead(ctx context.Context, in <-chan grpcx.Received[watchv1.WatchResponse], buffer, workers int) <-chan *received {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make(chan *received, buffer)
	work := make(chan *received, buffer)
	for range workers {
		go func() {
			for r := range work {
				r.obj, r.decodeErr = decodeOf(r.msg)
				close(r.ready)
			}
		}()
	}
	go func() {
		defer close(work)
		for {
			var got grpcx.Received[watchv1.WatchResponse]
			select {
			case got = <-in:
			case <-ctx.Done():
				return
			}
			r := &received{msg: got.Msg, err: got.Err}
			if got.Err == nil && got.Msg.GetUpsert() != nil {
				r.ready = make(chan struct{})
				select {
				case work <- r:
				case <-ctx.Done():
					return
				}
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
			if got.Err != nil {
				return
			}
		}
	}()
	return out
}
