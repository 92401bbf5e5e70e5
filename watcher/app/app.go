// Package app wires the watcher process: its settings, the Kubernetes client, the informers,
// the store, the barrier and the Watch service, and the endpoints that expose them.
package app

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/run"
)

// Settings are the watcher's settings.
type Settings struct {
	Kubeconfig  string
	Listen      string
	HTTPListen  string
	Namespaces  []string
	SyncTimeout time.Duration
	TLS         cli.TLSSettings
}

// Register adds the settings to fs.
func (s *Settings) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster configuration)")
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:18000", "gRPC address of the Watch service")
	fs.StringVar(&s.HTTPListen, "http-listen", "127.0.0.1:18001", "address of /healthz, /readyz and /metrics")
	fs.StringSliceVar(&s.Namespaces, "namespaces", nil, "namespaces to watch, comma-separated (empty: all)")
	fs.DurationVar(&s.SyncTimeout, "sync-timeout", 2*time.Minute, "how long the initial sync may take before the watcher gives up and exits non-zero")
	s.TLS.Register(fs, false)
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	if err := config.CheckHostPort("listen", s.Listen, false); err != nil {
		return err
	}
	if err := config.CheckHostPort("http-listen", s.HTTPListen, false); err != nil {
		return err
	}
	if err := config.CheckReadable("kubeconfig", s.Kubeconfig); err != nil {
		return err
	}
	if s.SyncTimeout <= 0 {
		return config.Errorf("sync-timeout", s.SyncTimeout.String(), "must be positive")
	}
	return s.TLS.Validate()
}

// Run runs the watcher until ctx is done or it fails.
func (s *Settings) Run(ctx context.Context, log hclog.Logger) error {
	srv, err := cli.NewServing(cli.ServingConfig{Logger: log, Listen: s.Listen, HTTPListen: s.HTTPListen, TLS: s.TLS.Files()})
	if err != nil {
		return err
	}
	var g run.Group
	srv.Add(&g)
	return g.Run(ctx)
}
