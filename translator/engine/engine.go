// Package engine owns the translator's state: it follows the watcher's stream through a
// Mirror (one goroutine applies every event), feeds every decoded object to an incremental
// translate.Translator, and builds a config only once the stream's marker has been verified.
// The first config of an epoch is published complete, each later one as the delta of what
// its build changed. The first change after a quiet period is built at once (leading edge);
// the changes that follow are coalesced (a holdoff after the last change, bounded by a
// maximum delay); a build that changes nothing publishes nothing. Any break of the upstream
// stream starts a new epoch: downstream waits for the new marker, which comes only after the
// new stream's own marker.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sluice-io/sluice/internal/backoff"
	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// WatchClient opens watch streams; watchv1.WatchServiceClient is one.
type WatchClient interface {
	Watch(ctx context.Context, in *watchv1.WatchRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[watchv1.WatchResponse], error)
}

// Publisher receives the engine's output; the Config service is one.
type Publisher interface {
	// NewEpoch starts a new epoch: nothing of it is complete until its first config.
	NewEpoch(epoch string)
	// Publish makes cfg, a complete config, the first of its epoch; the marker names it. st
	// is cfg's state, the publisher's to keep (so that it need not digest cfg again).
	Publish(cfg *configv1.Config, st *contract.State)
	// PublishDelta makes the version d describes the newest of its epoch; dg are the digests
	// of its upserts, as the translator's state computed them.
	PublishDelta(d *configv1.ConfigDelta, dg contract.Digests)
}

// StatusSink takes the desired statuses of the objects served, Ingresses and Gateway API
// objects in the status stream's one shape; it must not block.
type StatusSink interface {
	// Replace makes sts (sorted) the complete desired statuses.
	Replace(sts []*watchv1.ObjectStatus)
	// Update changes the desired statuses of some objects.
	Update(changed []*watchv1.ObjectStatus, removed []*watchv1.ObjectKey)
}

// Metrics receives the engine's measurements.
type Metrics interface {
	StreamRestarted(reason string)
	ConfigBuilt(d time.Duration, published bool)
	SetObjects(n int)
	// SetQuarantined is how many objects are left out because a data plane rejected them.
	SetQuarantined(n int)
}

// Config configures an Engine.
type Config struct {
	Logger    hclog.Logger
	Client    WatchClient
	Publisher Publisher
	Options   translate.Options
	// Holdoff is the quiet time after a change before a build; MaxDelay bounds the wait.
	Holdoff  time.Duration
	MaxDelay time.Duration
	// Backoff bounds reconnect delays (first, max), each jittered (internal/backoff).
	BackoffMin, BackoffMax time.Duration
	Metrics                Metrics
	// Status, when set, gets the desired statuses after every build of a complete view.
	Status StatusSink
	// NewEpoch names epochs (random in production).
	NewEpoch func() string
	// Now is the clock for certificate expiry checks.
	Now func() time.Time
}

// Engine is the translator's owner of state.
type Engine struct {
	cfg Config
	log hclog.Logger

	// mirror holds every object of the stream, with its decoded form attached (nil when it
	// does not decode: badObjs says why).
	mirror  *watchstream.Mirror
	badObjs map[watchstream.ObjectKey]string
	tr      *translate.Translator

	epoch   string
	version uint64
	synced  bool // the current epoch's marker was verified and published
	// published are the addresses the statuses carry (lbKnown: whether known); a change of
	// them changes every status.
	published []*watchv1.LoadBalancerIngress
	lbKnown   bool
	// nacks are the pushers' NACKs that name objects, for the loop (Rejected); q decides
	// which objects they leave out.
	nacks chan *configv1.Nack
	q     *quarantine
	// unbuilt counts the objects changed since the last build (prebuild).
	unbuilt int
	// publishMissing remembers that --publish-service named a Service the view lacks, so
	// that it is said once per change, not on every build.
	publishMissing bool
}

