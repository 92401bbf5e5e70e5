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
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Metrics receives the server's measurements.
type Metrics interface {
	SetPushers(n int)
	Ack(pusher string, version uint64)
	Nack(pusher string)
	Published(version uint64)
	// SlowPusherDropped counts a stream ended because its pusher stopped reading.
	SlowPusherDropped()
	// TooLarge counts a version not sent because one of its resources exceeds the message
	// limit.
	TooLarge()
	// Forget removes what is kept per pusher: it has been gone for ForgetAfter.
	Forget(pusher string)
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
	// SendTimeout bounds one send: a pusher that stops reading blocks its stream's sends
	// (gRPC flow control), and its stream ends after this instead of holding a goroutine
	// and the versions queued for it forever.
	SendTimeout time.Duration
	// MaxMessageSize is the largest message the gRPC server sends. A complete state larger
	// than it travels in chunks that fit, and a delta larger than it is replaced by the
	// complete state. A state holding one resource larger than it is not sent (gRPC would
	// fail the stream, and the pusher would reconnect into the same failure): the pusher
	// keeps what it applied until a version fits.
	MaxMessageSize int
	// ForgetAfter is how long a pusher without a stream stays in GetStatus and the metrics.
	ForgetAfter time.Duration
	// OnNack, when set, gets every NACK of a version the stream was sent (the engine
	// quarantines the objects it names); it must not block.
	OnNack func(*configv1.Nack)
	// OnAck, when set, is called at every ACK of a version the stream was sent: a data plane
	// runs it. It must not block.
	OnAck func()
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
	chain    contract.Chain // chain.Version (the newest, without resources) is kept across epochs
	full     *configv1.Config
	history  []contract.Applied // the deltas up to chain.Version, contiguous, oldest first
	changed  chan struct{}      // closed on every change
	pushers  map[string]*pusher
	complete sync.Once
	// tooLarge is the version last found with a resource over MaxMessageSize, so that it is
	// logged once.
	tooLarge *configv1.Config

	// senderDone, when set (tests), is called when a stream's sender goroutine ends.
	senderDone func(pusher string)
}

// maxHistory bounds the deltas kept for streams that fell behind; further behind, a stream
// gets the complete state.
const maxHistory = 128

type pusher struct {
	status  *configv1.PusherStatus
	streams int
	gone    time.Time // when streams fell to 0
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
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 30 * time.Second
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = grpcx.DefaultMaxMessageSize
	}
	if cfg.ForgetAfter <= 0 {
		cfg.ForgetAfter = 10 * time.Minute
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
	if s.chain.Version != nil && s.chain.Version.GetEpoch() == cfg.GetEpoch() && cfg.GetVersion() <= s.chain.Version.GetVersion() {
		// Versions only grow within an epoch: streams holding the newer one would be left
		// behind, and new streams would be given an older view.
		s.log.Error("the translator built a complete config not newer than the newest; not published", "version", cfg.GetVersion(), "newest", s.chain.Version.GetVersion())
		return
	}
	s.chain = contract.Chain{State: st, Version: contract.RefOf(cfg)}
	s.full, s.history = cfg, nil
	if s.marker == nil {
		s.marker = &configv1.InitialSyncComplete{Epoch: cfg.GetEpoch(), Version: cfg.GetVersion(),
			WatcherEpoch: cfg.GetWatcherEpoch(), WatcherRevision: cfg.GetWatcherRevision()}
		s.complete.Do(s.cfg.OnComplete)
	}
	s.cfg.Metrics.Published(cfg.GetVersion())
	s.sweepLocked()
	s.signalLocked()
}

// PublishDelta makes the version d describes, onto the newest, the newest. dg are the digests
// of d's upserts as the engine's state computed them: applying d does not serialise and hash
// them again, and still checks that d goes onto the newest version.
func (s *Server) PublishDelta(d *configv1.ConfigDelta, dg contract.Digests) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.GetEpoch() != s.epoch || s.chain.State == nil {
		return
	}
	// A new epoch begins with its complete state: a delta never crosses epochs, and goes onto
	// the newest version only (contract.Onto).
	applied, err := s.chain.DeltaDigests(d, dg)
	if err != nil {
		s.log.Error("the translator built a delta that does not apply onto the newest version; not published", "version", d.GetVersion(), "error", err)
		return
	}
	s.full = nil
	s.history = append(s.history, applied)
	if len(s.history) > maxHistory {
		s.history = append([]contract.Applied(nil), s.history[len(s.history)-maxHistory:]...)
	}
	s.cfg.Metrics.Published(d.GetVersion())
	s.sweepLocked()
	s.signalLocked()
}

