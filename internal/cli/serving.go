package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/ops"
	"github.com/sluice-io/sluice/internal/run"
)

// ServingConfig configures the two endpoints every process has: gRPC on Listen and the
// operational HTTP endpoint on HTTPListen.
type ServingConfig struct {
	Logger     hclog.Logger
	Listen     string
	HTTPListen string
	TLS        grpcx.TLSFiles
	// Insecure allows serving off loopback without mutual TLS.
	Insecure bool
	// CountSent counts the bytes the gRPC server sends (see grpcx.ServerConfig).
	CountSent func(method string, bytes int)
	// StreamLimits caps concurrent streams per method and role (see grpcx.ServerConfig).
	StreamLimits map[string]grpcx.StreamLimit
	// Bounds bound the gRPC server's connections (see ConnectionBounds).
	Bounds ConnectionBounds
	// Pprof, when set, is a loopback address to serve /debug/pprof on.
	Pprof string
	// MaxMessageSize bounds one gRPC message each way; 0 means grpcx.DefaultMaxMessageSize.
	MaxMessageSize int
	// ColdStartEndsLater: the process's cold start ends when its wiring calls
	// Serving.ColdStartOver (or ColdStartBound after its first readiness), not at that
	// readiness.
	ColdStartEndsLater bool
}

// Serving holds a process's gRPC server, operational endpoint and metrics registry. Services
// are registered on GRPC before the group runs.
type Serving struct {
	GRPC     *grpcx.Server
	Ops      *ops.Server
	Registry *prometheus.Registry

	grpcLis, httpLis, pprofLis net.Listener
	coldStart                  *coldStartEnd
}

// ColdStartOver ends the process's cold start (for ServingConfig.ColdStartEndsLater); it
// returns at once, and only its first call does anything.
func (s *Serving) ColdStartOver() { s.coldStart.end() }

// NewServing opens both listeners; a failure names the setting.
func NewServing(cfg ServingConfig) (*Serving, error) {
	if cfg.Logger == nil {
		return nil, errors.New("cli: ServingConfig.Logger is required")
	}
	reg := ops.NewRegistry()
	cold := &coldStartEnd{later: cfg.ColdStartEndsLater, after: func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		// On a goroutine of its own: the callers are on hot paths (the first config going
		// out, a pusher's ACK).
		settle: func() { go settleMemory(cfg.Logger, os.LookupEnv) }}
	opsSrv, err := ops.New(ops.Config{Logger: cfg.Logger.Named("ops"), Registry: reg, OnFirstReady: cold.firstReady})
	if err != nil {
		return nil, err
	}
	denied := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_grpc_denied_total",
		Help: "gRPC calls refused by authorization, by method and the caller's role (none: a certificate without a Sluice identity)."},
		[]string{"method", "role"})
	limited := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_grpc_streams_limited_total",
		Help: "gRPC streams refused (RESOURCE_EXHAUSTED) because the caller's role already held its cap of concurrent streams of the method, by method and role (anonymous: callers without mutual TLS)."},
		[]string{"method", "role"})
	reg.MustRegister(denied, limited)
	g, err := grpcx.NewServer(grpcx.ServerConfig{Logger: cfg.Logger.Named("grpc-server"), TLS: cfg.TLS, Address: cfg.Listen, CountSent: cfg.CountSent,
		Insecure: cfg.Insecure, StreamLimits: cfg.StreamLimits, MaxMessageSize: cfg.MaxMessageSize, Metrics: reg,
		MaxConnectionAge: cfg.Bounds.MaxConnectionAge, MaxConnectionAgeGrace: cfg.Bounds.MaxConnectionAgeGrace,
		MaxConcurrentStreams: cfg.Bounds.MaxStreamsPerConnection,
		OnDenied:             func(method, role string) { denied.WithLabelValues(method, role).Inc() },
		OnLimited:            func(method, role string) { limited.WithLabelValues(method, role).Inc() }})
	if err != nil {
		if errors.Is(err, grpcx.ErrInsecure) {
			return nil, &config.Error{Setting: "listen", Value: cfg.Listen, Cause: err}
		}
		return nil, err
	}
	if cfg.TLS.Mutual() {
		cfg.Logger.Info("authorization on: every call is checked against the caller's identity", "trust_domain", cfg.TLS.TrustDomain)
	} else {
		cfg.Logger.Warn("authorization off: no client CA, so callers cannot be told apart", "listen", cfg.Listen)
	}
	var pprofLis net.Listener
	if cfg.Pprof != "" {
		if pprofLis, err = Listen("pprof", cfg.Pprof); err != nil {
			return nil, err
		}
	}
	httpLis, err := Listen("http-listen", cfg.HTTPListen)
	if err != nil {
		closeAll(pprofLis)
		return nil, err
	}
	grpcLis, err := Listen("listen", cfg.Listen)
	if err != nil {
		closeAll(httpLis, pprofLis)
		return nil, err
	}
	cfg.Logger.Info("serving", "grpc", grpcLis.Addr().String(), "http", httpLis.Addr().String())
	if pprofLis != nil {
		cfg.Logger.Info("serving pprof", "address", pprofLis.Addr().String())
	}
	return &Serving{GRPC: g, Ops: opsSrv, Registry: reg, grpcLis: grpcLis, httpLis: httpLis, pprofLis: pprofLis, coldStart: cold}, nil
}

