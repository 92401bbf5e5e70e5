package testenv_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// Poll, which every wait of the tests goes through: it returns once the condition holds,
// keeps asking through errors and names the last one at the timeout, and stops at once on a
// Permanent error.
func TestPollHoldsRetriesAndStops(t *testing.T) {
	transient, final := errors.New("not yet"), errors.New("gone for good")
	cases := []struct {
		name    string
		answers []error // nil: holds
		wantErr error   // nil: Poll returns nil
		calls   int     // how many times cond must have been asked
		timeout time.Duration
	}{
		{"holds at once", []error{nil}, nil, 1, time.Second},
		{"holds after transient errors", []error{transient, transient, nil}, nil, 3, time.Second},
		{"a permanent error stops at once", []error{transient, testenv.Permanent(final), nil}, final, 2, time.Minute},
		{"the timeout names the last error", []error{transient}, transient, 0, 200 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			start := time.Now()
			err := testenv.Poll(testenv.PollInterval, c.timeout, func() (bool, error) {
				a := c.answers[min(calls, len(c.answers)-1)]
				calls++
				return a == nil, a
			})
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("Poll = %v, want %v", err, c.wantErr)
			}
			if c.calls > 0 && calls != c.calls {
				t.Fatalf("cond asked %d times, want %d", calls, c.calls)
			}
			if c.name == "the timeout names the last error" && (time.Since(start) < c.timeout || !strings.Contains(err.Error(), "timed out after")) {
				t.Fatalf("Poll returned %v after %s, before its timeout of %s", err, time.Since(start), c.timeout)
			}
		})
	}
}

// A condition that holds ends the wait even when it also says what it saw.
func TestPollHoldsWhateverTheNote(t *testing.T) {
	if err := testenv.Poll(testenv.PollInterval, time.Second, func() (bool, error) { return true, errors.New("served by alpha") }); err != nil {
		t.Fatalf("Poll = %v for a condition that holds", err)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends its goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Eventually fails with what it waited for and what the condition last said.
func TestEventuallyFailsNamingWhatAndTheLastError(t *testing.T) {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() { // Eventually ends this goroutine through the recorder's Fatalf
		defer close(done)
		testenv.Eventually(r, 100*time.Millisecond, "the moon", func() (bool, error) { return false, errors.New("still cheese") })
	}()
	<-done
	if !strings.Contains(r.msg, "the moon") || !strings.Contains(r.msg, "still cheese") {
		t.Fatalf("Eventually failed with %q, want it to name what it waited for and the last error", r.msg)
	}
}