// fullLocked is the complete config of the newest version, built once per version.
func (s *Server) fullLocked() *configv1.Config {
	if s.full == nil {
		s.full = contract.RefOf(s.chain.Version)
		s.full.Resources = s.chain.State.Resources()
	}
	return s.full
}

// nextLocked is what brings a stream that was sent version from (0: nothing) to the newest:
// one delta, several merged into one, or the complete state. A delta larger than one message
// is replaced by the complete state, which travels in chunks.
func (s *Server) nextLocked(from uint64) *configv1.StreamConfigResponse {
	m := s.changeLocked(from)
	if m.GetDelta() != nil && proto.Size(m) > s.cfg.MaxMessageSize {
		return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: s.fullLocked()}}
	}
	return m
}

func (s *Server) changeLocked(from uint64) *configv1.StreamConfigResponse {
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
	// A caller with redacted access (the operator role) follows the stream read-only: it is
	// not a pusher, its answers are refused, and it never receives a private key.
	// A client that declares it drives no data plane (sluicectl config --watch, a test's
	// follower) is a reader too, whatever its access: it applies nothing, so listing it as a
	// pusher would show one that never acknowledges, for ForgetAfter after it left.
	caller := identity.CallerFrom(stream.Context())
	var redactor *contract.Redactor
	readOnly := caller.Access == identity.Redacted || hello.GetDataPlane() == configv1.DataPlaneKind_DATA_PLANE_KIND_NONE
	switch {
	case caller.Access == identity.Redacted:
		redactor = &contract.Redactor{}
		log = s.log.With("reader", id, "caller", caller.Name)
		log.Info("read-only config stream opened (private keys removed)")
	case readOnly:
		log = s.log.With("reader", id)
		log.Info("read-only config stream opened (data plane NONE: not a pusher)")
	default:
		s.register(hello)
		defer s.unregister(id)
	}
	pr := &peer{} // what this stream was sent, to check its answers against
	defer s.endPeer(log, pr)
	if !readOnly {
		log.Info("pusher connected", "data_plane", hello.GetDataPlane().String(), "version", hello.GetSoftwareVersion())
	}

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
			if redactor != nil {
				readErr <- status.Errorf(codes.PermissionDenied, "%s follows the config stream read-only and may not acknowledge configs", caller.Name)
				return
			}
			if readOnly {
				readErr <- status.Errorf(codes.FailedPrecondition, "%s declared data plane NONE: a read-only follower may not acknowledge configs", id)
				return
			}
			if err := s.record(log, id, pr, req); err != nil {
				readErr <- err
				return
			}
		}
	}()

	// A pusher that stops reading blocks Send; its stream ends after SendTimeout.
	var done func()
	if s.senderDone != nil {
		done = func() { s.senderDone(id) }
	}
	sendAll, stopSender := grpcx.NewSender(grpcx.SenderConfig[[]*configv1.StreamConfigResponse]{
		Send: func(msgs []*configv1.StreamConfigResponse) error {
			for _, m := range msgs {
				if err := stream.Send(m); err != nil {
					return err
				}
			}
			return nil
		},
		Timeout: s.cfg.SendTimeout, Stopping: s.cfg.Stopping, StoppingErr: errStopping, Done: done})
	defer stopSender()
	send := func(msgs ...*configv1.StreamConfigResponse) error {
		err := sendAll(msgs)
		if errors.Is(err, grpcx.ErrSendTimeout) {
			s.cfg.Metrics.SlowPusherDropped()
			log.Warn("dropping a pusher that stopped reading; it must reconnect", "send_timeout", s.cfg.SendTimeout)
			return status.Errorf(codes.ResourceExhausted, "the pusher stopped reading: a send did not complete within %s; reconnect", s.cfg.SendTimeout)
		}
		return err
	}

	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	var sentEpoch string
	var sentVersion uint64 // 0: the stream holds nothing of sentEpoch
	for {
		if s.stopping() {
			return errStopping
		}
		var out []*configv1.StreamConfigResponse
		var next *configv1.StreamConfigResponse
		var nextVersion uint64
		s.mu.Lock()
		epoch, marker, changed := s.epoch, s.marker, s.changed
		if marker != nil && marker.GetEpoch() == epoch && s.chain.Version.GetEpoch() == epoch {
			if sentEpoch != epoch {
				out = append(out, &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_InitialSyncComplete{InitialSyncComplete: marker}})
				sentEpoch, sentVersion = epoch, 0
			}
			if s.chain.Version.GetVersion() > sentVersion {
				next, nextVersion = s.nextLocked(sentVersion), s.chain.Version.GetVersion()
			}
		}
		s.mu.Unlock()
		// A complete state goes whole when it fits one message (and one chunk, for a client
		// that takes chunks), else in chunks. When one resource alone is over the limit
		// nothing is sent and sentVersion stays: the pusher keeps what it applied, and the
		// next version is built from that.
		if next != nil {
			msgs, err := s.encode(redactor, next, hello.GetTakesChunks())
			var tl *contract.TooLargeError
			switch {
			case errors.As(err, &tl):
				s.refuseTooLarge(next.GetConfig(), tl)
			case err != nil:
				return status.Errorf(codes.Internal, "%v", err)
			default:
				out = append(out, msgs...)
				pr.sent(msgs[0])
				sentVersion = nextVersion
			}
		}
		if len(out) > 0 {
			if err := send(out...); err != nil {
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
			if err := send(&configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Heartbeat{Heartbeat: &configv1.Heartbeat{Time: timestamppb.New(s.cfg.Now())}}}); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		case <-s.cfg.Stopping:
			return errStopping
		}
	}
}

