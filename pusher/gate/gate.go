// Package gate is the pusher's last line of defence. It follows the translator's Config
// stream and applies a config to the data plane only after the InitialSyncComplete of the
// current stream epoch, and only versions at or after the one that marker names, never one
// older than it applied; everything else is dropped and counted. It keeps the chain: the
// translator's state as received, the complete state first, then each delta applied onto
// its base version and checked against the resulting hash (contract.State). A delta onto
// another base, or with another hash, breaks the chain: the gate asks for the complete state
// (Resync) and applies nothing from the broken chain meanwhile. A broken stream or a new
// epoch closes the gate and leaves the data plane exactly as it is. A shutdown never pushes. A rejected config leaves the last
// good one in place, is NACKed, and is not retried until a newer version arrives; a failed
// push (network) is retried with backoff; a data plane that lost its config gets the last
// applied one again. An optional deletion guard holds back a config that would remove a
// large share of the served routes until it has stayed the newest for a while.
package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// DataPlane is a proxy the gate drives. Caddy is one; an Envoy xDS target can be another.
type DataPlane interface {
	Name() string
	// Apply replaces the data plane's whole config with cfg, atomically. An error that is a
	// Rejection means the data plane refused it; any other error is retried.
	Apply(ctx context.Context, cfg *configv1.Config) error
	// Fingerprint identifies what the data plane would run for cfg: configs with the same
	// fingerprint need no push. An error that is a Rejection means cfg cannot be rendered.
	Fingerprint(cfg *configv1.Config) (string, error)
	// Current returns the fingerprint of what the data plane runs, "" when it runs none of
	// ours (restarted, or replaced by someone else).
	Current(ctx context.Context) (string, error)
}

// Rejection is implemented by errors that mean "the data plane refused this config".
type Rejection interface{ Rejected() bool }

// DeltaPlane is a data plane that also takes a version as a delta onto the one it runs (the
// Sluice Caddy module): what changed goes to it, not the complete state. Its Fingerprint of a
// config is the config's state hash.
type DeltaPlane interface {
	DataPlane
	// ApplyDelta applies d onto the version the data plane runs, atomically. An error that
	// is a NotAtBase means it runs another version: the gate sends the complete state.
	ApplyDelta(ctx context.Context, d *configv1.ConfigDelta) error
}

// NotAtBase is implemented by errors that mean "the data plane does not run the delta's base".
type NotAtBase interface{ NotAtBase() bool }

// ConfigClient opens config streams; configv1.ConfigServiceClient is one.
type ConfigClient interface {
	StreamConfig(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[configv1.StreamConfigRequest, configv1.StreamConfigResponse], error)
}

// Metrics receives the gate's measurements.
type Metrics interface {
	Received()
	Dropped(reason string)
	Applied(version uint64, took time.Duration)
	Rejected()
	Held()
}

// Config configures a Gate.
type Config struct {
	Logger          hclog.Logger
	Client          ConfigClient
	DataPlane       DataPlane
	PusherID        string
	SoftwareVersion string
	Kind            configv1.DataPlaneKind
	Metrics         Metrics
	// CheckInterval is how often the data plane is asked whether it still runs our config.
	CheckInterval time.Duration
	// GuardMaxDeleteRatio turns the deletion guard on when > 0; GuardHold is how long a held
	// config must stay the newest before it is applied.
	GuardMaxDeleteRatio float64
	GuardHold           time.Duration
	BackoffMin          time.Duration
	BackoffMax          time.Duration
	// OnApplied is called after every successful apply (readiness).
	OnApplied func()
}

// Gate is the pusher's state owner.
type Gate struct {
	cfg Config
	log hclog.Logger

	applied   *configv1.Config // last config the data plane accepted
	appliedFP string           // its fingerprint
}

