// Package storetest owns what tests of the store's consumers (the Watch server, the status
// writer) share: a store behind a lock, standing in for the controller's owner goroutine.
package storetest

import (
	"context"
	"sync"

	"github.com/sluice-io/sluice/watcher/store"
)

// Locked serializes access to a store. It serves subscriptions as the controller does, and
// Do runs changes as the store's owner.
type Locked struct {
	mu sync.Mutex
	st *store.Store
}

// New wraps st.
func New(st *store.Store) *Locked { return &Locked{st: st} }

// Subscribe starts a subscription at the store's current revision.
func (l *Locked) Subscribe(_ context.Context, req store.Request) (*store.Subscription, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.Subscribe(req)
}

// Unsubscribe ends a subscription.
func (l *Locked) Unsubscribe(s *store.Subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.Unsubscribe(s)
}

// Do runs f with the store, as its owner.
func (l *Locked) Do(f func(st *store.Store)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l.st)
}