// New returns an engine; Run starts it.
func New(cfg Config) (*Engine, error) {
	if cfg.Logger == nil || cfg.Client == nil || cfg.Publisher == nil {
		return nil, errors.New("engine: Logger, Client and Publisher are required")
	}
	if cfg.MaxDelay < cfg.Holdoff {
		return nil, errors.New("engine: MaxDelay must be at least Holdoff")
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = 5 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	if cfg.NewEpoch == nil {
		cfg.NewEpoch = newEpoch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, nacks: make(chan *configv1.Nack, 64), q: newQuarantine()}
	e.reset()
	return e, nil
}

// reset forgets every object: the next stream starts from a snapshot.
func (e *Engine) reset() {
	e.mirror = watchstream.NewMirror()
	e.resetObjects()
}

func (e *Engine) resetObjects() {
	e.badObjs = map[watchstream.ObjectKey]string{}
	e.tr = translate.New(e.cfg.Options)
}

// Run follows the watcher until ctx ends. Stream failures are retried with backoff forever;
// only ctx ends Run.
func (e *Engine) Run(ctx context.Context) error {
	bo := backoff.New(e.cfg.BackoffMin, e.cfg.BackoffMax)
	for ctx.Err() == nil {
		e.startEpoch()
		start := time.Now()
		err := e.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		reason := restartReason(err)
		e.cfg.Metrics.StreamRestarted(reason)
		if errors.Is(err, watchstream.ErrEpoch) || errors.Is(err, watchstream.ErrInventory) || errors.Is(err, watchstream.ErrProtocol) || errors.Is(err, watchstream.ErrGap) {
			// The objects held cannot be trusted: start over with a fresh snapshot.
			e.reset()
		}
		bo.Ended(start)
		delay := bo.Next()
		e.log.Warn("watch stream ended; reconnecting", "reason", reason, "error", err, "backoff", delay)
		if backoff.Sleep(ctx, delay) != nil {
			return nil
		}
	}
	return nil
}

// RestartReasons are every reason restartReason gives, so that the metric can show each at
// zero before the first restart.
var RestartReasons = []string{"disconnected", "gap", "epoch-changed", "inventory-mismatch", "protocol", "dropped-slow"}

func restartReason(err error) string {
	switch {
	case errors.Is(err, watchstream.ErrInventory):
		return "inventory-mismatch"
	case errors.Is(err, watchstream.ErrGap):
		return "gap"
	case errors.Is(err, watchstream.ErrEpoch):
		return "epoch-changed"
	case errors.Is(err, watchstream.ErrProtocol):
		return "protocol"
	case status.Code(err) == codes.ResourceExhausted:
		return "dropped-slow"
	default:
		return "disconnected"
	}
}

func (e *Engine) startEpoch() {
	e.epoch = e.cfg.NewEpoch()
	e.version = 0
	e.synced = false
	e.cfg.Publisher.NewEpoch(e.epoch)
}

// follow runs one upstream stream to its end.
func (e *Engine) follow(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := &watchv1.WatchRequest{ClientName: "translator"}
	if e.mirror.Epoch() != "" {
		req.ResumeEpoch, req.ResumeRevision = e.mirror.Epoch(), e.mirror.Revision()
	}
	// The call waits for its connection instead of failing while it is being made: then the
	// connection's own backoff (20 ms at first) says when the watcher is tried again, and
	// the stream opens as soon as it listens, not a whole stream backoff later (docs/design.md,
	// "Reconnects").
	stream, err := e.cfg.Client.Watch(sctx, req, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("open watch stream: %w", err)
	}
	e.mirror.StartStream()
	msgs := decodeAhead(sctx, grpcx.Pump[watchv1.WatchResponse](sctx, stream.Recv, 1024), 1024, 0)

	// A change when no holdoff window is open is built at once (leading edge) and opens one;
	// changes within a window are coalesced until it passes quietly, at most MaxDelay.
	var holdoff, maxDelay <-chan time.Time
	dirty := false
	// idle fires when the stream has been quiet for prebuildIdle before the marker.
	var idle <-chan time.Time
	flush := func() {
		e.build(false)
		dirty, maxDelay = false, nil
		holdoff = time.After(e.cfg.Holdoff)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-msgs:
			if r.err != nil {
				if errors.Is(r.err, io.EOF) {
					return errors.New("watcher closed the stream")
				}
				return r.err
			}
			r.wait()
			change, err := e.applyDecoded(r.msg, r.obj, r.decodeErr)
			if err != nil {
				return err
			}
			if !e.synced && change != watchstream.ChangeSynced {
				// Before the marker nothing is published, but what came is translated
				// whenever the stream leaves the engine idle (docs/design.md, "Cold start").
				idle = nil
				if e.unbuilt >= prebuildBatch && len(msgs) == 0 {
					idle = time.After(prebuildIdle)
				}
				continue
			}
			switch change {
			case watchstream.ChangeSynced:
				idle = nil
				e.q.prune()
				e.log.Info("watch stream verified complete", "watcher_epoch", e.mirror.Epoch(), "revision", e.mirror.Revision(), "objects", e.mirror.Len())
				e.build(true) // the first complete config is not held back
				dirty, holdoff, maxDelay = false, nil, nil
			case watchstream.ChangeObject:
				if !e.synced {
					continue
				}
				if holdoff == nil && len(msgs) == 0 {
					flush() // quiet until now, and nothing else queued: no reason to wait
					continue
				}
				if !dirty {
					dirty = true
					maxDelay = time.After(e.cfg.MaxDelay)
				}
				holdoff = time.After(e.cfg.Holdoff)
			}
		case <-idle:
			idle = nil
			if !e.synced { // after the marker every build publishes
				e.prebuild()
			}
		case n := <-e.nacks:
			if e.takeNack(n) && e.synced {
				flush() // a version without the rejected objects, at once
			}
		case <-holdoff:
			if dirty {
				flush()
			} else {
				holdoff = nil
			}
		case <-maxDelay:
			flush()
		}
	}
}

