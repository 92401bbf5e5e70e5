// Package backoff owns the one reconnect policy every Sluice loop uses (the translator's watch
// and status streams, the pusher's config stream, the watcher's first discovery): delays that
// double from a minimum to a cap, each with up to 20% random jitter so that many clients
// that lost one server do not come back in step. It is apimachinery's wait.Backoff, kept in
// one place with the resets the loops need.
package backoff

import (
	"context"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Jitter is the largest share of a delay added at random.
const Jitter = 0.2

// Backoff yields growing, jittered delays. It is not safe for concurrent use: each loop owns
// its own.
type Backoff struct {
	min, max time.Duration
	b        wait.Backoff
}

// New returns a Backoff whose first delay is min and whose delays (before jitter) never
// exceed max. A min of zero or less is taken as 100ms, a max below min as min.
func New(min, max time.Duration) *Backoff {
	if min <= 0 {
		min = 100 * time.Millisecond
	}
	if max < min {
		max = min
	}
	b := &Backoff{min: min, max: max}
	b.Reset()
	return b
}

// Next returns the delay to wait now and advances: the next one is twice as long, up to the cap.
func (b *Backoff) Next() time.Duration { return b.b.Step() }

// Reset starts again from the minimum, after a success (a stream that stayed up).
func (b *Backoff) Reset() {
	b.b = wait.Backoff{Duration: b.min, Factor: 2, Jitter: Jitter, Steps: math.MaxInt32, Cap: b.max}
}

// Longest makes every following delay the cap, for a failure that retrying soon cannot cure
// (a config too large for the message limit, a peer that does not serve the call).
func (b *Backoff) Longest() {
	b.b = wait.Backoff{Duration: b.max, Jitter: Jitter}
}

// Healthy is how long a stream must have lasted for its end to retry at the shortest delay
// again: a peer that breaks every stream at once is not hammered.
const Healthy = 30 * time.Second

// Ended is told that a stream which started at start ended: when it lasted Healthy, the
// delays start over from the minimum.
func (b *Backoff) Ended(start time.Time) {
	if time.Since(start) > Healthy {
		b.Reset()
	}
}

// Sleep waits d, or until ctx ends; it returns ctx's error then. Loops that log the delay
// before waiting take it from Next or Ended and wait here.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Wait waits for the next delay, or until ctx ends; it returns ctx's error then.
func (b *Backoff) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }
