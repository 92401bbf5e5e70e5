package cli

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

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
	// CountSent counts the bytes the gRPC server sends (see grpcx.ServerConfig).
	CountSent func(method string, bytes int)
}

// Serving holds a process's gRPC server, operational endpoint and metrics registry. Services
// are registered on GRPC before the group runs.
type Serving struct {
	GRPC     *grpcx.Server
	Ops      *ops.Server
	Registry *prometheus.Registry

	grpcLis, httpLis net.Listener
}

// NewServing opens both listeners; a failure names the setting.
func NewServing(cfg ServingConfig) (*Serving, error) {
	if cfg.Logger == nil {
		return nil, errors.New("cli: ServingConfig.Logger is required")
	}
	reg := ops.NewRegistry()
	opsSrv, err := ops.New(ops.Config{Logger: cfg.Logger.Named("ops"), Registry: reg})
	if err != nil {
		return nil, err
	}
	g, err := grpcx.NewServer(grpcx.ServerConfig{Logger: cfg.Logger.Named("grpc-server"), TLS: cfg.TLS, Address: cfg.Listen, CountSent: cfg.CountSent})
	if err != nil {
		return nil, err
	}
	httpLis, err := Listen("http-listen", cfg.HTTPListen)
	if err != nil {
		return nil, err
	}
	grpcLis, err := Listen("listen", cfg.Listen)
	if err != nil {
		httpLis.Close()
		return nil, err
	}
	cfg.Logger.Info("serving", "grpc", grpcLis.Addr().String(), "http", httpLis.Addr().String())
	return &Serving{GRPC: g, Ops: opsSrv, Registry: reg, grpcLis: grpcLis, httpLis: httpLis}, nil
}

// Add adds both servers to g.
func (s *Serving) Add(g *run.Group) {
	g.Add("http", func(ctx context.Context) error { return s.Ops.Serve(ctx, s.httpLis) })
	g.Add("grpc", func(ctx context.Context) error { return s.GRPC.Serve(ctx, s.grpcLis, 5*time.Second) })
}
