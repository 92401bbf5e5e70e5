// Package statusreport owns the translator's status stream to the watcher. The engine hands
// it the desired statuses of Ingresses (Replace, then Update with what a build changed) and
// of Gateway API objects (ReplaceGateway, UpdateGateway); none of them blocks;
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
	desired map[key]*watchv1.IngressStatus
	pending map[key]bool // changed since the last request taken
	// The Gateway API objects', alike, by kind, namespace and name.
	desiredGw map[gwKey]*watchv1.GatewayAPIStatus
	pendingGw map[gwKey]bool
}

type gwKey struct{ kind, ns, name string }

func gwKeyOf(k *watchv1.ObjectKey) gwKey { return gwKey{k.GetKind(), k.GetNamespace(), k.GetName()} }

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
	return &Reporter{cfg: cfg, log: cfg.Logger, signal: make(chan struct{}, 1), desired: map[key]*watchv1.IngressStatus{}, pending: map[key]bool{},
		desiredGw: map[gwKey]*watchv1.GatewayAPIStatus{}, pendingGw: map[gwKey]bool{}}, nil
}

// Replace makes sts the complete desired statuses. It never blocks.
func (r *Reporter) Replace(sts []*watchv1.IngressStatus) {
	r.mu.Lock()
	for k := range r.desired {
		r.pending[k] = true
	}
	r.desired = make(map[key]*watchv1.IngressStatus, len(sts))
	for _, st := range sts {
		k := keyOf(st.GetKey())
		r.desired[k], r.pending[k] = st, true
	}
	r.ready = true
	r.mu.Unlock()
	r.notify()
}

// Update changes the desired statuses of some Ingresses. It never blocks.
func (r *Reporter) Update(changed []*watchv1.IngressStatus, removed []*watchv1.IngressKey) {
	r.mu.Lock()
	for _, st := range changed {
		k := keyOf(st.GetKey())
		r.desired[k], r.pending[k] = st, true
	}
	for _, ik := range removed {
		k := keyOf(ik)
		delete(r.desired, k)
		r.pending[k] = true
	}
	r.mu.Unlock()
	r.notify()
}

// ReplaceGateway makes sts the complete desired Gateway API statuses. It never blocks. The
// engine calls it before Replace, so that the first full report holds both.
func (r *Reporter) ReplaceGateway(sts []*watchv1.GatewayAPIStatus) {
	r.mu.Lock()
	for k := range r.desiredGw {
		r.pendingGw[k] = true
	}
	r.desiredGw = make(map[gwKey]*watchv1.GatewayAPIStatus, len(sts))
	for _, st := range sts {
		k := gwKeyOf(st.GetKey())
		r.desiredGw[k], r.pendingGw[k] = st, true
	}
	r.mu.Unlock()
	r.notify()
}

// UpdateGateway changes the desired statuses of some Gateway API objects. It never blocks.
func (r *Reporter) UpdateGateway(changed []*watchv1.GatewayAPIStatus, removed []*watchv1.ObjectKey) {
	r.mu.Lock()
	for _, st := range changed {
		k := gwKeyOf(st.GetKey())
		r.desiredGw[k], r.pendingGw[k] = st, true
	}
	for _, ok := range removed {
		k := gwKeyOf(ok)
		delete(r.desiredGw, k)
		r.pendingGw[k] = true
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

func keyOf(k *watchv1.IngressKey) key { return key{k.GetNamespace(), k.GetName()} }

// told is what one stream was told.
type told struct {
	ingresses map[key]*watchv1.IngressStatus
	gateway   map[gwKey]*watchv1.GatewayAPIStatus
}

// full returns the full report, every desired status sorted, as what a new stream is told.
func (r *Reporter) full() (*watchv1.ReportStatusRequest, told) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending, r.pendingGw = map[key]bool{}, map[gwKey]bool{}
	sent := told{ingresses: make(map[key]*watchv1.IngressStatus, len(r.desired)), gateway: make(map[gwKey]*watchv1.GatewayAPIStatus, len(r.desiredGw))}
	req := &watchv1.ReportStatusRequest{Source: r.cfg.Source, Full: true, Statuses: make([]*watchv1.IngressStatus, 0, len(r.desired))}
	for k, st := range r.desired {
		sent.ingresses[k] = st
		req.Statuses = append(req.Statuses, st)
	}
	for k, st := range r.desiredGw {
		sent.gateway[k] = st
		req.GatewayStatuses = append(req.GatewayStatuses, st)
	}
	translate.SortStatuses(req.Statuses)
	translate.SortGatewayStatuses(req.GatewayStatuses)
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
		s, had := sent.ingresses[k]
		switch {
		case want && (!had || !proto.Equal(s, d)):
			req.Statuses = append(req.Statuses, d)
			sent.ingresses[k] = d
		case !want && had:
			req.Removed = append(req.Removed, &watchv1.IngressKey{Namespace: k.ns, Name: k.name})
			delete(sent.ingresses, k)
		}
	}
	r.pending = map[key]bool{}
	for k := range r.pendingGw {
		d, want := r.desiredGw[k]
		s, had := sent.gateway[k]
		switch {
		case want && (!had || !proto.Equal(s, d)):
			req.GatewayStatuses = append(req.GatewayStatuses, d)
			sent.gateway[k] = d
		case !want && had:
			req.RemovedGateway = append(req.RemovedGateway, &watchv1.ObjectKey{Kind: k.kind, Namespace: k.ns, Name: k.name})
			delete(sent.gateway, k)
		}
	}
	r.pendingGw = map[gwKey]bool{}
	if len(req.Statuses) == 0 && len(req.Removed) == 0 && len(req.GatewayStatuses) == 0 && len(req.RemovedGateway) == 0 {
		return nil
	}
	translate.SortStatuses(req.Statuses)
	sort.Slice(req.Removed, func(i, j int) bool { return translate.LessKey(req.Removed[i], req.Removed[j]) })
	translate.SortGatewayStatuses(req.GatewayStatuses)
	sort.Slice(req.RemovedGateway, func(i, j int) bool { return translate.LessObjectKey(req.RemovedGateway[i], req.RemovedGateway[j]) })
	return req
}

func reportSize(req *watchv1.ReportStatusRequest) int {
	return len(req.Statuses) + len(req.Removed) + len(req.GatewayStatuses) + len(req.RemovedGateway)
}

func (r *Reporter) isReady() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready
}

type key struct{ ns, name string }

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
	s, err := r.cfg.Client.ReportStatus(sctx)
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
			r.log.Info("status stream accepted", "leader", m.Msg.GetLeader(), "relayed", m.Msg.GetRelayed(), "ingresses", len(sent.ingresses), "gateway_api_objects", len(sent.gateway))
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
