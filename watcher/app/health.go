package app

import (
	"fmt"
	"time"
)

// servingHealth is the watcher's /healthz rule: a replica is unhealthy once its Watch service
// has had no epoch to serve new streams from for longer than bound. That state is normal
// only for a while: at start until discovery resolved the kinds (the watcher exits by itself
// after --sync-timeout), and between two epochs while the old epoch's streams end (each
// within one send, --send-timeout) and its controller stops. Longer, the replica refuses
// every Watch and nothing inside it will change that: the probe restarts it.
//
// unserved says since when no epoch serves, and why (the zero time while one does).
func servingHealth(unserved func() (time.Time, string), bound time.Duration, now func() time.Time) func() error {
	return func() error {
		since, why := unserved()
		if since.IsZero() {
			return nil
		}
		if d := now().Sub(since); d > bound {
			return fmt.Errorf("no epoch has served Watch streams for %s (bound %s): %s", d.Round(time.Second), bound, why)
		}
		return nil
	}
}

// healthBound is how long the Watch service may go without an epoch before /healthz fails:
// --sync-timeout plus --send-timeout.
func (s *Settings) healthBound() time.Duration { return s.SyncTimeout + s.SendTimeout }
