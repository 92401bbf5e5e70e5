package grpcx

import (
	"errors"
	"time"
)

// ErrSendTimeout is a send that did not complete within a Sender's timeout.
var ErrSendTimeout = errors.New("send timed out")

// SenderConfig configures NewSender.
type SenderConfig[T any] struct {
	// Send sends one item on the stream (a message, or a batch of them).
	Send func(T) error
	// Timeout bounds one Send.
	Timeout time.Duration
	// Stopping ends a wait with StoppingErr when the process shuts down.
	Stopping    <-chan struct{}
	StoppingErr error
	// Done, when set (tests), is called when the sender's goroutine ends.
	Done func()
}

// NewSender sends a stream's items from a goroutine of its own, so that the handler waits at
// most Timeout for a peer that stopped reading (gRPC flow control blocks Send until the peer
// reads). The handler then returns, which ends the stream: the blocked Send fails and the
// goroutine ends, releasing what it held. stop ends the goroutine once the handler has
// returned.
func NewSender[T any](cfg SenderConfig[T]) (send func(T) error, stop func()) {
	items := make(chan T)
	results := make(chan error, 1) // the one result nobody waits for after a timeout
	go func() {
		if cfg.Done != nil {
			defer cfg.Done()
		}
		for it := range items {
			results <- cfg.Send(it)
		}
	}()
	timer := time.NewTimer(cfg.Timeout)
	timer.Stop()
	send = func(it T) error {
		items <- it // the goroutine is idle: the handler waits for every result or returns
		timer.Reset(cfg.Timeout)
		defer timer.Stop()
		select {
		case err := <-results:
			return err
		case <-timer.C:
			return ErrSendTimeout
		case <-cfg.Stopping:
			return cfg.StoppingErr
		}
	}
	return send, func() { close(items) }
}