// apply applies one event to the mirror and the decoded objects.
func (e *Engine) apply(m *watchv1.WatchResponse) (watchstream.Change, error) {
	var obj runtime.Object
	var decodeErr error
	if m.GetUpsert() != nil {
		obj, decodeErr = decodeOf(m)
	}
	return e.applyDecoded(m, obj, decodeErr)
}

// applyDecoded is apply with an upsert's object already decoded (obj, or why not: err). The
// decoded object is attached to the mirror's entry: one map holds each object (docs/design.md,
// "Cold start").
func (e *Engine) applyDecoded(m *watchv1.WatchResponse, obj runtime.Object, err error) (watchstream.Change, error) {
	// What the translator holds of the object an upsert replaces or a delete removes, read
	// before the mirror forgets it.
	var k watchstream.ObjectKey
	var prev any
	switch ev := m.GetEvent().(type) {
	case *watchv1.WatchResponse_Upsert:
		k = watchstream.KeyOf(ev.Upsert.GetObject())
		prev = e.mirror.Value(k)
	case *watchv1.WatchResponse_Delete:
		k = watchstream.KeyOf(ev.Delete.GetObject())
		prev = e.mirror.Value(k)
	}
	change, merr := e.mirror.Apply(m)
	if merr != nil {
		return change, merr
	}
	switch ev := m.GetEvent().(type) {
	case *watchv1.WatchResponse_SnapshotStart:
		e.resetObjects()
		e.q.restart()
	case *watchv1.WatchResponse_Upsert:
		o := ev.Upsert.GetObject()
		e.unbuilt++
		e.forget(k, prev)
		if err != nil {
			e.gone(k)
			e.badObjs[k] = err.Error()
			e.tr.SetBroken(o.GetKind().GetKind(), k.Namespace, k.Name, err.Error())
			e.log.Error("object does not decode; left out", "object", k.String(), "error", err)
			break
		}
		// What the translator keeps (a compact form for the most numerous kinds, an
		// Ingress's encoding), so that the decoded object is not held a second time.
		e.mirror.Attach(k, e.tr.Set(translate.Encoded{Object: obj, Wire: o}))
		if kind := o.GetKind().GetKind(); translate.Quarantinable(kind) {
			e.seen(k, obj, o.GetResourceVersion())
		}
	case *watchv1.WatchResponse_Delete:
		e.unbuilt++
		e.forget(k, prev)
		e.gone(k)
	}
	e.cfg.Metrics.SetObjects(e.mirror.Len() - len(e.badObjs))
	return change, nil
}

// forget removes what the engine holds of k: prev, the object the translator was given, or
// that k did not decode.
func (e *Engine) forget(k watchstream.ObjectKey, prev any) {
	if prev != nil {
		e.tr.Remove(prev)
	}
	if _, ok := e.badObjs[k]; ok {
		delete(e.badObjs, k)
		kind := k.Kind[strings.LastIndexByte(k.Kind, '/')+1:]
		e.tr.SetBroken(kind, k.Namespace, k.Name, "")
	}
}

// prebuildBatch is how many objects must have come since the last translation before an
// idle moment of the stream is used to translate them ahead of the marker: fewer would spend
// a build's fixed costs on a handful of objects.
const prebuildBatch = 512

// prebuildIdle is how long the stream must be quiet before the marker for a prebuild: a
// translator that is only momentarily ahead of a stream still pouring in gains nothing by
// building (measured: BenchmarkColdStart, where the stream never pauses, is slower with a
// build at every momentary gap), one waiting for the watcher's next list does.
const prebuildIdle = 5 * time.Millisecond

