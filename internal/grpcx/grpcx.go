// Package grpcx builds the gRPC servers and client connections of the three processes with
// the same policy: health and reflection services, keepalive, message size limits, caps on
// concurrent streams (per connection, and per method and role of the caller), a bound on a
// connection's age (so that a revoked certificate is not served for long), TLS or mutual TLS
// from certificate files that are re-read when they rotate, authorization of every call by
// the caller's identity (internal/identity), and no plaintext off loopback unless asked for.
package grpcx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/stats"

	"github.com/sluice-io/sluice/internal/identity"
)

// DefaultMaxMessageSize bounds one gRPC message. A config of 10k routes is a few MiB; the
// limit leaves room for that and refuses runaway messages.
const DefaultMaxMessageSize = 64 << 20

// DefaultMaxConnectionAge bounds how long a server keeps one connection: then it sends a
// GOAWAY and the client reconnects with a fresh TLS handshake, so that a certificate that was
// rotated out, or whose CA was dropped from the bundle, stops being served within the bound.
// gRPC adds up to 10% of jitter either way, so that clients do not reconnect in step.
const DefaultMaxConnectionAge = time.Hour

// DefaultMaxConnectionAgeGrace is how long streams still open on a connection past its age
// may go on; then the connection is closed and they end with UNAVAILABLE. Sluice's streams
// (Watch, StreamConfig, ReportStatus) never end on their own, so each is cut here and its
// client resumes it on a new connection.
const DefaultMaxConnectionAgeGrace = time.Minute

// DefaultMaxConcurrentStreams bounds the concurrent streams of one connection (HTTP/2's
// SETTINGS_MAX_CONCURRENT_STREAMS): a client past it waits for one of its streams to end. A
// process opens a handful per peer; a watcher replica relaying translators' status streams
// to the leader opens one per translator on one connection.
const DefaultMaxConcurrentStreams = 100

// ServerConfig configures NewServer.
type ServerConfig struct {
	Logger hclog.Logger
	TLS    TLSFiles
	// MaxMessageSize bounds received and sent messages; 0 means DefaultMaxMessageSize.
	MaxMessageSize int
	// Address is only used to warn about plaintext on a non-loopback address.
	Address string
	// CountSent, when set, is told the size of every message the server sends, with the
	// RPC's full method name. gRPC reports the size it serialized anyway, so counting costs
	// nothing on the send path.
	CountSent func(method string, bytes int)
	// Insecure allows serving off loopback without mutual TLS (then every caller may do
	// everything); without it such a server refuses to start.
	Insecure bool
	// Policy authorizes every call by the caller's identity when TLS is mutual; nil means
	// identity.DefaultPolicy.
	Policy identity.Policy
	// OnDenied counts a denied call (method, role).
	OnDenied func(method, role string)
	// StreamLimits caps the concurrent streams of a method (full method name) per role of the
	// caller; a stream over its role's cap gets RESOURCE_EXHAUSTED. Health.Watch has
	// HealthWatchStreams per role unless this names it.
	StreamLimits map[string]StreamLimit
	// OnLimited counts a stream refused by StreamLimits (method, role).
	OnLimited func(method, role string)
	// MaxConnectionAge bounds a connection's age (then GOAWAY), and MaxConnectionAgeGrace
	// how long its open streams may go on after; 0 means DefaultMaxConnectionAge and
	// DefaultMaxConnectionAgeGrace.
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
	// MaxConcurrentStreams bounds the concurrent streams of one connection; 0 means
	// DefaultMaxConcurrentStreams.
	MaxConcurrentStreams int
	// Metrics, when set, receives the server's RPC metrics (grpc_server_*).
	Metrics prometheus.Registerer
}

// Server is a gRPC server with its health service.
type Server struct {
	*grpc.Server
	Health  *health.Server
	metrics *grpcprom.ServerMetrics
}

