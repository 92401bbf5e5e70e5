// Package ops serves a process's operational HTTP endpoint: /healthz (the process is alive
// and, where it sets a health check, that check passes),
// /readyz (the process has reached its ready condition: the watcher's barrier, the
// translator's first complete config, the pusher's first apply) and /metrics (Prometheus).
// Profiling (/debug/pprof) is served apart, only when asked for and only on loopback
// (ServePprof): it exposes the process's memory and command line, and this endpoint is open
// to metrics scrapers.
package ops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-io/sluice/internal/version"
)

// Config configures a Server.
type Config struct {
	Logger   hclog.Logger
	Registry *prometheus.Registry
	// OnFirstReady, when set, is called once, the first time the process becomes ready:
	// its cold start is over (docs/design.md, "Cold start"). It is called on the caller of
	// SetReady's goroutine, so it must return at once.
	OnFirstReady func()
}

// Server is the operational endpoint.
type Server struct {
	log      hclog.Logger
	registry *prometheus.Registry
	ready    atomic.Pointer[string] // nil when ready, else the reason it is not
	health   atomic.Pointer[func() error]
	mux      *http.ServeMux

	onFirstReady func()
	firstReady   sync.Once
}

// New returns a server that is not ready until SetReady(true).
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil || cfg.Registry == nil {
		return nil, errors.New("ops: Logger and Registry are required")
	}
	s := &Server{log: cfg.Logger, registry: cfg.Registry, mux: http.NewServeMux(), onFirstReady: cfg.OnFirstReady}
	s.SetNotReady("starting")
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if check := s.health.Load(); check != nil {
			if err := (*check)(); err != nil {
				http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if reason := s.ready.Load(); reason != nil {
			http.Error(w, "not ready: "+*reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	s.mux.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	return s, nil
}

// ServePprof serves /debug/pprof on lis until ctx is done.
func ServePprof(ctx context.Context, lis net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serve(ctx, lis, mux)
}

// NewRegistry returns a registry with the Go runtime and process collectors and
// sluice_build_info, so every process says which build it is.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), BuildInfo())
	return r
}

// BuildInfo is sluice_build_info{version,revision,go_version}, always 1: the usual way to
// join a build's identity onto other series.
func BuildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sluice_build_info",
		Help:        "The build of this process: its version, source revision and Go release; always 1.",
		ConstLabels: prometheus.Labels{"version": version.Version, "revision": version.Rev(), "go_version": version.GoVersion()},
	})
	g.Set(1)
	return g
}

// SetReady marks the process ready.
func (s *Server) SetReady() {
	s.ready.Store(nil)
	if s.onFirstReady != nil {
		s.firstReady.Do(s.onFirstReady)
	}
}

// SetNotReady marks the process not ready, with the reason /readyz reports.
func (s *Server) SetNotReady(reason string) { s.ready.Store(&reason) }

// SetHealthCheck makes /healthz answer 503 with check's error whenever check fails; without
// one, /healthz only says the process is alive. check must be quick and safe to call from
// any goroutine.
func (s *Server) SetHealthCheck(check func() error) { s.health.Store(&check) }

// Ready reports whether the process is ready.
func (s *Server) Ready() bool { return s.ready.Load() == nil }

// Handle adds a handler to the endpoint.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Serve serves on lis until ctx is done.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	return serve(ctx, lis, s.mux)
}

func serve(ctx context.Context, lis net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}
