// Package engine owns the translator's state: it follows the watcher's stream through a
// Mirror (one goroutine applies every event), keeps the decoded objects, and builds a config
// only once the stream's marker has been verified. Bursts are coalesced (a holdoff after the
// last change, bounded by a maximum delay) and a config with an unchanged hash is not
// published. Any break of the upstream stream starts a new epoch: downstream waits for the
// new marker, which comes only after the new stream's own marker.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"

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
	// NewEpoch starts a new epoch: nothing of it is complete until Synced.
	NewEpoch(epoch string)
	// Publish makes cfg the newest config of its epoch; first marks the first complete one,
	// which the marker names.
	Publish(cfg *configv1.Config, first bool)
}

// StatusSink takes the desired statuses of the served Ingresses after every build; it must
// not block (the status reporter keeps only the newest).
type StatusSink interface {
	Offer(sts []*watchv1.IngressStatus)
}

// Metrics receives the engine's measurements.
type Metrics interface {
	StreamRestarted(reason string)
	ConfigBuilt(d time.Duration, published bool)
	SetObjects(n int)
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
	// Backoff bounds reconnect delays (first, max).
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

	mirror  *watchstream.Mirror
	decoded map[watchstream.ObjectKey]runtime.Object
	badObjs map[watchstream.ObjectKey]string

	epoch    string
	version  uint64
	lastHash string
	synced   bool // the current epoch's marker was verified and published
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
	return &Engine{cfg: cfg, log: cfg.Logger, mirror: watchstream.NewMirror(), decoded: map[watchstream.ObjectKey]runtime.Object{}, badObjs: map[watchstream.ObjectKey]string{}}, nil
}

// Run follows the watcher until ctx ends. Stream failures are retried with backoff forever;
// only ctx ends Run.
func (e *Engine) Run(ctx context.Context) error {
	backoff := e.cfg.BackoffMin
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
			e.mirror = watchstream.NewMirror()
			e.decoded = map[watchstream.ObjectKey]runtime.Object{}
			e.badObjs = map[watchstream.ObjectKey]string{}
		}
		if time.Since(start) > 30*time.Second {
			backoff = e.cfg.BackoffMin // the stream was healthy for a while
		}
		e.log.Warn("watch stream ended; reconnecting", "reason", reason, "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, e.cfg.BackoffMax)
	}
	return nil
}

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
	e.lastHash = ""
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
	stream, err := e.cfg.Client.Watch(sctx, req)
	if err != nil {
		return fmt.Errorf("open watch stream: %w", err)
	}
	e.mirror.StartStream()
	msgs := grpcx.Pump[watchv1.WatchResponse](sctx, stream.Recv, 1024)

	var holdoff, maxDelay <-chan time.Time
	dirty := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-msgs:
			if r.Err != nil {
				if errors.Is(r.Err, io.EOF) {
					return errors.New("watcher closed the stream")
				}
				return r.Err
			}
			change, err := e.apply(r.Msg)
			if err != nil {
				return err
			}
			switch change {
			case watchstream.ChangeSynced:
				e.log.Info("watch stream verified complete", "watcher_epoch", e.mirror.Epoch(), "revision", e.mirror.Revision(), "objects", e.mirror.Len())
				e.build(true) // the first complete config is not held back
				dirty, holdoff, maxDelay = false, nil, nil
			case watchstream.ChangeObject:
				if !e.synced {
					continue
				}
				if !dirty {
					dirty = true
					maxDelay = time.After(e.cfg.MaxDelay)
				}
				holdoff = time.After(e.cfg.Holdoff)
			}
		case <-holdoff:
			e.build(false)
			dirty, holdoff, maxDelay = false, nil, nil
		case <-maxDelay:
			e.build(false)
			dirty, holdoff, maxDelay = false, nil, nil
		}
	}
}

// apply applies one event to the mirror and the decoded objects.
func (e *Engine) apply(m *watchv1.WatchResponse) (watchstream.Change, error) {
	change, err := e.mirror.Apply(m)
	if err != nil {
		return change, err
	}
	switch ev := m.GetEvent().(type) {
	case *watchv1.WatchResponse_SnapshotStart:
		e.decoded = map[watchstream.ObjectKey]runtime.Object{}
		e.badObjs = map[watchstream.ObjectKey]string{}
	case *watchv1.WatchResponse_Upsert:
		o := ev.Upsert.GetObject()
		k := watchstream.KeyOf(o)
		obj, err := watchstream.Decode(o)
		if err != nil {
			delete(e.decoded, k)
			e.badObjs[k] = err.Error()
			e.log.Error("object does not decode; left out", "object", k.String(), "error", err)
			break
		}
		delete(e.badObjs, k)
		e.decoded[k] = obj
	case *watchv1.WatchResponse_Delete:
		k := watchstream.KeyOf(ev.Delete.GetObject())
		delete(e.decoded, k)
		delete(e.badObjs, k)
	}
	e.cfg.Metrics.SetObjects(len(e.decoded))
	return change, nil
}

// build translates the objects and publishes the config if it changed.
func (e *Engine) build(first bool) {
	start := time.Now()
	var in translate.Input
	for _, o := range e.decoded {
		in.Add(o)
	}
	opts := e.cfg.Options
	opts.Now = e.cfg.Now()
	res := translate.Translate(in, opts)
	for k, why := range e.badObjs {
		res.Findings = append(res.Findings, &configv1.Finding{
			Object: &configv1.ObjectRef{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name},
			Field:  "", Cause: "object does not decode: " + why, Severity: configv1.FindingSeverity_FINDING_SEVERITY_ERROR, Reason: "Undecodable",
		})
	}
	translate.SortFindings(res.Findings)
	if e.cfg.Status != nil {
		// Offered on every build, not only on new configs: the publish Service's addresses
		// and the set of served Ingresses can change without changing the config.
		e.cfg.Status.Offer(translate.Statuses(in, opts, res))
		if opts.PublishService != "" && len(opts.PublishAddresses) == 0 {
			_, found := translate.PublishedAddresses(in, opts)
			if !found && !e.publishMissing {
				e.log.Warn("publish service not found; the Ingresses' status.loadBalancer is left as it is", "service", opts.PublishService,
					"hint", "the watcher must watch its namespace")
			} else if found && e.publishMissing {
				e.log.Info("publish service found", "service", opts.PublishService)
			}
			e.publishMissing = !found
		}
	}
	hash := translate.Hash(res)
	if !first && hash == e.lastHash {
		e.cfg.Metrics.ConfigBuilt(time.Since(start), false)
		return
	}
	e.version++
	e.lastHash = hash
	cfg := &configv1.Config{Epoch: e.epoch, Version: e.version, Hash: hash,
		WatcherEpoch: e.mirror.Epoch(), WatcherRevision: e.mirror.Revision(), Resources: res}
	e.cfg.Publisher.Publish(cfg, first)
	e.synced = true
	e.cfg.Metrics.ConfigBuilt(time.Since(start), true)
	e.log.Debug("config published", "epoch", e.epoch, "version", e.version, "hash", hash[:12], "virtual_hosts", len(res.VirtualHosts),
		"findings", len(res.Findings), "took", time.Since(start))
}

type nopMetrics struct{}

func (nopMetrics) StreamRestarted(string)          {}
func (nopMetrics) ConfigBuilt(time.Duration, bool) {}
func (nopMetrics) SetObjects(int)                  {}