// New returns a gate.
func New(cfg Config) (*Gate, error) {
	if cfg.Logger == nil || cfg.Client == nil || cfg.DataPlane == nil || cfg.PusherID == "" {
		return nil, errors.New("gate: Logger, Client, DataPlane and PusherID are required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 2 * time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = 5 * time.Second
	}
	if cfg.OnApplied == nil {
		cfg.OnApplied = func() {}
	}
	return &Gate{cfg: cfg, log: cfg.Logger}, nil
}

// Run follows the translator until ctx ends.
func (g *Gate) Run(ctx context.Context) error {
	backoff := g.cfg.BackoffMin
	for ctx.Err() == nil {
		start := time.Now()
		err := g.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > 30*time.Second {
			backoff = g.cfg.BackoffMin
		}
		if size, limit, ok := messageTooLarge(err); ok {
			// The translator would send the same version again: no hot reconnect loop.
			backoff = g.cfg.BackoffMax
			g.log.Error("config larger than the pusher's message limit; the data plane keeps its config: raise --max-message-size of the pusher and of the translator above the size",
				"size", size, "limit", limit, "backoff", backoff)
		} else {
			g.log.Warn("config stream ended; the gate is closed and the data plane keeps its config", "error", err, "backoff", backoff)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, g.cfg.BackoffMax)
	}
	return nil
}

// streamState is the gate of one stream.
type streamState struct {
	epoch         string
	markerVersion uint64
	open          bool
	// chain is the translator's state as received in this epoch (nil before the complete
	// state), at chainRef; broken means it failed and a Resync is outstanding.
	chain    *contract.State
	chainRef *configv1.Config // without resources
	broken   bool
	// since are the deltas the chain took after the version last handed to the data plane:
	// merged, they bring a DeltaPlane from what it runs to the newest.
	since      []contract.Applied
	pending    *configv1.Config // newest admissible config not yet handled (resources filled when handled)
	rejectedFP string           // refused by the data plane; not retried for the same fingerprint
	held       *configv1.Config // held back by the deletion guard
	heldSince  time.Time
}

func (g *Gate) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := g.cfg.Client.StreamConfig(sctx)
	if err != nil {
		return fmt.Errorf("open config stream: %w", err)
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{
		PusherId: g.cfg.PusherID, DataPlane: g.cfg.Kind, SoftwareVersion: g.cfg.SoftwareVersion}}}); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	msgs := grpcx.Pump[configv1.StreamConfigResponse](sctx, stream.Recv, 16)
	send := func(r *configv1.StreamConfigRequest) {
		if err := stream.Send(r); err != nil {
			g.log.Debug("could not answer the translator", "error", err)
		}
	}

	var st streamState
	check := time.NewTicker(g.cfg.CheckInterval)
	defer check.Stop()
	var retry <-chan time.Time
	retryBackoff := g.cfg.BackoffMin
	g.verify(ctx, &st) // a data plane restarted while the pusher was away gets its config back
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-msgs:
			// Everything already received goes onto the chain before anything is handled: deltas
			// are small, so many arrive while a push is under way, and only the newest is pushed.
			for more := true; more; {
				if r.Err != nil {
					if errors.Is(r.Err, io.EOF) {
						return errors.New("translator closed the stream")
					}
					return r.Err
				}
				if err := g.receive(&st, r.Msg, send); err != nil {
					return err // a lying stream: nothing more is taken from it
				}
				select {
				case r = <-msgs:
				default:
					more = false
				}
			}
		case <-retry:
			retry = nil
		case <-check.C:
			g.verify(ctx, &st)
			if st.held != nil && st.pending == nil {
				st.pending = st.held // re-evaluate the hold
			}
		}
		if ctx.Err() != nil {
			return ctx.Err() // a shutdown never pushes
		}
		if st.pending != nil && retry == nil {
			if again := g.handle(ctx, &st, send); again {
				retry = time.After(retryBackoff)
				retryBackoff = min(retryBackoff*2, g.cfg.BackoffMax)
			} else {
				retryBackoff = g.cfg.BackoffMin
			}
		}
	}
}

