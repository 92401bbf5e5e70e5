// Package gate is the pusher's last line of defence: it follows the translator's Config
// stream and decides what reaches the data plane. It is split in two. The admission core
// (admission.go) holds every rule and does no I/O: it takes events (a stream opened, a
// marker, a complete state or a delta, a fingerprint, the outcome of a push, a data plane
// that lost its config, a clock tick) and answers with decisions (drop, ask for the complete
// state, push in full or as a delta, hold, ACK, NACK, retry, push again); its only clock is
// an injected one. The loop (gate.go) owns the stream, the data plane and the timers, feeds
// the core and carries out what it decides.
//
// The rules: the gate applies a config only after the InitialSyncComplete of the current
// stream epoch, and only versions at or after the one that marker names, never one older
// than it applied; everything else is dropped and counted. It keeps the chain: the
// translator's state as received, the complete state first, then each delta applied onto
// its base version and checked against the resulting hash (contract.State). A delta onto
// another base, or with another hash, breaks the chain: the gate asks for the complete state
// (Resync) and applies nothing from the broken chain meanwhile. A complete state sent in
// chunks is taken only at its end, whole (contract.Assembler); a malformed one breaks the
// stream. A broken stream or a new
// epoch closes the gate and leaves the data plane exactly as it is. A shutdown never pushes.
// A rejected config leaves the last good one in place, is NACKed, and is not retried until a
// newer version arrives; a failed push (network) is retried with backoff; a data plane that
// lost its config gets the last applied one again. An optional deletion guard holds back a
// config that would remove a large share of the served routes until those removals have
// stood for a while; changes that leave them as they are do not restart the hold.
package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/sluice-io/sluice/internal/backoff"
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
	// GuardMaxDeleteRatio turns the deletion guard on when > 0; GuardHold is how long the
	// removals of a held config must stand before it is applied.
	GuardMaxDeleteRatio float64
	GuardHold           time.Duration
	BackoffMin          time.Duration
	BackoffMax          time.Duration
	// OnApplied is called after every successful apply (readiness).
	OnApplied func()
}

// Gate is the pusher's state owner: the loop around the admission core.
type Gate struct {
	cfg Config
	log hclog.Logger
	adm *admission // what the data plane runs, and the gate of the current stream
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
	_, deltas := cfg.DataPlane.(DeltaPlane)
	adm := newAdmission(admissionConfig{Deltas: deltas, GuardMaxDeleteRatio: cfg.GuardMaxDeleteRatio, GuardHold: cfg.GuardHold, Now: time.Now})
	return &Gate{cfg: cfg, log: cfg.Logger, adm: adm}, nil
}

// Run follows the translator until ctx ends.
func (g *Gate) Run(ctx context.Context) error {
	bo := backoff.New(g.cfg.BackoffMin, g.cfg.BackoffMax)
	for ctx.Err() == nil {
		start := time.Now()
		err := g.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		bo.Ended(start)
		size, limit, tooLarge := messageTooLarge(err)
		if tooLarge {
			// The translator would send the same version again: no hot reconnect loop.
			bo.Longest()
		}
		delay := bo.Next()
		if tooLarge {
			g.log.Error("config larger than the pusher's message limit; the data plane keeps its config: raise --max-message-size of the pusher and of the translator above the size",
				"size", size, "limit", limit, "backoff", delay)
		} else {
			g.log.Warn("config stream ended; the gate is closed and the data plane keeps its config", "error", err, "backoff", delay)
		}
		if backoff.Sleep(ctx, delay) != nil {
			return nil
		}
	}
	return nil
}

func (g *Gate) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Waits for its connection rather than failing while it is made (docs/design.md, "Reconnects").
	stream, err := g.cfg.Client.StreamConfig(sctx, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("open config stream: %w", err)
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{
		PusherId: g.cfg.PusherID, DataPlane: g.cfg.Kind, SoftwareVersion: g.cfg.SoftwareVersion, TakesChunks: true}}}); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	msgs := grpcx.Pump[configv1.StreamConfigResponse](sctx, stream.Recv, 16)
	send := func(r *configv1.StreamConfigRequest) {
		if err := stream.Send(r); err != nil {
			g.log.Debug("could not answer the translator", "error", err)
		}
	}

	g.adm.newStream()
	var asm contract.Assembler // a complete state sent in chunks, taken when whole
	check := time.NewTicker(g.cfg.CheckInterval)
	defer check.Stop()
	var retry <-chan time.Time
	retryBackoff := backoff.New(g.cfg.BackoffMin, g.cfg.BackoffMax)
	g.verify(ctx) // a data plane restarted while the pusher was away gets its config back
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
				if err := g.receive(&asm, r.Msg, send); err != nil {
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
			g.verify(ctx)
			g.adm.tick() // re-evaluate a config the deletion guard holds
		}
		if ctx.Err() != nil {
			return ctx.Err() // a shutdown never pushes
		}
		if retry != nil {
			continue
		}
		if c := g.adm.next(); c != nil {
			if again := g.handle(ctx, c, send); again {
				retry = time.After(retryBackoff.Next())
			} else {
				retryBackoff.Reset()
			}
		}
	}
}

