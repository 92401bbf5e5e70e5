package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// relayedKey marks a stream a replica relays, so that the receiver never relays it again.
const relayedKey = "x-sluice-relayed"

// relayedForKey names, on a relayed stream, the identity of the translator whose stream it
// is. The leader believes it only from a caller whose own identity is a watcher's.
const relayedForKey = "x-sluice-relayed-for"

// Origin is who a report is from, as the Service established it.
type Origin struct {
	// Source is the caller's identity when Checked; the report's source is set to it (the
	// Writer keys reports by their source).
	Source string
	// Class, when Checked, is the IngressClass the reporter's identity serves: the Writer
	// acts on its reports only for Ingresses of that class.
	Class   string
	Checked bool
}

// Leadership tells who leads; Elector and Static are ones.
type Leadership interface {
	Leader() (Leader, <-chan struct{})
}

// Reporter takes reports; Writer is one.
type Reporter interface {
	Report(from Origin, req *watchv1.ReportStatusRequest)
}

// ServiceConfig configures a Service.
type ServiceConfig struct {
	Logger hclog.Logger
	// Dial connects to a peer replica (the leader) to relay to.
	Dial func(address string) (grpc.ClientConnInterface, error)
	// Stopping ends every stream when the process shuts down.
	Stopping <-chan struct{}
}

// Service is the StatusService: on the leader it hands reports to the Writer, on any other
// replica it relays the stream to the leader. Both end the stream with UNAVAILABLE when the
// leader changes, so that translators report in full to whoever leads now.
type Service struct {
	watchv1.UnimplementedStatusServiceServer
	cfg ServiceConfig
	log hclog.Logger

	mu       sync.Mutex
	lead     Leadership
	reporter Reporter
}

// NewService returns the service; it refuses streams until SetLeadership.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Logger == nil || cfg.Dial == nil || cfg.Stopping == nil {
		return nil, errors.New("status: service needs Logger, Dial and Stopping")
	}
	return &Service{cfg: cfg, log: cfg.Logger}, nil
}

// SetLeadership makes the service answer: reports go to r while l says this replica leads.
func (s *Service) SetLeadership(l Leadership, r Reporter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lead, s.reporter = l, r
}

// ReportStatus implements watchv1.StatusServiceServer.
func (s *Service) ReportStatus(stream grpc.BidiStreamingServer[watchv1.ReportStatusRequest, watchv1.ReportStatusResponse]) error {
	s.mu.Lock()
	lead, rep := s.lead, s.reporter
	s.mu.Unlock()
	if lead == nil {
		return status.Error(codes.Unavailable, "this watcher does not write statuses yet (initial sync not complete, or status writing off)")
	}
	md, _ := metadata.FromIncomingContext(stream.Context())
	from, err := originOf(stream.Context(), md)
	if err != nil {
		s.log.Warn("status stream refused", "error", err)
		return status.Error(codes.PermissionDenied, err.Error())
	}
	l, changed := lead.Leader()
	switch {
	case l.Self:
		return s.local(stream, rep, from, l, changed)
	case len(md.Get(relayedKey)) > 0:
		return status.Errorf(codes.Unavailable, "not the leader (leader: %q); a relayed stream is not relayed again", l.Identity)
	case l.Address == "":
		return status.Error(codes.Unavailable, "no leader elected yet")
	default:
		return s.relay(stream, from, l, changed)
	}
}

// originOf establishes who reports: a translator by its own identity; a watcher replica
// relaying by the identity it relays for; anyone when authorization is off (no mTLS).
func originOf(ctx context.Context, md metadata.MD) (Origin, error) {
	c := identity.CallerFrom(ctx)
	switch {
	case c.Anonymous:
		return Origin{}, nil
	case c.Identity.Role == identity.Translator:
		return Origin{Source: c.Identity.URI(), Class: c.Identity.Class, Checked: true}, nil
	case c.Identity.Role == identity.Watcher:
		v := md.Get(relayedForKey)
		if len(v) != 1 {
			return Origin{}, fmt.Errorf("%s relays a status stream without naming the one translator it relays for", c.Name)
		}
		id, err := identity.Parse(v[0], c.Identity.TrustDomain)
		if err != nil || id.Role != identity.Translator {
			return Origin{}, fmt.Errorf("%s relays a status stream for %q, which is not a translator's identity", c.Name, v[0])
		}
		return Origin{Source: id.URI(), Class: id.Class, Checked: true}, nil
	}
	return Origin{}, fmt.Errorf("%s may not report statuses", c.Name)
}