// receive applies the gate to one message. An error means the stream lied in a way that
// no Resync repairs (a second marker of one epoch): the caller drops the stream.
func (g *Gate) receive(st *streamState, m *configv1.StreamConfigResponse, send func(*configv1.StreamConfigRequest)) error {
	switch msg := m.GetMessage().(type) {
	case *configv1.StreamConfigResponse_InitialSyncComplete:
		mk := msg.InitialSyncComplete
		if st.open && mk.GetEpoch() == st.epoch {
			// The translator sends one marker per epoch on a stream: it does not know what
			// it sent, so nothing more of this stream is trusted.
			return fmt.Errorf("protocol violation: a second InitialSyncComplete for epoch %s on one stream (version %d, the first named %d)",
				mk.GetEpoch(), mk.GetVersion(), st.markerVersion)
		}
		*st = streamState{epoch: mk.GetEpoch(), markerVersion: mk.GetVersion(), open: true}
		g.log.Info("gate open", "epoch", mk.GetEpoch(), "from_version", mk.GetVersion(), "watcher_epoch", mk.GetWatcherEpoch(), "watcher_revision", mk.GetWatcherRevision())
	case *configv1.StreamConfigResponse_Config:
		c := msg.Config
		g.cfg.Metrics.Received()
		if reason := g.admit(st, c); reason != "" {
			g.drop(c, reason)
			return nil
		}
		// The complete state: a new chain (also the answer to a Resync).
		if st.chainRef != nil && c.GetVersion() < st.chainRef.GetVersion() {
			g.drop(c, "out-of-order")
			return nil
		}
		chain, err := contract.FromResources(c.GetResources(), c.GetHash())
		if err != nil {
			g.breakChain(st, c, err, send)
			return nil
		}
		st.chain, st.chainRef, st.broken, st.since = chain, contract.RefOf(c), false, nil
		st.pending = c
	case *configv1.StreamConfigResponse_Delta:
		d := msg.Delta
		c := contract.VersionOf(d)
		g.cfg.Metrics.Received()
		if reason := g.admit(st, c); reason != "" {
			g.drop(c, reason)
			return nil
		}
		switch {
		case st.broken:
			g.drop(c, "broken-chain") // the complete state is on its way
			return nil
		case st.chain == nil:
			g.breakChain(st, c, errors.New("a delta before the complete state"), send)
			return nil
		case d.GetBaseVersion() != st.chainRef.GetVersion():
			g.breakChain(st, c, fmt.Errorf("a delta onto version %d, but version %d is held", d.GetBaseVersion(), st.chainRef.GetVersion()), send)
			return nil
		case d.GetVersion() <= d.GetBaseVersion():
			g.breakChain(st, c, fmt.Errorf("a delta to version %d onto version %d: versions only rise", d.GetVersion(), d.GetBaseVersion()), send)
			return nil
		}
		applied, err := st.chain.Apply(d)
		if err != nil {
			g.breakChain(st, c, err, send)
			return nil
		}
		st.since = append(st.since, applied)
		st.chainRef = c
		st.pending = c // its resources are materialised from the chain when it is handled
	}
	return nil
}

// admit returns why the gate drops c, or "" when c is of the open epoch, at or after the
// marker's version and not older than what the data plane runs.
func (g *Gate) admit(st *streamState, c *configv1.Config) string {
	switch {
	case !st.open:
		return "before-marker"
	case c.GetEpoch() != st.epoch:
		return "other-epoch"
	case c.GetVersion() < st.markerVersion:
		return "older-than-marker"
	case g.applied != nil && g.applied.GetEpoch() == c.GetEpoch() && c.GetVersion() < g.applied.GetVersion():
		return "older-than-applied"
	}
	return ""
}