func closeAll(ls ...net.Listener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}

// Add adds both servers to g.
func (s *Serving) Add(g *run.Group) {
	g.Add("http", func(ctx context.Context) error { return s.Ops.Serve(ctx, s.httpLis) })
	g.Add("grpc", func(ctx context.Context) error { return s.GRPC.Serve(ctx, s.grpcLis, 5*time.Second) })
	if s.pprofLis != nil {
		g.Add("pprof", func(ctx context.Context) error { return ops.ServePprof(ctx, s.pprofLis) })
	}
}

// RegisterMaxMessageSize adds --max-message-size to fs.
func RegisterMaxMessageSize(fs *pflag.FlagSet, size *int) {
	fs.IntVar(size, "max-message-size", grpcx.DefaultMaxMessageSize, "largest gRPC message, in bytes, this process sends or receives (a larger complete config travels in chunks; one resource must fit; set it alike on both ends of a link)")
}

// CheckMaxMessageSize refuses a limit too small for any useful message.
func CheckMaxMessageSize(size int) error {
	if size < 1<<16 {
		return config.Errorf("max-message-size", fmt.Sprint(size), "must be at least 65536")
	}
	return nil
}

// ConnectionBounds are the settings every gRPC server has that bound its connections: how
// long one lives (then a GOAWAY, and the client reconnects with a fresh handshake, so that a
// revoked or rotated-out certificate stops being served) and how many streams it carries.
type ConnectionBounds struct {
	MaxConnectionAge        time.Duration
	MaxConnectionAgeGrace   time.Duration
	MaxStreamsPerConnection int
}

// Register adds --max-connection-age, --max-connection-age-grace and
// --max-streams-per-connection to fs.
func (b *ConnectionBounds) Register(fs *pflag.FlagSet) {
	fs.DurationVar(&b.MaxConnectionAge, "max-connection-age", grpcx.DefaultMaxConnectionAge, "longest a gRPC client connection is kept (with up to 10% jitter): then the server sends a GOAWAY and the client reconnects with a fresh TLS handshake, so that a rotated-out or no longer trusted certificate stops being served")
	fs.DurationVar(&b.MaxConnectionAgeGrace, "max-connection-age-grace", grpcx.DefaultMaxConnectionAgeGrace, "how long streams still open on a connection past --max-connection-age may go on; then they end with UNAVAILABLE and their clients resume them on a new connection")
	fs.IntVar(&b.MaxStreamsPerConnection, "max-streams-per-connection", grpcx.DefaultMaxConcurrentStreams, "concurrent gRPC streams one client connection may carry; a client past it waits for one of its streams to end")
}

// Validate checks the bounds; a bad one names its setting.
func (b *ConnectionBounds) Validate() error {
	if b.MaxConnectionAge <= 0 {
		return config.Errorf("max-connection-age", b.MaxConnectionAge.String(), "must be positive")
	}
	if b.MaxConnectionAgeGrace <= 0 {
		return config.Errorf("max-connection-age-grace", b.MaxConnectionAgeGrace.String(), "must be positive")
	}
	if b.MaxStreamsPerConnection <= 0 {
		return config.Errorf("max-streams-per-connection", fmt.Sprint(b.MaxStreamsPerConnection), "must be positive")
	}
	return nil
}

// DefaultMaxOperatorStreams is --max-operator-streams' default.
const DefaultMaxOperatorStreams = 8

// RegisterMaxOperatorStreams adds --max-operator-streams to fs; what names the streams.
func RegisterMaxOperatorStreams(fs *pflag.FlagSet, n *int, what string) {
	fs.IntVar(n, "max-operator-streams", DefaultMaxOperatorStreams, "concurrent "+what+" streams that read-only callers (sluicectl's operator identity) may hold together, apart from --max-streams; more get RESOURCE_EXHAUSTED")
}

// CheckMaxOperatorStreams refuses a cap that is not positive.
func CheckMaxOperatorStreams(n int) error {
	if n <= 0 {
		return config.Errorf("max-operator-streams", fmt.Sprint(n), "must be positive")
	}
	return nil
}

// RegisterPprof adds --pprof to fs.
func RegisterPprof(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "pprof", "", "serve Go profiles (/debug/pprof) on this loopback address, such as 127.0.0.1:6060; off when empty")
}

// CheckPprof refuses a profiling address off loopback: profiles expose memory, which holds
// private keys.
func CheckPprof(addr string) error {
	if addr == "" {
		return nil
	}
	if err := config.CheckHostPort("pprof", addr, false); err != nil {
		return err
	}
	if !grpcx.IsLoopback(addr) {
		return config.Errorf("pprof", addr, "must be a loopback address (127.0.0.1:PORT): profiles expose the process's memory")
	}
	return nil
}