// receive feeds one message to the admission core, a chunked complete state once asm put it
// together. An error means the stream lied in a way that no Resync repairs (a second marker
// of one epoch, a malformed chunked state): the caller drops the stream, and nothing of a
// state being assembled was applied.
func (g *Gate) receive(asm *contract.Assembler, m *configv1.StreamConfigResponse, send func(*configv1.StreamConfigRequest)) error {
	m, err := asm.Take(m)
	if err != nil {
		return err
	}
	if m == nil {
		return nil // part of a complete state not yet whole
	}
	if c := m.GetConfig(); c != nil && asm.Chunks > 0 {
		g.log.Info("complete state received in chunks", "epoch", c.GetEpoch(), "version", c.GetVersion(), "chunks", asm.Chunks)
	}
	switch msg := m.GetMessage().(type) {
	case *configv1.StreamConfigResponse_InitialSyncComplete:
		mk := msg.InitialSyncComplete
		if err := g.adm.marker(mk); err != nil {
			return err
		}
		g.log.Info("gate open", "epoch", mk.GetEpoch(), "from_version", mk.GetVersion(), "watcher_epoch", mk.GetWatcherEpoch(), "watcher_revision", mk.GetWatcherRevision())
	case *configv1.StreamConfigResponse_Config:
		g.cfg.Metrics.Received()
		g.refuse(g.adm.config(msg.Config), send)
	case *configv1.StreamConfigResponse_Delta:
		g.cfg.Metrics.Received()
		g.refuse(g.adm.delta(msg.Delta), send)
	}
	return nil
}

// refuse carries out what the core decided about a received version it did not take.
func (g *Gate) refuse(d decision, send func(*configv1.StreamConfigRequest)) {
	switch d.act {
	case actDrop:
		g.drop(d.config, d.reason)
	case actResync:
		g.drop(d.config, "broken-chain")
		g.log.Error("config chain broken; asking for the complete state and applying nothing from this chain", "version", d.config.GetVersion(), "error", d.cause)
		send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Resync{Resync: &configv1.Resync{Have: d.have, Reason: d.cause.Error()}}})
	}
}

func (g *Gate) drop(c *configv1.Config, reason string) {
	g.cfg.Metrics.Dropped(reason)
	g.log.Warn("config dropped by the gate", "reason", reason, "epoch", c.GetEpoch(), "version", c.GetVersion())
}

// handle hands c, the core's next config, to the data plane as the core decides; it returns
// true when the push should be retried later.
func (g *Gate) handle(ctx context.Context, c *configv1.Config, send func(*configv1.StreamConfigRequest)) bool {
	ack := func(c *configv1.Config) {
		send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Ack{Ack: &configv1.Ack{Config: ref(c)}}})
	}
	nack := func(c *configv1.Config, why string, objs []*configv1.ObjectRef) {
		send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Nack{Nack: &configv1.Nack{Config: ref(c), Error: why, ObjectsAtFault: objs}}})
	}
	rejected := func(d decision) {
		g.cfg.Metrics.Rejected()
		g.log.Error("data plane rejected the config; the previous one stays in place", "version", d.config.GetVersion(), "error", d.reason, "objects_at_fault", objectNames(d.objects))
		nack(d.config, d.reason, d.objects)
	}
	d := g.adm.judge(g.cfg.DataPlane.Fingerprint(c))
	switch d.act {
	case actAck: // nothing the data plane runs changed
		ack(d.config)
		return false
	case actNack:
		if d.rejected {
			rejected(d)
		} else {
			nack(d.config, d.reason, d.objects)
		}
		return false
	case actHold:
		g.cfg.Metrics.Held()
		nack(d.config, d.reason, nil)
		return false
	case actPush:
	default:
		return false
	}
	if d.released != nil {
		g.log.Warn("deletion guard: applying a config that removes many routes after its removals stood for the hold", "removed", d.released.removed, "served", d.released.served, "held_for", g.cfg.GuardHold)
	}
	start := time.Now()
	var err error
	if d.delta != nil {
		dp := g.cfg.DataPlane.(DeltaPlane) // the core pushes deltas only to a DeltaPlane
		err = dp.ApplyDelta(ctx, d.delta)
		var nab NotAtBase
		if errors.As(err, &nab) && nab.NotAtBase() {
			g.log.Info("data plane does not run the delta's base; sending the complete state", "version", d.config.GetVersion(), "error", err)
			err = dp.Apply(ctx, g.adm.full())
		}
	} else {
		err = g.cfg.DataPlane.Apply(ctx, d.config)
	}
	out := g.adm.pushed(err)
	switch out.act {
	case actAck:
		g.cfg.Metrics.Applied(out.config.GetVersion(), time.Since(start))
		g.log.Info("config applied", "epoch", out.config.GetEpoch(), "version", out.config.GetVersion(), "hash", short(out.config.GetHash()), "took", time.Since(start).Round(time.Millisecond))
		g.cfg.OnApplied()
		ack(out.config)
		return false
	case actNack:
		rejected(out)
		return false
	default:
		g.log.Warn("push failed; retrying", "version", out.config.GetVersion(), "error", out.cause)
		return true
	}
}

// verify re-pushes the last applied config when the data plane lost it.
func (g *Gate) verify(ctx context.Context) {
	fp, ok := g.adm.running()
	if !ok {
		return
	}
	cur, err := g.cfg.DataPlane.Current(ctx)
	if err != nil {
		g.log.Debug("data plane not reachable for a check", "error", err)
		return
	}
	if cur == fp || ctx.Err() != nil {
		return
	}
	d := g.adm.lost()
	switch d.act {
	case actRequeue:
		g.log.Warn("data plane does not run the last applied config (restarted or replaced); pushing the newest in full", "version", d.config.GetVersion(), "found", short(cur))
	case actRepush:
		g.log.Warn("data plane does not run the last applied config (restarted or replaced); pushing it again", "version", d.config.GetVersion(), "found", short(cur))
		start := time.Now()
		if err := g.cfg.DataPlane.Apply(ctx, d.config); err != nil {
			g.log.Error("re-push failed", "error", err)
			return
		}
		g.cfg.Metrics.Applied(d.config.GetVersion(), time.Since(start))
	}
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
