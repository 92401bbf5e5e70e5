package cli

import (
	"sync"
	"time"
)

// ColdStartBound is how long after its first readiness a process whose cold start ends at a
// later signal (ServingConfig.ColdStartEndsLater) waits for it before ending it anyway: a
// translator that no pusher answers still settles.
const ColdStartBound = 30 * time.Second

// coldStartEnd decides when a process's cold start ends (settleMemory runs, once): at its
// first readiness, or, for a process whose readiness comes in the middle of the system's
// start, at a later signal (over) or ColdStartBound after that readiness, whichever is
// first. The collection that ends a cold start takes CPU; at the translator's first
// readiness the pusher and the proxy are still taking the first config on the same cores
// (docs/design.md, "Cold start").
type coldStartEnd struct {
	later  bool
	after  func(time.Duration, func()) // time.AfterFunc's; a test's clock
	settle func()                      // called once; it must return at once
	once   sync.Once
}

// firstReady is the process's first readiness.
func (c *coldStartEnd) firstReady() {
	if !c.later {
		c.end()
		return
	}
	c.after(ColdStartBound, c.end)
}

// end ends the cold start, if it has not ended yet.
func (c *coldStartEnd) end() {
	c.once.Do(c.settle)
}
