// Package server implements sluice.watch.v1.WatchService: each stream gets a subscription
// from the controller and is framed into a snapshot (or a resume), the marker at its exact
// position, and the deltas. A slow client never blocks anyone: past its buffer it is dropped
// with RESOURCE_EXHAUSTED and reconnects for a fresh snapshot. A stopping watcher starts no
// snapshot and sends no marker.
package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
)

// Source hands out subscriptions; the watcher's controller is one.
type Source interface {
	Subscribe(ctx context.Context, req store.Request) (*store.Subscription, error)
	Unsubscribe(sub *store.Subscription)
}

// Metrics receives the server's measurements.
type Metrics interface {
	StreamOpened()
	StreamClosed()
	ClientDropped()
}

// Config configures a Server.
type Config struct {
	Logger hclog.Logger
	// Heartbeat is the interval of heartbeats on an idle stream.
	Heartbeat time.Duration
	// Stopping is closed when the process begins to shut down.
	Stopping <-chan struct{}
	Metrics  Metrics
	// SendTimeout bounds one send: a client that stops reading blocks the stream's sends
	// (gRPC flow control) before the store's buffer would drop it, and its stream ends after
	// this instead of holding a goroutine and a subscription forever.
	SendTimeout time.Duration

	// senderDone, when set (tests), is called when a stream's sender goroutine ends.
	senderDone func(client string)
	// streamDone, when set (tests), is called when a stream's handler is about to return.
	streamDone func(client string)
	// subscribing, when set (tests), is called between taking the current source and
	// subscribing to it: the window in which the source's epoch may retire.
	subscribing func(client string)
}

// Server is the WatchService.
type Server struct {
	watchv1.UnimplementedWatchServiceServer
	cfg Config
	log hclog.Logger

	mu sync.Mutex
	// cur is the source new streams subscribe to; nil while there is none (starting, or
	// between two epochs), when paused says why and idleSince since when.
	cur       *served
	paused    string
	idleSince time.Time
}

// served is one source and the streams it serves: a retired source's streams must all have
// ended before the next source serves anyone, so that nothing of an old epoch is sent after
// a new one started.
type served struct {
	src     Source
	streams sync.WaitGroup
}

// New returns a server that answers UNAVAILABLE until SetSource.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil || cfg.Stopping == nil {
		return nil, errors.New("server: Logger and Stopping are required")
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 30 * time.Second
	}
	return &Server{cfg: cfg, log: cfg.Logger, paused: "watcher is starting: kinds not yet resolved through discovery", idleSince: time.Now()}, nil
}

// Unserved says since when no source has served new streams, and why; the zero time while
// one does. The watcher's /healthz rule reads it.
func (s *Server) Unserved() (since time.Time, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return time.Time{}, ""
	}
	return s.idleSince, s.paused
}

// SetSource makes the server serve new streams from src. The watcher calls it once per
// epoch, after Pause ended the streams of the one before.
func (s *Server) SetSource(src Source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur, s.idleSince = &served{src: src}, time.Time{}
}

// Pause stops serving new streams from the current source: they are refused UNAVAILABLE
// with reason until the next SetSource. The returned channel is closed when every stream of
// the paused source has ended; those end when its subscriptions do (the watcher retires the
// epoch's store), or when their clients go away.
func (s *Server) Pause(reason string) <-chan struct{} {
	s.mu.Lock()
	old := s.cur
	if old != nil {
		s.idleSince = time.Now()
	}
	s.cur, s.paused = nil, reason
	s.mu.Unlock()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		if old != nil {
			old.streams.Wait()
		}
	}()
	return drained
}

// acquire returns the current source with one more stream counted, or why there is none.
func (s *Server) acquire() (*served, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, s.paused
	}
	s.cur.streams.Add(1)
	return s.cur, ""
}

var errStopping = status.Error(codes.Unavailable, "watcher is shutting down")

func (s *Server) stopping() bool {
	select {
	case <-s.cfg.Stopping:
		return true
	default:
		return false
	}
}

