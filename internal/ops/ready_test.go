package ops

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Cold start: a process's first readiness ends its cold start, once, whether it becomes
// ready again later (the watcher's next epoch) or not.
func TestOnFirstReadyRunsOnceAtTheFirstReadiness(t *testing.T) {
	calls := 0
	s, err := New(Config{Logger: hclog.NewNullLogger(), Registry: prometheus.NewRegistry(),
		OnFirstReady: func() { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	s.SetNotReady("initial sync not complete")
	if calls != 0 {
		t.Fatal("OnFirstReady ran before the process was ready")
	}
	s.SetReady()
	if calls != 1 || !s.Ready() {
		t.Fatalf("after the first readiness: OnFirstReady ran %d times, ready %v; want once, ready", calls, s.Ready())
	}
	s.SetNotReady("new epoch")
	s.SetReady()
	s.SetReady()
	if calls != 1 {
		t.Fatalf("OnFirstReady ran %d times over three readinesses, want once", calls)
	}
}