func (s *Service) local(stream grpc.BidiStreamingServer[watchv1.ReportStatusRequest, watchv1.ReportStatusResponse], rep Reporter, from Origin, l Leader, changed <-chan struct{}) error {
	if err := stream.Send(&watchv1.ReportStatusResponse{Leader: l.Identity}); err != nil {
		return err
	}
	msgs := grpcx.Pump[watchv1.ReportStatusRequest](stream.Context(), stream.Recv, 16)
	first := true // a stream's first report must be full
	for {
		select {
		case <-changed:
			return status.Error(codes.Unavailable, "leadership changed; report again")
		case <-s.cfg.Stopping:
			return status.Error(codes.Unavailable, "watcher shutting down")
		case m := <-msgs:
			if m.Err != nil {
				if errors.Is(m.Err, io.EOF) {
					return nil
				}
				return m.Err
			}
			if from.Checked {
				// The source is who the caller is, not what it says.
				m.Msg.Source = from.Source
			}
			if m.Msg.GetSource() == "" {
				return status.Error(codes.InvalidArgument, "report without a source")
			}
			req, err := upgradeReport(m.Msg)
			if err == nil {
				err = checkReport(req, first)
			}
			if err != nil {
				s.log.Warn("status report refused; ending the stream", "source", m.Msg.GetSource(), "error", err)
				return err
			}
			first = false
			rep.Report(from, req)
		}
	}
}

func (s *Service) relay(stream grpc.BidiStreamingServer[watchv1.ReportStatusRequest, watchv1.ReportStatusResponse], from Origin, l Leader, changed <-chan struct{}) error {
	conn, err := s.cfg.Dial(l.Address)
	if err != nil {
		return status.Errorf(codes.Unavailable, "relay to leader %s: %v", l.Identity, err)
	}
	kv := []string{relayedKey, "1"}
	if from.Checked {
		kv = append(kv, relayedForKey, from.Source)
	}
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(stream.Context(), kv...))
	defer cancel()
	up, err := watchv1.NewStatusServiceClient(conn).ReportStatus(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "relay to leader %s: %v", l.Identity, err)
	}
	s.log.Debug("relaying a status stream to the leader", "leader", l.Identity)
	down := grpcx.Pump[watchv1.ReportStatusRequest](ctx, stream.Recv, 16)
	upMsgs := grpcx.Pump[watchv1.ReportStatusResponse](ctx, up.Recv, 4)
	for {
		select {
		case <-changed:
			return status.Error(codes.Unavailable, "leadership changed; report again")
		case <-s.cfg.Stopping:
			return status.Error(codes.Unavailable, "watcher shutting down")
		case m := <-down:
			if m.Err != nil {
				if errors.Is(m.Err, io.EOF) {
					_ = up.CloseSend()
					return nil
				}
				return m.Err
			}
			if err := up.Send(m.Msg); err != nil && !errors.Is(err, io.EOF) {
				return status.Errorf(codes.Unavailable, "relay to leader %s: %v", l.Identity, err)
			}
			// io.EOF: the leader ended the stream; its reason arrives on upMsgs.
		case m := <-upMsgs:
			if m.Err != nil {
				return status.Errorf(codes.Unavailable, "leader %s ended the relayed stream: %v", l.Identity, m.Err)
			}
			m.Msg.Relayed = true
			if err := stream.Send(m.Msg); err != nil {
				return err
			}
		}
	}
}
