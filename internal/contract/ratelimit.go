package contract

import (
	"errors"
	"fmt"
	"time"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// MaxRate bounds a rate limit's rates, bursts and connections (a value beyond it limits
// nothing a proxy could serve).
const MaxRate = 1_000_000

// CheckRateLimit returns why a data plane could not enforce l as Route.rate_limit says: no
// zone, no rate nor connection limit, a rate without a burst multiplier, a value over
// MaxRate, an exempt prefix that is not CIDR.
func CheckRateLimit(l *configv1.RateLimit) error {
	if l == nil {
		return nil
	}
	switch {
	case l.GetZone() == "":
		return errors.New("no zone")
	case l.GetRequestsPerSecond() == 0 && l.GetRequestsPerMinute() == 0 && l.GetConnections() == 0:
		return errors.New("limits nothing: no rate and no connection limit")
	case (l.GetRequestsPerSecond() > 0 || l.GetRequestsPerMinute() > 0) && l.GetBurstMultiplier() == 0:
		return errors.New("a rate without a burst multiplier")
	}
	for _, v := range []uint32{l.GetRequestsPerSecond(), l.GetRequestsPerMinute(), l.GetConnections()} {
		if v > MaxRate {
			return fmt.Errorf("a value over %d", MaxRate)
		}
	}
	if uint64(l.GetBurstMultiplier())*uint64(max(l.GetRequestsPerSecond(), l.GetRequestsPerMinute())) > MaxRate {
		return fmt.Errorf("a burst over %d", MaxRate)
	}
	if _, err := CompileAddressFilter(&configv1.AddressFilter{Deny: l.GetExempt()}); err != nil {
		return fmt.Errorf("exempt: %w", err)
	}
	return nil
}

// Bucket is one client's standing against one rate (nginx's limit_req excess): Excess
// requests above the rate, as of Last. It is a pure state machine: Take is given the time.
type Bucket struct {
	Excess float64
	Last   time.Time
}

// Take admits a request at now against perSecond with burst, and counts it: the excess
// drains at the rate since Last, then grows by one, and the request is admitted while it
// stays within burst+1 (a refused request does not count).
func (b *Bucket) Take(now time.Time, perSecond float64, burst uint32) bool {
	e := b.drained(now, perSecond) + 1
	if e > float64(burst)+1 {
		return false
	}
	b.Excess, b.Last = e, now
	return true
}

// Idle reports whether the bucket has drained by now: it holds nothing a fresh one would not.
func (b *Bucket) Idle(now time.Time, perSecond float64) bool { return b.drained(now, perSecond) == 0 }

func (b *Bucket) drained(now time.Time, perSecond float64) float64 {
	e := b.Excess
	if !b.Last.IsZero() {
		e -= now.Sub(b.Last).Seconds() * perSecond
	}
	return max(e, 0)
}
