package contract

import (
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

// Chain follows a config stream as every receiver must: the complete state, then each delta
// onto the version held, checked against its state hash. A complete state sent in chunks
// counts when its end came (Assembler). A marker starts over: the complete state of its
// epoch comes next. (The pusher's gate follows the same rules and more: what it admits by
// epoch and version, and a Resync on a break.)
type Chain struct {
	// State is the state held, nil before a complete state; Version names it.
	State   *State
	Version *configv1.Config
	// Assembler puts chunked complete states together; its Chunks says how many chunks the
	// last one took.
	Assembler Assembler
}

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
		c.State, c.Version = nil, nil
	case *configv1.StreamConfigResponse_Config:
		st, err := FromResources(msg.Config.GetResources(), msg.Config.GetHash())
		if err != nil {
			return nil, fmt.Errorf("version %d: %w", msg.Config.GetVersion(), err)
		}
		c.State, c.Version = st, RefOf(msg.Config)
		return c.Version, nil
	case *configv1.StreamConfigResponse_Delta:
		d := msg.Delta
		if c.State == nil || d.GetEpoch() != c.Version.GetEpoch() || d.GetBaseVersion() != c.Version.GetVersion() {
			return nil, fmt.Errorf("%w: version %d is a delta onto %s/%d, but %s/%d is held", ErrBrokenChain,
				d.GetVersion(), d.GetEpoch(), d.GetBaseVersion(), c.Version.GetEpoch(), c.Version.GetVersion())
		}
		if err := c.State.ApplyDelta(d); err != nil {
			return nil, fmt.Errorf("version %d: %w", d.GetVersion(), err)
		}
		c.Version = VersionOf(d)
		return c.Version, nil
	}
	return nil, nil
}
