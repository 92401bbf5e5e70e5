// Package configserver implements sluice.config.v1.ConfigService. It holds the config state
// of the current epoch (resources by key, shared with nobody that mutates them), a short
// history of the deltas that led to it and, once the epoch is complete, its marker. Every
// stream gets the marker first, then the complete state, then a delta onto the version it
// was sent last whenever the state changes: a slow pusher skips intermediate versions (one
// merged delta, or the complete state when it is further behind than the history) and never
// holds back the others. A Resync gets the complete state again. It records what each
// pusher acknowledged or rejected.
package configserver

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Metrics receives the server's measurements.
type Metrics interface {
	SetPushers(n int)
	Ack(pusher string, version uint64)
	Nack(pusher string)
	Published(version uint64)
}

// Config configures a Server.
type Config struct {
	Logger    hclog.Logger
	Stopping  <-chan struct{}
	Heartbeat time.Duration
	Metrics   Metrics
	// OnComplete is called once, when the first complete config is published.
	OnComplete func()
	Now        func() time.Time
}

// Server is the ConfigService and the engine's Publisher.
type Server struct {
	configv1.UnimplementedConfigServiceServer
	cfg Config
	log hclog.Logger

	mu     sync.Mutex
	epoch  string
	marker *configv1.InitialSyncComplete // of the current epoch, nil until complete
	// The newest version: its state, its reference and, once built for a reader, the
	// complete config (nil until then; resources are never mutated, so it may be shared).
	state    *contract.State
	latest   *configv1.Config // without resources
	full     *configv1.Config
	history  []contract.Applied // the deltas up to latest, contiguous, oldest first
	changed  chan struct{}      // closed on every change
	pushers  map[string]*pusher
	complete sync.Once
}

// maxHistory bounds the deltas kept for streams that fell behind; further behind, a stream
// gets the complete state.
const maxHistory = 128

type pusher struct {
	status  *configv1.PusherStatus
	streams int
}

// New returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil || cfg.Stopping == nil {
		return nil, errors.New("configserver: Logger and Stopping are required")
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	if cfg.OnComplete == nil {
		cfg.OnComplete = func() {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg, log: cfg.Logger, changed: make(chan struct{}), pushers: map[string]*pusher{}}, nil
}

func (s *Server) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// NewEpoch starts an epoch; streams wait for its marker.
func (s *Server) NewEpoch(epoch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch, s.marker = epoch, nil
	s.signalLocked()
}

// Publish makes cfg, a complete config, the first of its epoch; the marker names it. st is
// cfg's state (the engine's, cloned), which the server keeps and changes from then on.
func (s *Server) Publish(cfg *configv1.Config, st *contract.State) {
	if st.Hash() != cfg.GetHash() {
		s.log.Error("the translator built a config that does not match its hash; not published", "version", cfg.GetVersion(), "hash", cfg.GetHash(), "state", st.Hash())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cfg.GetEpoch() != s.epoch {
		return
	}
	s.state, s.full, s.history = st, cfg, nil
	s.latest = contract.RefOf(cfg)
	if s.marker == nil {
		s.marker = &configv1.InitialSyncComplete{Epoch: cfg.GetEpoch(), Version: cfg.GetVersion(),
			WatcherEpoch: cfg.GetWatcherEpoch(), WatcherRevision: cfg.GetWatcherRevision()}
		s.complete.Do(s.cfg.OnComplete)
	}
	s.cfg.Metrics.Published(cfg.GetVersion())
	s.signalLocked()
}

// PublishDelta makes the version d describes, onto the newest, the newest.
func (s *Server) PublishDelta(d *configv1.ConfigDelta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.GetEpoch() != s.epoch || s.state == nil {
		return
	}
	if d.GetBaseVersion() != s.latest.GetVersion() {
		s.log.Error("the translator built a delta onto another version; not published", "version", d.GetVersion(), "base", d.GetBaseVersion(), "newest", s.latest.GetVersion())
		return
	}
	applied, err := s.state.Apply(d)
	if err != nil {
		s.log.Error("the translator built a delta that does not apply onto its base; not published", "version", d.GetVersion(), "error", err)
		return
	}
	s.latest = contract.VersionOf(d)
	s.full = nil
	s.history = append(s.history, applied)
	if len(s.history) > maxHistory {
		s.history = append([]contract.Applied(nil), s.history[len(s.history)-maxHistory:]...)
	}
	s.cfg.Metrics.Published(d.GetVersion())
	s.signalLocked()
}

// fullLocked is the complete config of the newest version, built once per version.
func (s *Server) fullLocked() *configv1.Config {
	if s.full == nil {
		s.full = contract.RefOf(s.latest)
		s.full.Resources = s.state.Resources()
	}
	return s.full
}

// nextLocked is what brings a stream that was sent version from (0: nothing) to the newest:
// one delta, several merged into one, or the complete state.
func (s *Server) nextLocked(from uint64) *configv1.StreamConfigResponse {
	i := len(s.history)
	for i > 0 && s.history[i-1].Delta.GetBaseVersion() >= from {
		i--
	}
	if from == 0 || i == len(s.history) || s.history[i].Delta.GetBaseVersion() != from {
		return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: s.fullLocked()}}
	}
	if i == len(s.history)-1 {
		return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: s.history[i].Delta}}
	}
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: contract.Merge(s.history[i:])}}
}

func (s *Server) stopping() bool {
	select {
	case <-s.cfg.Stopping:
		return true
	default:
		return false
	}
}

var errStopping = status.Error(codes.Unavailable, "translator is shutting down")