// breakChain drops c and everything after it until the complete state comes again.
func (g *Gate) breakChain(st *streamState, c *configv1.Config, err error, send func(*configv1.StreamConfigRequest)) {
	g.drop(c, "broken-chain")
	g.log.Error("config chain broken; asking for the complete state and applying nothing from this chain", "version", c.GetVersion(), "error", err)
	st.broken, st.pending, st.since = true, nil, nil
	send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Resync{Resync: &configv1.Resync{Have: ref(st.chainRef), Reason: err.Error()}}})
}

func (g *Gate) drop(c *configv1.Config, reason string) {
	g.cfg.Metrics.Dropped(reason)
	g.log.Warn("config dropped by the gate", "reason", reason, "epoch", c.GetEpoch(), "version", c.GetVersion())
}

func ref(c *configv1.Config) *configv1.ConfigRef {
	if c == nil {
		return nil
	}
	return &configv1.ConfigRef{Epoch: c.GetEpoch(), Version: c.GetVersion(), Hash: c.GetHash()}
}

// handle applies st.pending; it returns true when the push should be retried later.
func (g *Gate) handle(ctx context.Context, st *streamState, send func(*configv1.StreamConfigRequest)) bool {
	c := st.pending
	// The complete state of c, materialised from the chain only when something needs it: a
	// DeltaPlane that follows the deltas never does.
	full := func() *configv1.Config {
		if c.GetResources() == nil && st.chain != nil {
			c.Resources = st.chain.Resources()
		}
		return c
	}
	dp, deltas := g.cfg.DataPlane.(DeltaPlane)
	if !deltas || g.cfg.GuardMaxDeleteRatio > 0 {
		full() // fingerprints of a rendering data plane and the deletion guard look at every route
	}
	ack := func() {
		send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Ack{Ack: &configv1.Ack{Config: ref(c)}}})
	}
	fp, err := g.cfg.DataPlane.Fingerprint(c)
	if err != nil {
		st.pending = nil
		g.cfg.Metrics.Rejected()
		g.log.Error("data plane rejected the config; the previous one stays in place", "version", c.GetVersion(), "error", err)
		send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Nack{Nack: &configv1.Nack{Config: ref(c), Error: err.Error()}}})
		return false
	}
	if g.applied != nil && g.appliedFP == fp {
		// Nothing the data plane runs changed (a not-ready endpoint, a finding): no push.
		g.applied = c
		st.pending, st.held, st.since = nil, nil, nil
		ack()
		return false
	}
	if fp == st.rejectedFP {
		st.pending = nil
		send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Nack{Nack: &configv1.Nack{Config: ref(c), Error: "identical to a config the data plane already rejected"}}})
		return false
	}
	if why := g.guard(st, c); why != "" {
		st.pending = nil
		g.cfg.Metrics.Held()
		send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Nack{Nack: &configv1.Nack{Config: ref(c), Error: why}}})
		return false
	}
	start := time.Now()
	if deltas && g.applied != nil && g.applied.GetEpoch() == c.GetEpoch() && len(st.since) > 0 && st.since[0].Delta.GetBaseVersion() == g.applied.GetVersion() {
		d := st.since[0].Delta
		if len(st.since) > 1 {
			d = contract.Merge(st.since)
		}
		err = dp.ApplyDelta(ctx, d)
		var nab NotAtBase
		if errors.As(err, &nab) && nab.NotAtBase() {
			g.log.Info("data plane does not run the delta's base; sending the complete state", "version", c.GetVersion(), "error", err)
			err = dp.Apply(ctx, full())
		}
	} else {
		err = g.cfg.DataPlane.Apply(ctx, full())
	}
	var rej Rejection
	switch {
	case err == nil:
		g.applied, g.appliedFP = c, fp
		st.pending, st.held, st.since = nil, nil, nil
		g.cfg.Metrics.Applied(c.GetVersion(), time.Since(start))
		g.log.Info("config applied", "epoch", c.GetEpoch(), "version", c.GetVersion(), "hash", short(c.GetHash()), "took", time.Since(start).Round(time.Millisecond))
		g.cfg.OnApplied()
		ack()
		return false
	case errors.As(err, &rej) && rej.Rejected():
		st.pending, st.rejectedFP = nil, fp
		g.cfg.Metrics.Rejected()
		g.log.Error("data plane rejected the config; the previous one stays in place", "version", c.GetVersion(), "error", err)
		send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Nack{Nack: &configv1.Nack{Config: ref(c), Error: err.Error()}}})
		return false
	default:
		g.log.Warn("push failed; retrying", "version", c.GetVersion(), "error", err)
		return true
	}
}

