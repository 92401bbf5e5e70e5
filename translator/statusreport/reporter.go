// Package statusreport owns the translator's status stream to the watcher. The engine hands
// it the desired statuses of the objects it serves, Ingresses and Gateway API objects in one
// shape (Replace, then Update with what a build changed); neither blocks;
// the reporter sends them in full on every new stream and then only what changed, at the
// cost of the change. Nothing on the config path waits for it: a slow, absent or restarting
// watcher only delays statuses.
package statusreport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/backoff"
	"github.com/sluice-io/sluice/internal/grpcx"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// Client opens status streams; watchv1.StatusServiceClient is one.
type Client interface {
	ReportStatus(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[watchv1.ReportStatusRequest, watchv1.ReportStatusResponse], error)
}

// Metrics receives the reporter's measurements.
type Metrics interface {
	// StatusReported counts one request sent with n statuses and removed entries.
	StatusReported(full bool, n int)
	SetStatusConnected(bool)
}

// Config configures a Reporter.
type Config struct {
	Logger hclog.Logger
	Client Client
	// Source names this translator in its reports (controller name and class).
	Source string
	// BackoffMin and BackoffMax bound reconnect delays, each jittered (internal/backoff).
	BackoffMin, BackoffMax time.Duration
	Metrics                Metrics
}

// Reporter sends desired statuses to the watcher.
type Reporter struct {
	cfg    Config
	log    hclog.Logger
	signal chan struct{} // a change is pending (capacity one)

	mu      sync.Mutex
	ready   bool // the first Replace came
	desired map[key]*watchv1.ObjectStatus
	pending map[key]bool // changed since the last request taken
}

// key names an object of either API by kind, namespace and name.
type key struct{ kind, ns, name string }

func keyOf(k *watchv1.ObjectKey) key { return key{k.GetKind(), k.GetNamespace(), k.GetName()} }

// New returns a reporter; Run starts it.
func New(cfg Config) (*Reporter, error) {
	if cfg.Logger == nil || cfg.Client == nil || cfg.Source == "" {
		return nil, errors.New("statusreport: Logger, Client and Source are required")
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
	return &Reporter{cfg: cfg, log: cfg.Logger, signal: make(chan struct{}, 1), desired: map[key]*watchv1.ObjectStatus{}, pending: map[key]bool{}}, nil
}

// Replace makes sts the complete desired statuses. It never blocks.
func (r *Reporter) Replace(sts []*watchv1.ObjectStatus) {
	r.mu.Lock()
	for k := range r.desired {
		r.pending[k] = true
	}
	r.desired = make(map[key]*watchv1.ObjectStatus, len(sts))
	for _, st := range sts {
		k := keyOf(st.GetKey())
		r.desired[k], r.pending[k] = st, true
	}
	r.ready = true
	r.mu.Unlock()
	r.notify()
}

// Update changes the desired statuses of some objects. It never blocks.
func (r *Reporter) Update(changed []*watchv1.ObjectStatus, removed []*watchv1.ObjectKey) {
	r.mu.Lock()
	for _, st := range changed {
		k := keyOf(st.GetKey())
		r.desired[k], r.pending[k] = st, true
	}
	for _, ok := range removed {
		k := keyOf(ok)
		delete(r.desired, k)
		r.pending[k] = true
	}
	r.mu.Unlock()
	r.notify()
}

func (r *Reporter) notify() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// told is what one stream was told.
type told map[key]*watchv1.ObjectStatus

// full returns the full report, every desired status sorted, as what a new stream is told.
func (r *Reporter) full() (*watchv1.ReportStatusRequest, told) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = map[key]bool{}
	sent := make(told, len(r.desired))
	req := &watchv1.ReportStatusRequest{Source: r.cfg.Source, Full: true, Objects: make([]*watchv1.ObjectStatus, 0, len(r.desired))}
	for k, st := range r.desired {
		sent[k] = st
		req.Objects = append(req.Objects, st)
	}
	translate.SortStatuses(req.Objects)
	return req, sent
}

