package backoff

import (
	"context"
	"testing"
	"time"
)

// Every reconnect loop (docs/design.md, "Reconnects"): delays double from the minimum up to
// the cap, each stretched by at most 20% jitter, and a reset starts over.
func TestDelaysDoubleUpToTheCapWithJitter(t *testing.T) {
	b := New(100*time.Millisecond, time.Second)
	bases := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	jittered := false
	for i, base := range bases {
		base *= time.Millisecond
		d := b.Next()
		if d < base || d > base+time.Duration(float64(base)*Jitter) {
			t.Fatalf("delay %d = %v, want within [%v, %v]", i, d, base, base+time.Duration(float64(base)*Jitter))
		}
		if d != base {
			jittered = true
		}
	}
	if !jittered {
		t.Error("seven delays without any jitter: clients that lost one server would come back in step")
	}
	b.Reset()
	if d := b.Next(); d > 120*time.Millisecond {
		t.Errorf("after Reset the delay is %v, want the minimum (100ms, +20%%)", d)
	}
	b.Longest()
	for range 3 {
		if d := b.Next(); d < time.Second || d > 1200*time.Millisecond {
			t.Errorf("after Longest the delay is %v, want the cap (1s, +20%%)", d)
		}
	}
}

func TestNewTakesDefaultsForMissingBounds(t *testing.T) {
	if d := New(0, 0).Next(); d < 100*time.Millisecond || d > 120*time.Millisecond {
		t.Errorf("New(0, 0) first delay = %v, want 100ms (+20%%)", d)
	}
}

func TestWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := New(time.Hour, time.Hour).Wait(ctx); err != context.Canceled {
		t.Errorf("Wait on an ended context = %v, want context.Canceled", err)
	}
}

// A stream that lasted Healthy starts the delays over; a short one does not.
func TestEndedResetsOnlyAfterAHealthyStream(t *testing.T) {
	b := New(100*time.Millisecond, time.Second)
	for range 4 {
		b.Next()
	}
	b.Ended(time.Now())
	if d := b.Next(); d < time.Second {
		t.Errorf("after a short stream the delay is %v, want the cap (1s)", d)
	}
	b.Ended(time.Now().Add(-Healthy - time.Second))
	if d := b.Next(); d > 120*time.Millisecond {
		t.Errorf("after a healthy stream the delay is %v, want the minimum (100ms, +20%%)", d)
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Errorf("Sleep on an ended context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep(1ms) = %v, want nil", err)
	}
}
