// Package fifo owns the hand-off between producers that must never block (informer
// callbacks, gRPC streams, leader-election callbacks) and the one goroutine that owns a
// component's state: an unbounded FIFO with a wake-up signal, drained whole.
package fifo

import "sync"

// Queue is an unbounded FIFO. Push never blocks; the owner waits on Notify and takes
// everything with PopAll.
type Queue[T any] struct {
	mu     sync.Mutex
	items  []T
	notify chan struct{}
}

// New returns an empty queue.
func New[T any]() *Queue[T] { return &Queue[T]{notify: make(chan struct{}, 1)} }

// Push appends it and wakes the owner.
func (q *Queue[T]) Push(it T) { q.PushWithin(it, -1) }

// PushWithin appends it and wakes the owner, unless the queue already holds limit items
// (a negative limit: no bound); false when it did not. The check and the append are one
// step, so an owner taking items meanwhile cannot make it refuse wrongly.
func (q *Queue[T]) PushWithin(it T, limit int) bool {
	q.mu.Lock()
	if limit >= 0 && len(q.items) >= limit {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return true
}

// Notify receives after a Push; one signal may stand for many items.
func (q *Queue[T]) Notify() <-chan struct{} { return q.notify }

// PopAll takes every queued item, oldest first.
func (q *Queue[T]) PopAll() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}