// changes returns the request that brings a stream told sent up to date (nil when nothing
// differs) and updates sent.
func (r *Reporter) changes(sent told) *watchv1.ReportStatusRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	req := &watchv1.ReportStatusRequest{Source: r.cfg.Source}
	for k := range r.pending {
		d, want := r.desired[k]
		s, had := sent[k]
		switch {
		case want && (!had || !proto.Equal(s, d)):
			req.Objects = append(req.Objects, d)
			sent[k] = d
		case !want && had:
			req.RemovedObjects = append(req.RemovedObjects, &watchv1.ObjectKey{Kind: k.kind, Namespace: k.ns, Name: k.name})
			delete(sent, k)
		}
	}
	r.pending = map[key]bool{}
	if len(req.Objects) == 0 && len(req.RemovedObjects) == 0 {
		return nil
	}
	translate.SortStatuses(req.Objects)
	sort.Slice(req.RemovedObjects, func(i, j int) bool { return translate.LessObjectKey(req.RemovedObjects[i], req.RemovedObjects[j]) })
	return req
}

func reportSize(req *watchv1.ReportStatusRequest) int {
	return len(req.GetObjects()) + len(req.GetRemovedObjects())
}

func (r *Reporter) isReady() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready
}

// Run reports until ctx ends. Nothing is sent before the first Replace: a translator
// without a complete view has no statuses to claim.
func (r *Reporter) Run(ctx context.Context) error {
	for !r.isReady() {
		select {
		case <-ctx.Done():
			return nil
		case <-r.signal:
		}
	}
	bo := backoff.New(r.cfg.BackoffMin, r.cfg.BackoffMax)
	lastErr := "" // a failure repeated stream after stream is said once at WARN
	for ctx.Err() == nil {
		start := time.Now()
		accepted, err := r.stream(ctx)
		r.cfg.Metrics.SetStatusConnected(false)
		if ctx.Err() != nil {
			return nil
		}
		if accepted {
			lastErr = ""
		}
		bo.Ended(start)
		if status.Code(err) == codes.Unimplemented {
			bo.Longest() // an older watcher: try again now and then
		}
		delay := bo.Next()
		if msg := fmt.Sprint(err); msg != lastErr {
			r.log.Warn("status stream ended; reconnecting", "error", err, "backoff", delay)
			lastErr = msg
		} else {
			r.log.Debug("status stream ended again; reconnecting", "error", err, "backoff", delay)
		}
		if backoff.Sleep(ctx, delay) != nil {
			return nil
		}
	}
	return nil
}

// stream runs one status stream: the full report, then the changes. It returns whether a
// watcher accepted the stream.
func (r *Reporter) stream(ctx context.Context) (accepted bool, _ error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Waits for its connection rather than failing while it is made (docs/design.md, "Reconnects").
	s, err := r.cfg.Client.ReportStatus(sctx, grpc.WaitForReady(true))
	if err != nil {
		return accepted, err
	}
	msgs := grpcx.Pump[watchv1.ReportStatusResponse](sctx, s.Recv, 4)
	full, sent := r.full()
	// A Send that fails with io.EOF means the watcher ended the stream: its reason arrives
	// on msgs (only the pump may call Recv).
	if err := s.Send(full); err == nil {
		r.cfg.Metrics.StatusReported(true, reportSize(full))
	} else if !errors.Is(err, io.EOF) {
		return accepted, err
	}
	for {
		select {
		case <-ctx.Done():
			return accepted, ctx.Err()
		case m := <-msgs:
			if m.Err != nil {
				if errors.Is(m.Err, io.EOF) {
					return accepted, errors.New("watcher closed the status stream")
				}
				return accepted, m.Err
			}
			accepted = true
			r.cfg.Metrics.SetStatusConnected(true)
			r.log.Info("status stream accepted", "leader", m.Msg.GetLeader(), "relayed", m.Msg.GetRelayed(), "objects", len(sent))
		case <-r.signal:
			req := r.changes(sent)
			if req == nil {
				continue
			}
			if err := s.Send(req); err == nil {
				r.cfg.Metrics.StatusReported(false, reportSize(req))
			} else if !errors.Is(err, io.EOF) {
				return accepted, err
			}
		}
	}
}

type nopMetrics struct{}

func (nopMetrics) StatusReported(bool, int) {}
func (nopMetrics) SetStatusConnected(bool)  {}
