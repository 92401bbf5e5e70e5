// Package run owns the lifetime of a process's long-lived parts: it starts them together,
// stops them all when the first one fails or when the process is told to stop, and turns the
// outcome into an exit code.
package run

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// Actor is one long-lived part. It runs until ctx is done or it fails, and returns nil when it
// stopped because ctx was done.
type Actor struct {
	Name string
	Run  func(ctx context.Context) error
}

// Group is a set of actors run together.
type Group struct {
	actors []Actor
}

// Add adds an actor.
func (g *Group) Add(name string, fn func(ctx context.Context) error) {
	g.actors = append(g.actors, Actor{Name: name, Run: fn})
}

// ErrStopped is returned by an actor that ends the group on purpose without a failure.
var ErrStopped = errors.New("stopped")

// Run runs every actor until ctx is done or one of them returns. The first actor to return
// ends the group: the others see their context cancelled. Run returns the first error, wrapped
// with the actor's name, or nil when ctx ended the group or an actor returned nil or
// ErrStopped.
func (g *Group) Run(ctx context.Context) error {
	eg, ctx := errgroup.WithContext(ctx)
	for _, a := range g.actors {
		eg.Go(func() error {
			err := a.Run(ctx)
			switch {
			case err == nil, errors.Is(err, ErrStopped):
				return ErrStopped // ends the group
			case errors.Is(err, context.Canceled) && ctx.Err() != nil:
				return nil
			default:
				return fmt.Errorf("%s: %w", a.Name, err)
			}
		})
	}
	err := eg.Wait()
	if errors.Is(err, ErrStopped) {
		return nil
	}
	return err
}
