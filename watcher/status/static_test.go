package status

import (
	"context"
	"testing"
	"time"
)

type nopTerms struct{}

func (nopTerms) BeginTerm(context.Context) {}
func (nopTerms) EndTerm()                  {}

// Scenario 11 (docs/design.md), the status side: a replica without leader election leads for
// one term, the watcher's epoch; when the epoch ends the leadership changes (no leader), so
// that status streams end and report again to the next epoch's Writer.
func TestStaticTermEndsWithItsContext(t *testing.T) {
	s := NewStatic(nopTerms{}, "w", "127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	s.Begin(ctx)
	l, changed := s.Leader()
	if !l.Self {
		t.Fatalf("leader %+v after Begin, want self", l)
	}
	cancel()
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the leadership did not change when the term's context ended")
	}
	if l, _ := s.Leader(); l.Self || l.Address != "" {
		t.Fatalf("leader %+v after the term ended, want none", l)
	}
}
