// Package configserver implements sluice.config.v1.ConfigService. It holds the newest config
// of the current epoch and, once the epoch is complete, its marker; every stream gets the
// marker first and then the newest config whenever it changes, so a slow pusher skips
// intermediate versions and never holds back the others. It records what each pusher
// acknowledged or rejected.
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

	mu       sync.Mutex
	epoch    string
	marker   *configv1.InitialSyncComplete // of the current epoch, nil until complete
	latest   *configv1.Config              // newest published (may be of an older epoch)
	changed  chan struct{}                 // closed on every change
	pushers  map[string]*pusher
	complete sync.Once
}

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

// Publish makes cfg the newest config; first marks the epoch complete from cfg's version on.
func (s *Server) Publish(cfg *configv1.Config, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cfg.GetEpoch() != s.epoch {
		return
	}
	s.latest = cfg
	if first && s.marker == nil {
		s.marker = &configv1.InitialSyncComplete{Epoch: cfg.GetEpoch(), Version: cfg.GetVersion(),
			WatcherEpoch: cfg.GetWatcherEpoch(), WatcherRevision: cfg.GetWatcherRevision()}
		s.complete.Do(s.cfg.OnComplete)
	}
	s.cfg.Metrics.Published(cfg.GetVersion())
	s.signalLocked()
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
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				readErr <- err
				return
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
	var sentVersion uint64
	for {
		if s.stopping() {
			return errStopping
		}
		s.mu.Lock()
		epoch, marker, latest, changed := s.epoch, s.marker, s.latest, s.changed
		s.mu.Unlock()
		if marker != nil && marker.GetEpoch() == epoch {
			if sentEpoch != epoch {
				if err := stream.Send(&configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_InitialSyncComplete{InitialSyncComplete: marker}}); err != nil {
					return err
				}
				sentEpoch, sentVersion = epoch, 0
			}
			if latest.GetEpoch() == epoch && latest.GetVersion() > sentVersion {
				if err := stream.Send(&configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: latest}}); err != nil {
					return err
				}
				sentVersion = latest.GetVersion()
			}
		}
		select {
		case <-changed:
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
		// Published configs are never mutated, so the resources can be shared.
		resp.Current = &configv1.Config{Epoch: l.GetEpoch(), Version: l.GetVersion(), Hash: l.GetHash(),
			WatcherEpoch: l.GetWatcherEpoch(), WatcherRevision: l.GetWatcherRevision()}
		if req.GetIncludeResources() {
			resp.Current.Resources = l.GetResources()
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