// redact rewrites a config or delta for a read-only stream.
func redact(r *contract.Redactor, m *configv1.StreamConfigResponse) (*configv1.StreamConfigResponse, error) {
	switch x := m.GetMessage().(type) {
	case *configv1.StreamConfigResponse_Config:
		c, err := r.Config(x.Config)
		return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: c}}, err
	case *configv1.StreamConfigResponse_Delta:
		d, err := r.Delta(x.Delta)
		return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: d}}, err
	}
	return m, nil
}

// encode returns the messages that carry next on a stream (redacted for a read-only one):
// a delta as it is (nextLocked made sure it fits), a complete state whole or in chunks that
// each fit the message limit (contract.Chunk; takesChunks from the client's Hello). A
// resource that alone exceeds the limit is a *contract.TooLargeError: the state cannot be
// sent. The redactor follows only what is sent.
func (s *Server) encode(r *contract.Redactor, next *configv1.StreamConfigResponse, takesChunks bool) ([]*configv1.StreamConfigResponse, error) {
	c := next.GetConfig()
	if c == nil {
		if r != nil {
			m, err := redact(r, next)
			return []*configv1.StreamConfigResponse{m}, err
		}
		return []*configv1.StreamConfigResponse{next}, nil
	}
	msgs, err := contract.Chunk(c, s.cfg.MaxMessageSize, takesChunks)
	if err != nil || r == nil {
		return msgs, err
	}
	rc, err := r.Config(c)
	if err != nil {
		return nil, err
	}
	return contract.Chunk(rc, s.cfg.MaxMessageSize, takesChunks) // no larger than c's: keys only shrink
}

