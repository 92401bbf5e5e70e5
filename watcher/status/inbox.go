package status

import (
	"context"
	"sync"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// item is one thing for the Writer's owner goroutine: a report, or a term beginning or ending.
type item struct {
	report *watchv1.ReportStatusRequest
	begin  context.Context
	end    bool
}

// inbox is an unbounded FIFO that never blocks its producers (gRPC streams, the elector); the
// owner drains it whole. Reports are small and deltas after the first, so it stays short.
type inbox struct {
	mu     sync.Mutex
	items  []item
	notify chan struct{}
}

func newInbox() inbox { return inbox{notify: make(chan struct{}, 1)} }

func (q *inbox) push(it item) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *inbox) popAll() []item {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}
