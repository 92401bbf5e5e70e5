// Package statusreport owns the translator's status stream to the watcher. The engine hands
// it the desired statuses after every build (latest wins: Offer never blocks); the reporter
// sends them in full on every new stream and then only what changed. Nothing on the config
// path waits for it: a slow, absent or restarting watcher only delays statuses.
package statusreport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
	// BackoffMin and BackoffMax bound reconnect delays.
	BackoffMin, BackoffMax time.Duration
	Metrics                Metrics
}

// Reporter sends desired statuses to the watcher.
type Reporter struct {
	cfg  Config
	log  hclog.Logger
	slot chan []*watchv1.IngressStatus
}

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
	return &Reporter{cfg: cfg, log: cfg.Logger, slot: make(chan []*watchv1.IngressStatus, 1)}, nil
}

// Offer makes sts (sorted, complete for this translator) the newest desired statuses. It
// never blocks: an offer not yet taken is replaced.
func (r *Reporter) Offer(sts []*watchv1.IngressStatus) {
	for {
		select {
		case r.slot <- sts:
			return
		default:
		}
		select {
		case <-r.slot:
		default:
		}
	}
}

type key struct{ ns, name string }

// Run reports until ctx ends. Nothing is sent before the first offer: a translator without
// a complete view has no statuses to claim.
func (r *Reporter) Run(ctx context.Context) error {
	var desired map[key]*watchv1.IngressStatus
	select {
	case <-ctx.Done():
		return nil
	case sts := <-r.slot:
		desired = index(sts)
	}
	backoff := r.cfg.BackoffMin
	lastErr := "" // a failure repeated stream after stream is said once at WARN
	for ctx.Err() == nil {
		start := time.Now()
		var err error
		var accepted bool
		desired, accepted, err = r.stream(ctx, desired)
		r.cfg.Metrics.SetStatusConnected(false)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > 30*time.Second {
			backoff = r.cfg.BackoffMin
		}
		if accepted {
			lastErr = ""
		}
		if status.Code(err) == codes.Unimplemented {
			backoff = r.cfg.BackoffMax // an older watcher: try again now and then
		}
		if msg := fmt.Sprint(err); msg != lastErr {
			r.log.Warn("status stream ended; reconnecting", "error", err, "backoff", backoff)
			lastErr = msg
		} else {
			r.log.Debug("status stream ended again; reconnecting", "error", err, "backoff", backoff)
		}
		if !r.wait(ctx, backoff, &desired) {
			return nil
		}
		backoff = min(backoff*2, r.cfg.BackoffMax)
	}
	return nil
}

// wait sleeps for d, taking offers meanwhile; false when ctx ended.
func (r *Reporter) wait(ctx context.Context, d time.Duration, desired *map[key]*watchv1.IngressStatus) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case sts := <-r.slot:
			*desired = index(sts)
		}
	}
}

func index(sts []*watchv1.IngressStatus) map[key]*watchv1.IngressStatus {
	m := make(map[key]*watchv1.IngressStatus, len(sts))
	for _, s := range sts {
		m[key{s.GetKey().GetNamespace(), s.GetKey().GetName()}] = s
	}
	return m
}

// stream runs one status stream: the full report, then the changes. It returns the newest
// desired statuses when the stream ends, and whether a watcher accepted the stream.
func (r *Reporter) stream(ctx context.Context, desired map[key]*watchv1.IngressStatus) (_ map[key]*watchv1.IngressStatus, accepted bool, _ error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := r.cfg.Client.ReportStatus(sctx)
	if err != nil {
		return desired, accepted, err
	}
	msgs := grpcx.Pump[watchv1.ReportStatusResponse](sctx, s.Recv, 4)
	full := &watchv1.ReportStatusRequest{Source: r.cfg.Source, Full: true, Statuses: sorted(desired)}
	// A Send that fails with io.EOF means the watcher ended the stream: its reason arrives
	// on msgs (only the pump may call Recv).
	if err := s.Send(full); err == nil {
		r.cfg.Metrics.StatusReported(true, len(full.Statuses))
	} else if !errors.Is(err, io.EOF) {
		return desired, accepted, err
	}
	sent := desired
	for {
		select {
		case <-ctx.Done():
			return desired, accepted, ctx.Err()
		case m := <-msgs:
			if m.Err != nil {
				if errors.Is(m.Err, io.EOF) {
					return desired, accepted, errors.New("watcher closed the status stream")
				}
				return desired, accepted, m.Err
			}
			accepted = true
			r.cfg.Metrics.SetStatusConnected(true)
			r.log.Info("status stream accepted", "leader", m.Msg.GetLeader(), "relayed", m.Msg.GetRelayed(), "ingresses", len(desired))
		case sts := <-r.slot:
			desired = index(sts)
			req := diff(r.cfg.Source, sent, desired)
			if req == nil {
				continue
			}
			if err := s.Send(req); err == nil {
				r.cfg.Metrics.StatusReported(false, len(req.Statuses)+len(req.Removed))
			} else if !errors.Is(err, io.EOF) {
				return desired, accepted, err
			}
			sent = desired
		}
	}
}

func sorted(m map[key]*watchv1.IngressStatus) []*watchv1.IngressStatus {
	out := make([]*watchv1.IngressStatus, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	translate.SortStatuses(out)
	return out
}

// diff is the request that turns what the stream was told (sent) into desired; nil when
// nothing changed.
func diff(source string, sent, desired map[key]*watchv1.IngressStatus) *watchv1.ReportStatusRequest {
	req := &watchv1.ReportStatusRequest{Source: source}
	for k, d := range desired {
		if s, ok := sent[k]; !ok || !proto.Equal(s, d) {
			req.Statuses = append(req.Statuses, d)
		}
	}
	for k := range sent {
		if _, ok := desired[k]; !ok {
			req.Removed = append(req.Removed, &watchv1.IngressKey{Namespace: k.ns, Name: k.name})
		}
	}
	if len(req.Statuses) == 0 && len(req.Removed) == 0 {
		return nil
	}
	translate.SortStatuses(req.Statuses)
	sort.Slice(req.Removed, func(i, j int) bool { return translate.LessKey(req.Removed[i], req.Removed[j]) })
	return req
}

type nopMetrics struct{}

func (nopMetrics) StatusReported(bool, int) {}
func (nopMetrics) SetStatusConnected(bool)  {}