// refuseTooLarge logs (once per version) and counts a complete state that cannot be sent
// because one of its resources alone exceeds the message limit: gRPC would fail the stream
// with it, and the pusher would reconnect into the same failure over and over. The objects
// it was built from are handed to OnNack as if a data plane had refused them: the engine
// leaves them out (a finding on each, until it changes) and the next version fits, so one
// oversized object never keeps a new pusher from its first config.
func (s *Server) refuseTooLarge(c *configv1.Config, e *contract.TooLargeError) {
	s.mu.Lock()
	if t := s.tooLarge; t != nil && t.GetEpoch() == c.GetEpoch() && t.GetVersion() == c.GetVersion() {
		s.mu.Unlock()
		return
	}
	s.tooLarge = contract.RefOf(c)
	s.mu.Unlock()
	s.cfg.Metrics.TooLarge()
	var objs []string
	for _, o := range e.Sources {
		objs = append(objs, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	s.log.Error("a resource larger than the message limit; the complete state is not sent and the objects it is built from are left out until they change (or raise --max-message-size of the translator and of the pushers above its size)",
		"epoch", c.GetEpoch(), "version", c.GetVersion(), "type", e.Type.String(), "key", e.Key, "objects", objs, "size", e.Size, "limit", s.cfg.MaxMessageSize)
	if s.cfg.OnNack != nil && len(e.Sources) > 0 {
		s.cfg.OnNack(&configv1.Nack{Config: &configv1.ConfigRef{Epoch: c.GetEpoch(), Version: c.GetVersion(), Hash: c.GetHash()}, ObjectsAtFault: e.Sources,
			Error: fmt.Sprintf("its %s %q is %d bytes, more than one config-stream message may carry (--max-message-size %d)", e.Type, e.Key, e.Size, e.Limit)})
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
	s.sweepLocked()
}

func (s *Server) unregister(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pushers[id]
	p.streams--
	p.status.Connected = p.streams > 0
	if p.streams == 0 {
		p.gone = s.cfg.Now()
	}
	s.cfg.Metrics.SetPushers(s.connectedLocked())
	s.log.Info("pusher disconnected", "pusher", id)
}

// sweepLocked forgets the pushers that have had no stream for ForgetAfter: their status and
// their metric series, which would otherwise grow with every pusher that ever connected
// (pods get new names). It runs on what already happens (a stream, a version, a status
// read), not on a timer of its own.
func (s *Server) sweepLocked() {
	now := s.cfg.Now()
	for id, p := range s.pushers {
		if p.streams == 0 && now.Sub(p.gone) >= s.cfg.ForgetAfter {
			delete(s.pushers, id)
			s.cfg.Metrics.Forget(id)
			s.log.Info("forgetting a pusher that has been gone a while", "pusher", id, "gone_since", p.gone, "applied", p.status.GetApplied().GetVersion())
		}
	}
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

// record stores an ACK or NACK. A second Hello, an empty message, or an answer about a
// version the stream was never sent (pr) is a protocol error, and changes nothing. NACKs are
// all recorded, but logged at most once per nackLogEvery per stream.
func (s *Server) record(log hclog.Logger, id string, pr *peer, req *configv1.StreamConfigRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pushers[id]
	if p == nil {
		return nil // forgotten: an answer read after its stream ended, long ago
	}
	now := timestamppb.New(s.cfg.Now())
	switch m := req.GetMessage().(type) {
	case *configv1.StreamConfigRequest_Ack:
		ref := m.Ack.GetConfig()
		if err := pr.check("ACK", ref); err != nil {
			log.Error("pusher answered about a version it was never sent; ending its stream", "error", err)
			return err
		}
		p.status.Applied, p.status.AppliedAt = ref, now
		if p.status.Rejected != nil && p.status.Rejected.GetVersion() <= ref.GetVersion() && p.status.Rejected.GetEpoch() == ref.GetEpoch() {
			p.status.Rejected, p.status.RejectedError, p.status.RejectedAt = nil, "", nil
		}
		s.cfg.Metrics.Ack(id, ref.GetVersion())
		log.Debug("config applied", "epoch", ref.GetEpoch(), "version", ref.GetVersion())
		if s.cfg.OnAck != nil {
			s.cfg.OnAck()
		}
	case *configv1.StreamConfigRequest_Nack:
		ref := m.Nack.GetConfig()
		if err := pr.check("NACK", ref); err != nil {
			log.Error("pusher answered about a version it was never sent; ending its stream", "error", err)
			return err
		}
		p.status.Rejected, p.status.RejectedError, p.status.RejectedAt = ref, m.Nack.GetError(), now
		s.cfg.Metrics.Nack(id)
		if s.cfg.OnNack != nil {
			s.cfg.OnNack(m.Nack)
		}
		logIt, notLogged := pr.nackLogged(s.cfg.Now())
		if !logIt {
			return nil
		}
		var objs []string
		for _, o := range m.Nack.GetObjectsAtFault() {
			objs = append(objs, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
		log.Warn("config rejected by the data plane; the previous config stays in place", "epoch", ref.GetEpoch(), "version", ref.GetVersion(),
			"error", m.Nack.GetError(), "objects", objs, "nacks_not_logged_before", notLogged)
	default:
		err := status.Errorf(codes.InvalidArgument, "unexpected %T after Hello", req.GetMessage())
		log.Error("pusher broke the protocol; ending its stream", "error", err)
		return err
	}
	return nil
}

// GetStatus returns the current config and the pushers' state.
func (s *Server) GetStatus(_ context.Context, req *configv1.GetStatusRequest) (*configv1.GetStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	resp := &configv1.GetStatusResponse{Synced: s.marker != nil && s.marker.GetEpoch() == s.epoch}
	if l := s.chain.Version; l != nil {
		resp.Current = contract.RefOf(l)
		if req.GetIncludeResources() {
			// Never a private key, to anyone: the status is for reading, not for serving.
			resp.Current.Resources = contract.RedactResources(s.fullLocked().GetResources())
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
func (nopMetrics) SlowPusherDropped() {}
func (nopMetrics) TooLarge()          {}
func (nopMetrics) Forget(string)      {}