// guard returns why c is held back, or "" to apply it.
func (g *Gate) guard(st *streamState, c *configv1.Config) string {
	if g.cfg.GuardMaxDeleteRatio <= 0 || g.applied == nil {
		return ""
	}
	served := routeKeys(g.applied)
	if len(served) == 0 {
		return ""
	}
	next := routeKeys(c)
	removed := 0
	for k := range served {
		if !next[k] {
			removed++
		}
	}
	ratio := float64(removed) / float64(len(served))
	if ratio <= g.cfg.GuardMaxDeleteRatio {
		return ""
	}
	if st.held == nil || st.held.GetHash() != c.GetHash() {
		st.held, st.heldSince = c, time.Now()
	}
	if time.Since(st.heldSince) >= g.cfg.GuardHold {
		g.log.Warn("deletion guard: applying a config that removes many routes after it stayed the newest", "removed", removed, "served", len(served), "held_for", g.cfg.GuardHold)
		return ""
	}
	return fmt.Sprintf("deletion guard: the config removes %d of %d served routes (%.0f%%, limit %.0f%%); held until it has been the newest for %s",
		removed, len(served), ratio*100, g.cfg.GuardMaxDeleteRatio*100, g.cfg.GuardHold)
}

func routeKeys(c *configv1.Config) map[string]bool {
	out := map[string]bool{}
	for _, vh := range c.GetResources().GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			out[vh.GetHostname()+" "+rt.GetPath().String()] = true
		}
	}
	return out
}

// verify re-pushes the last applied config when the data plane lost it.
func (g *Gate) verify(ctx context.Context, st *streamState) {
	if g.applied == nil {
		return
	}
	cur, err := g.cfg.DataPlane.Current(ctx)
	if err != nil {
		g.log.Debug("data plane not reachable for a check", "error", err)
		return
	}
	if cur == g.appliedFP {
		return
	}
	if ctx.Err() != nil {
		return
	}
	cfg := g.applied
	if cfg.GetResources() == nil {
		// Applied as a delta: its complete state is the chain's, if the chain is still there.
		switch {
		case st.chain != nil && !st.broken && st.chainRef.GetEpoch() == cfg.GetEpoch() && st.chainRef.GetVersion() == cfg.GetVersion():
			cfg.Resources = st.chain.Resources()
		case st.chain != nil && !st.broken && st.pending == nil:
			// The chain moved on: its newest version goes in full, as the next to apply.
			g.log.Warn("data plane does not run the last applied config (restarted or replaced); pushing the newest in full", "version", st.chainRef.GetVersion(), "found", short(cur))
			st.pending, st.since = contract.RefOf(st.chainRef), nil
			return
		default:
			return // the next complete state of this stream is pushed in full anyway
		}
	}
	g.log.Warn("data plane does not run the last applied config (restarted or replaced); pushing it again", "version", cfg.GetVersion(), "found", short(cur))
	start := time.Now()
	if err := g.cfg.DataPlane.Apply(ctx, cfg); err != nil {
		g.log.Error("re-push failed", "error", err)
		return
	}
	g.cfg.Metrics.Applied(cfg.GetVersion(), time.Since(start))
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

type nopMetrics struct{}

func (nopMetrics) Received()                     {}
func (nopMetrics) Dropped(string)                {}
func (nopMetrics) Applied(uint64, time.Duration) {}
func (nopMetrics) Rejected()                     {}
func (nopMetrics) Held()                         {}
