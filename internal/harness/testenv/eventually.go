package testenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often Eventually asks again: often enough that a wait ends close to
// the event, seldom enough not to load a shared machine. A condition that lists many objects
// from the apiserver asks less often, through EventuallyEvery.
const PollInterval = 25 * time.Millisecond

// permanent marks an error after which asking again is pointless.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that Poll and Eventually stop at once with it: the condition can
// never hold any more (the process it waits on exited, a stream ended).
func Permanent(err error) error { return permanent{err} }

// Poll asks cond, at once and then every interval, until it holds, returns a Permanent
// error, or timeout passes. While cond does not hold, its error (which may be nil) says what
// it saw, or why it could not look: the last one is returned with the timeout. Poll never
// fails a test, so it may run on any goroutine.
func Poll(interval, timeout time.Duration, cond func() (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		var p permanent
		if errors.As(err, &p) {
			return false, p
		}
		last = err
		return ok, nil
	})
	var p permanent
	switch {
	case err == nil:
		return nil
	case errors.As(err, &p):
		return p.err
	case last != nil:
		return fmt.Errorf("timed out after %s: %w", timeout, last)
	default:
		return fmt.Errorf("timed out after %s", timeout)
	}
}

// Eventually polls cond every PollInterval until it holds, and otherwise fails the test,
// naming what it waited for and what cond last said (see Poll). It must run on the test's
// goroutine.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	EventuallyEvery(t, PollInterval, timeout, what, cond)
}

// EventuallyEvery is Eventually asking every interval.
func EventuallyEvery(t testing.TB, interval, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := Poll(interval, timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
