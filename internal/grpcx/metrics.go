package grpcx

import (
	"errors"
	"fmt"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// The RPC metrics are go-grpc-middleware's Prometheus provider (grpc_server_* and
// grpc_client_*: started, handled by code, messages sent and received, handling time), the
// names every gRPC dashboard already knows. One set per registry: a process that runs two
// servers, or dials twice, counts them together under their method names.

func serverMetrics(reg prometheus.Registerer) (*grpcprom.ServerMetrics, error) {
	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.001, 4, 10))))
	return register(reg, m)
}

func clientMetrics(reg prometheus.Registerer) (*grpcprom.ClientMetrics, error) {
	m := grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.001, 4, 10))))
	return register(reg, m)
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		var zero C
		return zero, fmt.Errorf("register grpc metrics: %w", err)
	}
	return c, nil
}