// prebuild translates what came so far, before the marker: nothing is published and no
// status is handed out (the first build after the marker publishes the complete state and
// every status), so only the work is done early. The view may still be incomplete: an
// object translated now against a missing one is translated again when that one comes,
// as any change is.
func (e *Engine) prebuild() {
	start := time.Now()
	e.tr.SetNow(e.cfg.Now())
	e.tr.Build()
	e.tr.State().TakeDelta()
	e.tr.TakeStatusChanges()
	e.tr.TakeGatewayStatusChanges()
	e.log.Debug("translated ahead of the marker", "objects", e.unbuilt, "took", time.Since(start))
	e.unbuilt = 0
	e.cfg.Metrics.ConfigBuilt(time.Since(start), false)
}

// build translates what changed and publishes the config if it changed.
func (e *Engine) build(first bool) {
	start := time.Now()
	e.unbuilt = 0
	e.tr.SetNow(e.cfg.Now())
	e.tr.Build()
	st := e.tr.State()
	delta, digests := st.TakeDeltaDigests()
	e.statuses(first)
	if !first && delta == nil {
		e.cfg.Metrics.ConfigBuilt(time.Since(start), false)
		return
	}
	e.version++
	hash := st.Hash()
	if first {
		e.cfg.Publisher.Publish(&configv1.Config{Epoch: e.epoch, Version: e.version, Hash: hash,
			WatcherEpoch: e.mirror.Epoch(), WatcherRevision: e.mirror.Revision(), Resources: st.Resources()}, st.Clone())
	} else {
		delta.Epoch, delta.Version, delta.BaseVersion, delta.Hash = e.epoch, e.version, e.version-1, hash
		delta.WatcherEpoch, delta.WatcherRevision = e.mirror.Epoch(), e.mirror.Revision()
		e.cfg.Publisher.PublishDelta(delta, digests)
	}
	e.synced = true
	e.cfg.Metrics.ConfigBuilt(time.Since(start), true)
	e.log.Debug("config published", "epoch", e.epoch, "version", e.version, "hash", hash[:12], "complete", first,
		"virtual_hosts", st.Len(contract.VirtualHosts), "took", time.Since(start))
}

// statuses hands the status sink what the build changed: every status after the first
// build of an epoch or a change of the published addresses, else those of the Ingresses
// the build touched.
func (e *Engine) statuses(first bool) {
	changed := append(e.tr.TakeStatusChanges(), e.tr.TakeGatewayStatusChanges()...)
	if e.cfg.Status == nil {
		return
	}
	opts := e.cfg.Options
	lb, known := e.tr.PublishedAddresses()
	if opts.PublishService != "" && len(opts.PublishAddresses) == 0 {
		if !known && !e.publishMissing {
			e.log.Warn("publish service not found; the Ingresses' status.loadBalancer is left as it is", "service", opts.PublishService,
				"hint", "the watcher must watch its namespace")
		} else if known && e.publishMissing {
			e.log.Info("publish service found", "service", opts.PublishService)
		}
		e.publishMissing = !known
	}
	all := first || known != e.lbKnown || !contract.SameLoadBalancer(lb, e.published)
	if all {
		e.published, e.lbKnown = lb, known
	}
	// One list of addresses, shared by every status, rather than a copy per object held by
	// the reporter for each of them.
	e.handOver(all, changed, contract.TypedAddresses(lb), known)
}

// handOver gives the status sink every status (all) or those of the changed keys, a key
// whose status is nil (no longer served) as removed; it sends nothing when nothing changed.
// addrs and known are the published addresses, one list every status shares.
func (e *Engine) handOver(all bool, changed []*watchv1.ObjectKey, addrs []*watchv1.GatewayAddress, known bool) {
	if all {
		ks := e.tr.StatusKeys()
		sts := make([]*watchv1.ObjectStatus, 0, len(ks))
		for _, k := range ks {
			sts = append(sts, e.tr.ObjectStatus(k, addrs, known))
		}
		e.cfg.Status.Replace(sts)
		return
	}
	var sts []*watchv1.ObjectStatus
	var removed []*watchv1.ObjectKey
	for _, k := range changed {
		if st := e.tr.ObjectStatus(k, addrs, known); st != nil {
			sts = append(sts, st)
		} else {
			removed = append(removed, k)
		}
	}
	if len(sts) > 0 || len(removed) > 0 {
		e.cfg.Status.Update(sts, removed)
	}
}

type nopMetrics struct{}

func (nopMetrics) StreamRestarted(string)          {}
func (nopMetrics) ConfigBuilt(time.Duration, bool) {}
func (nopMetrics) SetObjects(int)                  {}
func (nopMetrics) SetQuarantined(int)              {}
