package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress says what the harness is doing while a long step runs: every few seconds the
// current stage, how far it got and for how long, on stderr (long work prints
// what it is doing).
type progress struct {
	mu          sync.Mutex
	out         io.Writer
	now         func() time.Time
	stage       string
	done, total int
	since       time.Time
}

// prog is the harness's one progress line; its steps are set where the work is.
var prog = &progress{out: os.Stderr, now: time.Now}

// step starts a stage of total items (0: not counted).
func (p *progress) step(stage string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stage, p.done, p.total, p.since = stage, 0, total, p.now()
}

// add counts n items of the stage done.
func (p *progress) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
}

// line is what a tick prints.
func (p *progress) line(now time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stage == "" {
		return ""
	}
	count := ""
	if p.total > 0 {
		count = fmt.Sprintf(" %d/%d,", p.done, p.total)
	}
	return fmt.Sprintf("bench: ... %s:%s %s so far\n", p.stage, count, now.Sub(p.since).Round(time.Second))
}

// run prints the line every interval until the returned stop is called.
func (p *progress) run(interval time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if l := p.line(now); l != "" {
					fmt.Fprint(p.out, l)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