// Watch serves one stream.
func (s *Server) Watch(req *watchv1.WatchRequest, stream watchv1.WatchService_WatchServer) error {
	if s.stopping() {
		return errStopping
	}
	cur, why := s.acquire()
	if cur == nil {
		return status.Error(codes.Unavailable, why)
	}
	defer cur.streams.Done()
	if s.cfg.streamDone != nil {
		defer s.cfg.streamDone(req.GetClientName())
	}
	src := cur.src
	ctx := stream.Context()
	log := s.log.With("client", req.GetClientName())
	if s.cfg.subscribing != nil {
		s.cfg.subscribing(req.GetClientName())
	}
	// The source's epoch may have retired since it was taken: its Subscribe then answers at
	// once with why, and the client reconnects. Waiting here for the next epoch instead would
	// hold up the very drain (Pause) that lets the next epoch serve.
	sub, err := src.Subscribe(ctx, store.Request{Kinds: req.GetKinds(), ResumeEpoch: req.GetResumeEpoch(), ResumeRevision: req.GetResumeRevision()})
	switch {
	case err == nil:
	case errors.Is(err, store.ErrUnknownKind):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, store.ErrEpochEnded):
		log.Debug("stream refused: its epoch ended before it subscribed")
		return status.Errorf(codes.Unavailable, "%v; reconnect for the new epoch's snapshot", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case s.stopping():
		return errStopping
	default:
		return status.Errorf(codes.Unavailable, "watcher cannot serve this stream: %v; reconnect", err)
	}
	defer src.Unsubscribe(sub)
	s.cfg.Metrics.StreamOpened()
	defer s.cfg.Metrics.StreamClosed()
	log.Debug("stream opened", "epoch", sub.Epoch, "revision", sub.Revision, "resumed", sub.Resumed, "synced", sub.SyncedAtStart)

	// A caller with redacted access (the operator role) gets Secrets without private keys.
	redacted := identity.CallerFrom(ctx).Access == identity.Redacted
	// A client that stops reading blocks Send; its stream ends after SendTimeout.
	var done func()
	if s.cfg.senderDone != nil {
		done = func() { s.cfg.senderDone(req.GetClientName()) }
	}
	send, stopSender := grpcx.NewSender(grpcx.SenderConfig[*watchv1.WatchResponse]{Send: stream.Send,
		Timeout: s.cfg.SendTimeout, Stopping: s.cfg.Stopping, StoppingErr: errStopping, Done: done})
	defer stopSender()
	f := &framer{sub: sub}
	ended := func() error {
		switch err := sub.Err(); {
		case errors.Is(err, store.ErrSlowSubscriber):
			s.cfg.Metrics.ClientDropped()
			log.Warn("dropping a client that fell behind; it must reconnect", "revision", f.last)
			return status.Error(codes.ResourceExhausted, "client fell too far behind the watcher; reconnect for a fresh snapshot")
		case errors.Is(err, store.ErrEpochEnded):
			log.Debug("stream ended with its epoch", "epoch", sub.Epoch, "revision", f.last)
			return status.Errorf(codes.Unavailable, "epoch %s ended: %v; reconnect for the new epoch's snapshot", sub.Epoch, err)
		}
		return errStopping
	}
	// Nothing of a subscription the store ended is sent, not even the rest of its snapshot:
	// a retired epoch's stream ends within one send.
	emit := func(m *watchv1.WatchResponse) error {
		if s.stopping() {
			return errStopping
		}
		select {
		case <-sub.Done():
			return ended()
		default:
		}
		if redacted {
			var err error
			if m, err = redact(m); err != nil {
				log.Error("cannot redact an object for a read-only stream; ending it", "error", err)
				return status.Error(codes.Internal, err.Error())
			}
		}
		err := send(m)
		if errors.Is(err, grpcx.ErrSendTimeout) {
			s.cfg.Metrics.ClientDropped()
			log.Warn("dropping a client that stopped reading; it must reconnect", "revision", m.GetRevision(), "send_timeout", s.cfg.SendTimeout)
			return status.Errorf(codes.ResourceExhausted, "client stopped reading: a send did not complete within %s; reconnect", s.cfg.SendTimeout)
		}
		return err
	}
	if err := f.start(emit); err != nil {
		return err
	}
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-sub.Ready():
			for _, ev := range sub.Take() {
				// Changes still queued when the subscription ended are not sent: a retired
				// epoch sends nothing more.
				select {
				case <-sub.Done():
					return ended()
				default:
				}
				if err := f.event(ev, emit); err != nil {
					return err
				}
			}
		case <-sub.Done():
			return ended()
		case <-hb.C:
			if err := emit(f.heartbeat(f.marker)); err != nil {
				return err
			}
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.cfg.Stopping:
			return errStopping
		}
	}
}

// redact returns m with its object redacted (watchstream.Redact); m itself is shared with
// every other stream and is not changed.
func redact(m *watchv1.WatchResponse) (*watchv1.WatchResponse, error) {
	switch ev := m.GetEvent().(type) {
	case *watchv1.WatchResponse_Upsert:
		o, err := watchstream.Redact(ev.Upsert.GetObject())
		if err != nil || o == ev.Upsert.GetObject() {
			return m, err
		}
		return &watchv1.WatchResponse{Epoch: m.GetEpoch(), Revision: m.GetRevision(), Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: o}}}, nil
	case *watchv1.WatchResponse_Delete:
		o, err := watchstream.Redact(ev.Delete.GetObject())
		if err != nil || o == ev.Delete.GetObject() {
			return m, err
		}
		return &watchv1.WatchResponse{Epoch: m.GetEpoch(), Revision: m.GetRevision(), Event: &watchv1.WatchResponse_Delete{Delete: &watchv1.Delete{Object: o}}}, nil
	}
	return m, nil
}

type nopMetrics struct{}

func (nopMetrics) StreamOpened()  {}
func (nopMetrics) StreamClosed()  {}
func (nopMetrics) ClientDropped() {}
