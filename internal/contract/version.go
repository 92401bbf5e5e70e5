package contract

import (
	"errors"
	"fmt"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// RefOf is c without its resources: the version it names (epoch, version, hash, and the
// watcher's view it was built from).
func RefOf(c *configv1.Config) *configv1.Config {
	return &configv1.Config{Epoch: c.GetEpoch(), Version: c.GetVersion(), Hash: c.GetHash(),
		WatcherEpoch: c.GetWatcherEpoch(), WatcherRevision: c.GetWatcherRevision()}
}

// VersionOf is the version a delta makes, without resources.
func VersionOf(d *configv1.ConfigDelta) *configv1.Config {
	return &configv1.Config{Epoch: d.GetEpoch(), Version: d.GetVersion(), Hash: d.GetHash(),
		WatcherEpoch: d.GetWatcherEpoch(), WatcherRevision: d.GetWatcherRevision()}
}

// Chain is a receiver's config chain: the complete state, then each delta onto the version
// held, checked against its state hash. It is the one follower of the rule every receiver
// keeps (the pusher's gate, the Caddy module, the translator's config server, the public
// client and sluicectl); each adds its own policy around it (what the gate admits by epoch
// and version, the module's table, the server's history). Receive follows a whole config
// stream with it: a complete state sent in chunks counts when its end came (Assembler), and
// a marker starts over.
type Chain struct {
	// State is the state held, nil before a complete state; Version names it.
	State   *State
	Version *configv1.Config
	// Assembler puts chunked complete states together; its Chunks says how many chunks the
	// last one took.
	Assembler Assembler
}

// Onto returns why d is not a delta onto held, the version a receiver holds (nil: none), or
// nil when it is: a delta is applied only onto the version it was made from, within one
// epoch, and versions only rise.
func Onto(held *configv1.Config, d *configv1.ConfigDelta) error {
	switch {
	case held == nil:
		return errors.New("a delta before the complete state")
	case d.GetEpoch() != held.GetEpoch():
		return fmt.Errorf("a delta onto %s/%d, but %s/%d is held", d.GetEpoch(), d.GetBaseVersion(), held.GetEpoch(), held.GetVersion())
	case d.GetBaseVersion() != held.GetVersion():
		return fmt.Errorf("a delta onto version %d, but version %d is held", d.GetBaseVersion(), held.GetVersion())
	case d.GetVersion() <= d.GetBaseVersion():
		return fmt.Errorf("a delta to version %d onto version %d: versions only rise", d.GetVersion(), d.GetBaseVersion())
	}
	return nil
}

// Complete makes cfg, a complete state, the one held: a new chain. encoded keeps the state
// serialised (NewEncodedState), for a receiver that forwards rather than reads it. On an
// error (wrapping ErrBrokenChain) nothing changed.
func (c *Chain) Complete(cfg *configv1.Config, encoded bool) error {
	from := FromResources
	if encoded {
		from = FromResourcesEncoded
	}
	st, err := from(cfg.GetResources(), cfg.GetHash())
	if err != nil {
		return err
	}
	c.State, c.Version = st, RefOf(cfg)
	return nil
}

// Delta applies d onto the version held, checked against its hash, and returns what it
// changed (for Merge). On an error (Onto's, or one wrapping ErrBrokenChain) nothing changed.
func (c *Chain) Delta(d *configv1.ConfigDelta) (Applied, error) { return c.DeltaDigests(d, Digests{}) }

// DeltaDigests is Delta with the digests of d's upserts as the state that took d computed
// them (State.ApplyDigests): for a receiver in the process that built d.
func (c *Chain) DeltaDigests(d *configv1.ConfigDelta, dg Digests) (Applied, error) {
	held := c.Version
	if c.State == nil {
		held = nil // a Version without a State holds nothing to apply onto
	}
	if err := Onto(held, d); err != nil {
		return Applied{}, err
	}
	applied, err := c.State.ApplyDigests(d, dg)
	if err != nil {
		return Applied{}, err
	}
	c.Version = VersionOf(d)
	return applied, nil
}

// Reset forgets the state held (a marker: the complete state of its epoch comes next).
func (c *Chain) Reset() { c.State, c.Version = nil, nil }

// Receive takes one message of a config stream. It returns the version the message brought
// (nil for a marker, a heartbeat, or a part of a chunked state before its end), or an error
// wrapping ErrBrokenChain when the message does not follow from what is held, or
// ErrBrokenStream when a chunked state was malformed; on an error the state held did not
// change.
func (c *Chain) Receive(m *configv1.StreamConfigResponse) (*configv1.Config, error) {
	m, err := c.Assembler.Take(m)
	if err != nil || m == nil {
		return nil, err
	}
	switch msg := m.GetMessage().(type) {
	case *configv1.StreamConfigResponse_InitialSyncComplete:
		c.Reset()
	case *configv1.StreamConfigResponse_Config:
		if err := c.Complete(msg.Config, false); err != nil {
			return nil, fmt.Errorf("version %d: %w", msg.Config.GetVersion(), err)
		}
		return c.Version, nil
	case *configv1.StreamConfigResponse_Delta:
		d := msg.Delta
		if _, err := c.Delta(d); err != nil {
			if !errors.Is(err, ErrBrokenChain) {
				err = fmt.Errorf("%w: %w", ErrBrokenChain, err)
			}
			return nil, fmt.Errorf("version %d: %w", d.GetVersion(), err)
		}
		return c.Version, nil
	}
	return nil, nil
}