// NewServer returns a server with health and reflection registered. Services are registered
// by the caller; the health status of "" is SERVING until Shutdown.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Logger == nil {
		return nil, errors.New("grpcx: ServerConfig.Logger is required")
	}
	size := cfg.MaxMessageSize
	if size == 0 {
		size = DefaultMaxMessageSize
	}
	age, grace, streams := cfg.MaxConnectionAge, cfg.MaxConnectionAgeGrace, cfg.MaxConcurrentStreams
	if age == 0 {
		age = DefaultMaxConnectionAge
	}
	if grace == 0 {
		grace = DefaultMaxConnectionAgeGrace
	}
	if streams == 0 {
		streams = DefaultMaxConcurrentStreams
	}
	if age < 0 || grace < 0 || streams < 0 {
		return nil, fmt.Errorf("grpcx: negative connection bound (age %s, grace %s, streams %d)", age, grace, streams)
	}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.MaxRecvMsgSize(size),
		grpc.MaxSendMsgSize(size),
		grpc.MaxConcurrentStreams(uint32(streams)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second,
			MaxConnectionAge: age, MaxConnectionAgeGrace: grace}),
		// Clients ping every 20s at most; a client that pings more often is misbehaving.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if cfg.TLS.Logger == nil {
		cfg.TLS.Logger = cfg.Logger.Named("tls")
	}
	tlsCfg, err := cfg.TLS.ServerConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	if cfg.Address != "" && Exposed(cfg.TLS, cfg.Address) {
		if !cfg.Insecure {
			return nil, fmt.Errorf("%w: %s: %s", ErrInsecure, cfg.Address, RefusedServing)
		}
		cfg.Logger.Warn("insecure: grpc server off loopback without mutual TLS; every caller may do everything, including read private keys", "address", cfg.Address)
	}
	if cfg.Policy == nil {
		cfg.Policy = identity.DefaultPolicy()
	}
	guard, err := identity.NewGuard(identity.GuardConfig{Logger: cfg.Logger.Named("authz"), TrustDomain: cfg.TLS.TrustDomain,
		Policy: cfg.Policy, Authenticated: cfg.TLS.Mutual(), OnDenied: cfg.OnDenied})
	if err != nil {
		return nil, err
	}
	limits := map[string]StreamLimit{identity.HealthWatch: {Default: HealthWatchStreams}}
	for m, l := range cfg.StreamLimits {
		limits[m] = l
	}
	lim := newLimiter(limits, cfg.OnLimited)
	unary := []grpc.UnaryServerInterceptor{versionUnary, guard.Unary()}
	stream := []grpc.StreamServerInterceptor{versionStream, guard.Stream(), lim.stream}
	var metrics *grpcprom.ServerMetrics
	if cfg.Metrics != nil {
		if metrics, err = serverMetrics(cfg.Metrics); err != nil {
			return nil, err
		}
		// First, so that a call the guard or the limiter refuses is counted with its code.
		unary = append([]grpc.UnaryServerInterceptor{metrics.UnaryServerInterceptor()}, unary...)
		stream = append([]grpc.StreamServerInterceptor{metrics.StreamServerInterceptor()}, stream...)
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
	if cfg.CountSent != nil {
		opts = append(opts, grpc.StatsHandler(sentCounter(cfg.CountSent)))
	}
	s := grpc.NewServer(opts...)
	h := health.NewServer()
	healthpb.RegisterHealthServer(s, h)
	reflection.Register(s)
	return &Server{Server: s, Health: h, metrics: metrics}, nil
}

// Serve listens on addr and serves until ctx is done, then stops gracefully (bounded by
// grace, after which open streams are cut).
func (s *Server) Serve(ctx context.Context, lis net.Listener, grace time.Duration) error {
	if s.metrics != nil {
		// Every service is registered by now: each method's series exist from the start, at 0.
		s.metrics.InitializeMetrics(s.Server)
	}
	// Health answers for each service by name too (grpc_health_probe -service, sluicectl
	// health --service): SERVING while the server serves, NOT_SERVING from Shutdown on. A
	// name the server does not serve stays NOT_FOUND.
	for name := range s.Server.GetServiceInfo() {
		s.Health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Server.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.Stop()
	}
	return nil
}

// ClientConfig configures Dial.
type ClientConfig struct {
	Logger         hclog.Logger
	TLS            TLSFiles
	MaxMessageSize int
	// Insecure allows connecting off loopback without mutual TLS; without it Dial refuses.
	Insecure bool
	// Metrics, when set, receives the connection's RPC metrics (grpc_client_*).
	Metrics prometheus.Registerer
}

// ErrInsecure is a connection or server that would run off loopback without mutual TLS.
var ErrInsecure = errors.New("refusing plaintext off loopback")

