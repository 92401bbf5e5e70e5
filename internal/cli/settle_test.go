package cli

import (
	"testing"
	"time"
)

// Cold start (docs/design.md): a process's cold start ends once, at its first readiness, or,
// for one whose readiness comes in the middle of the system's start (the translator), at the
// later signal or ColdStartBound after that readiness, whichever comes first.
func TestColdStartEndsOnceAtItsMoment(t *testing.T) {
	type step string
	const (
		ready step = "first readiness"
		over  step = "cold start over"
		bound step = "the bound passes"
	)
	for _, tc := range []struct {
		name  string
		later bool
		steps []step
		// settled is how many settles have started after each step.
		settled []int
	}{
		{"at the first readiness", false, []step{ready, over}, []int{1, 1}},
		{"later: at the signal", true, []step{ready, over, bound}, []int{0, 1, 1}},
		{"later: at the bound when no signal comes", true, []step{ready, bound, over}, []int{0, 1, 1}},
		{"later: a signal before readiness ends it", true, []step{over, ready, bound}, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settled := 0
			var timer func()
			var waited time.Duration
			c := &coldStartEnd{later: tc.later, settle: func() { settled++ },
				after: func(d time.Duration, f func()) { waited, timer = d, f }}
			for i, s := range tc.steps {
				switch s {
				case ready:
					c.firstReady()
				case over:
					c.end()
				case bound:
					if timer == nil {
						t.Fatalf("step %d: no bound was set", i)
					}
					if waited != ColdStartBound {
						t.Fatalf("bound %s, want %s", waited, ColdStartBound)
					}
					timer()
				}
				if settled != tc.settled[i] {
					t.Fatalf("after %q: %d settles, want %d", s, settled, tc.settled[i])
				}
			}
		})
	}
}