// StreamConfig serves one pusher.
func (s *Server) StreamConfig(stream configv1.ConfigService_StreamConfigServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil || hello.GetPusherId() == "" {
		return status.Error(codes.InvalidArgument, "the first message must be a Hello with a pusher_id")
	}
	id := hello.GetPusherId()
	log := s.log.With("pusher", id)
	s.register(hello)
	defer s.unregister(id)
	log.Info("pusher connected", "data_plane", hello.GetDataPlane().String(), "version", hello.GetSoftwareVersion())

	readErr := make(chan error, 1)
	resync := make(chan struct{}, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				readErr <- err
				return
			}
			if r := req.GetResync(); r != nil {
				log.Warn("pusher asked for the complete state", "have", r.GetHave().GetVersion(), "reason", r.GetReason())
				select {
				case resync <- struct{}{}:
				default:
				}
				continue
			}
			if err := s.record(log, id, req); err != nil {
				readErr <- err
				return
			}
		}
	}()

	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	var sentEpoch string
	var sentVersion uint64 // 0: the stream holds nothing of sentEpoch
	for {
		if s.stopping() {
			return errStopping
		}
		var out []*configv1.StreamConfigResponse
		s.mu.Lock()
		epoch, marker, changed := s.epoch, s.marker, s.changed
		if marker != nil && marker.GetEpoch() == epoch && s.latest.GetEpoch() == epoch {
			if sentEpoch != epoch {
				out = append(out, &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_InitialSyncComplete{InitialSyncComplete: marker}})
				sentEpoch, sentVersion = epoch, 0
			}
			if s.latest.GetVersion() > sentVersion {
				out = append(out, s.nextLocked(sentVersion))
				sentVersion = s.latest.GetVersion()
			}
		}
		s.mu.Unlock()
		for _, m := range out {
			if err := stream.Send(m); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-resync:
			sentVersion = 0 // the complete state again
		case err := <-readErr:
			if status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-hb.C:
			if err := stream.Send(&configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Heartbeat{Heartbeat: &configv1.Heartbeat{Time: timestamppb.New(s.cfg.Now())}}}); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		case <-s.cfg.Stopping:
			return errStopping
		}
	}
}

func (s *Server) register(h *configv1.Hello) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pushers[h.GetPusherId()]
	if !ok {
		p = &pusher{status: &configv1.PusherStatus{PusherId: h.GetPusherId()}}
		s.pushers[h.GetPusherId()] = p
	}
	p.streams++
	p.status.Connected = true
	p.status.DataPlane = h.GetDataPlane()
	p.status.SoftwareVersion = h.GetSoftwareVersion()
	s.cfg.Metrics.SetPushers(s.connectedLocked())
}

func (s *Server) unregister(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pushers[id]
	p.streams--
	p.status.Connected = p.streams > 0
	s.cfg.Metrics.SetPushers(s.connectedLocked())
	s.log.Info("pusher disconnected", "pusher", id)
}

func (s *Server) connectedLocked() int {
	n := 0
	for _, p := range s.pushers {
		if p.status.Connected {
			n++
		}
	}
	return n
}

// record stores an ACK or NACK. A second Hello, or an empty message, is a protocol error.
func (s *Server) record(log hclog.Logger, id string, req *configv1.StreamConfigRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pushers[id]
	now := timestamppb.New(s.cfg.Now())
	switch m := req.GetMessage().(type) {
	case *configv1.StreamConfigRequest_Ack:
		ref := m.Ack.GetConfig()
		p.status.Applied, p.status.AppliedAt = ref, now
		if p.status.Rejected != nil && p.status.Rejected.GetVersion() <= ref.GetVersion() && p.status.Rejected.GetEpoch() == ref.GetEpoch() {
			p.status.Rejected, p.status.RejectedError, p.status.RejectedAt = nil, "", nil
		}
		s.cfg.Metrics.Ack(id, ref.GetVersion())
		log.Debug("config applied", "epoch", ref.GetEpoch(), "version", ref.GetVersion())
	case *configv1.StreamConfigRequest_Nack:
		ref := m.Nack.GetConfig()
		p.status.Rejected, p.status.RejectedError, p.status.RejectedAt = ref, m.Nack.GetError(), now
		s.cfg.Metrics.Nack(id)
		var objs []string
		for _, o := range m.Nack.GetObjectsAtFault() {
			objs = append(objs, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
		log.Warn("config rejected by the data plane; the previous config stays in place", "epoch", ref.GetEpoch(), "version", ref.GetVersion(),
			"error", m.Nack.GetError(), "objects", objs)
	default:
		return status.Errorf(codes.InvalidArgument, "unexpected %T after Hello", req.GetMessage())
	}
	return nil
}

// GetStatus returns the current config and the pushers' state.
func (s *Server) GetStatus(_ context.Context, req *configv1.GetStatusRequest) (*configv1.GetStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &configv1.GetStatusResponse{Synced: s.marker != nil && s.marker.GetEpoch() == s.epoch}
	if l := s.latest; l != nil {
		resp.Current = contract.RefOf(l)
		if req.GetIncludeResources() {
			// Published resources are never mutated, so they can be shared.
			resp.Current.Resources = s.fullLocked().GetResources()
		}
	}
	for _, p := range s.pushers {
		resp.Pushers = append(resp.Pushers, proto.Clone(p.status).(*configv1.PusherStatus))
	}
	sort.Slice(resp.Pushers, func(i, j int) bool { return resp.Pushers[i].PusherId < resp.Pushers[j].PusherId })
	return resp, nil
}

type nopMetrics struct{}

func (nopMetrics) SetPushers(int)     {}
func (nopMetrics) Ack(string, uint64) {}
func (nopMetrics) Nack(string)        {}
func (nopMetrics) Published(uint64)   {}