// Why plaintext off loopback is refused, serving and dialling; the processes say the same
// from their settings, before anything starts.
const (
	RefusedServing  = "serving gRPC off loopback without mutual TLS would let anyone who reaches it read every TLS key; set --tls-cert, --tls-key and --tls-ca, or --insecure to allow it"
	RefusedDialling = "connecting off loopback without mutual TLS (a CA to verify the server, a certificate to present); set --tls-cert, --tls-key and --tls-ca, or --insecure to allow it"
)

// Exposed reports whether serving or dialling addr with t would be plaintext (or
// unauthenticated) off loopback.
func Exposed(t TLSFiles, addr string) bool { return !t.Mutual() && !IsLoopback(addr) }

// Dial returns a client connection to target ("host:port", or a comma-separated list of
// them: replicas, tried in order, the connection moving to the next when one fails). It does
// not block: the connection is made on first use and re-made after failures.
func Dial(target string, cfg ClientConfig) (*grpc.ClientConn, error) {
	size := cfg.MaxMessageSize
	if size == 0 {
		size = DefaultMaxMessageSize
	}
	if cfg.TLS.Logger == nil && cfg.Logger != nil {
		cfg.TLS.Logger = cfg.Logger.Named("tls")
	}
	tlsCfg, err := cfg.TLS.ClientConfig()
	if err != nil {
		return nil, err
	}
	addrs := strings.Split(target, ",")
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	for _, a := range addrs {
		if !Exposed(cfg.TLS, a) {
			continue
		}
		if !cfg.Insecure {
			return nil, fmt.Errorf("%w: %s: %s", ErrInsecure, a, RefusedDialling)
		}
		if cfg.Logger != nil {
			cfg.Logger.Warn("insecure: grpc connection off loopback without mutual TLS", "target", a)
		}
	}
	var extra []grpc.DialOption
	if cfg.Metrics != nil {
		m, err := clientMetrics(cfg.Metrics)
		if err != nil {
			return nil, err
		}
		extra = append(extra, grpc.WithChainUnaryInterceptor(m.UnaryClientInterceptor()), grpc.WithChainStreamInterceptor(m.StreamClientInterceptor()))
	}
	if len(addrs) > 1 {
		// A fixed list of replicas: pick_first (the default) uses them in order and moves on
		// when the connected one fails.
		r := manual.NewBuilderWithScheme("sluice-replicas")
		state := resolver.State{}
		for _, a := range addrs {
			// Each replica's certificate is checked against its own host (unless the TLS
			// settings name one server for all), not against the joined list.
			host, _, _ := net.SplitHostPort(a)
			state.Endpoints = append(state.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a, ServerName: host}}})
		}
		r.InitialState(state)
		extra = append(extra, grpc.WithResolvers(r))
		target = r.Scheme() + ":///" + strings.Join(addrs, ",")
	}
	return grpc.NewClient(target, append(extra,
		grpc.WithTransportCredentials(creds),
		// grpc-go's default reconnect backoff starts at one second; the components start
		// together and their peers come up within milliseconds, and the streams wait for the
		// connection (docs/design.md, "Reconnects"), so retry sooner: a refused connection
		// costs nothing, and the delays reach a second within ten tries.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec), grpc.MaxCallRecvMsgSize(size), grpc.MaxCallSendMsgSize(size)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	)...)
}

// IsLoopback reports whether a host:port address is on a loopback interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Received is one result of a stream's Recv.
type Received[T any] struct {
	Msg *T
	Err error
}

// Pump receives from a stream in its own goroutine and hands each message (and finally the
// error that ended the stream) to the returned channel, so that the goroutine owning the
// state can select on it beside its timers. It stops when ctx ends.
func Pump[T any](ctx context.Context, recv func() (*T, error), buffer int) <-chan Received[T] {
	out := make(chan Received[T], buffer)
	go func() {
		for {
			m, err := recv()
			select {
			case out <- Received[T]{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// sentCounter is a stats.Handler that reports each outgoing message's size with its method.
type sentCounter func(method string, bytes int)

type methodKey struct{}

func (c sentCounter) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (c sentCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if out, ok := s.(*stats.OutPayload); ok {
		method, _ := ctx.Value(methodKey{}).(string)
		c(method, out.Length)
	}
}

func (c sentCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c sentCounter) HandleConn(context.Context, stats.ConnStats)                       {}
