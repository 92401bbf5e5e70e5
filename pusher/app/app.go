// Package app wires the pusher process: its settings, the config client and its gate, the
// data-plane target (Caddy), and the endpoints that expose them.
package app

import (
	"context"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/run"
	"github.com/sluice-io/sluice/internal/version"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/pusher/caddy"
	"github.com/sluice-io/sluice/pusher/gate"
)

// Settings are the pusher's settings.
type Settings struct {
	ID               string
	TranslatorAddr   string
	CaddyAdmin       string
	ProxyHTTPListen  string
	ProxyHTTPSListen string
	Listen           string
	HTTPListen       string
	GuardMaxDeletes  float64
	GuardHold        time.Duration
	TLS              cli.TLSSettings
}

// Register adds the settings to fs.
func (s *Settings) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.ID, "id", "", "this pusher's id in the translator's status (default: the host name)")
	fs.StringVar(&s.TranslatorAddr, "translator-addr", "127.0.0.1:18010", "gRPC address of the translator")
	fs.StringVar(&s.CaddyAdmin, "caddy-admin", "http://127.0.0.1:2019", "Caddy admin API: an http:// URL or unix:///path/to/socket")
	fs.StringVar(&s.ProxyHTTPListen, "proxy-http-listen", ":8080", "address Caddy serves HTTP on")
	fs.StringVar(&s.ProxyHTTPSListen, "proxy-https-listen", ":8443", "address Caddy serves HTTPS on")
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:18020", "gRPC address of the pusher's health service")
	fs.StringVar(&s.HTTPListen, "http-listen", "127.0.0.1:18021", "address of /healthz, /readyz and /metrics")
	fs.Float64Var(&s.GuardMaxDeletes, "guard-max-delete-ratio", 0, "deletion guard: hold back a config that removes more than this share (0..1) of the served routes; 0 turns the guard off")
	fs.DurationVar(&s.GuardHold, "guard-hold", 30*time.Second, "deletion guard: how long a held config must stay the newest before it is applied")
	s.TLS.Register(fs, true)
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	for _, a := range []struct{ name, v string }{
		{"translator-addr", s.TranslatorAddr}, {"proxy-http-listen", s.ProxyHTTPListen},
		{"proxy-https-listen", s.ProxyHTTPSListen}, {"listen", s.Listen}, {"http-listen", s.HTTPListen},
	} {
		if err := config.CheckHostPort(a.name, a.v, false); err != nil {
			return err
		}
	}
	if err := config.CheckURL("caddy-admin", s.CaddyAdmin); err != nil {
		return err
	}
	if s.GuardMaxDeletes < 0 || s.GuardMaxDeletes > 1 {
		return config.Errorf("guard-max-delete-ratio", "", "must be between 0 and 1, got %g", s.GuardMaxDeletes)
	}
	if s.GuardHold < 0 {
		return config.Errorf("guard-hold", s.GuardHold.String(), "must not be negative")
	}
	return s.TLS.Validate()
}

// Run runs the pusher until ctx is done or it fails.
func (s *Settings) Run(ctx context.Context, log hclog.Logger) error {
	id := s.ID
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return config.Errorf("id", "", "empty, and the host name is unknown: %v", err)
		}
		id = host
	}
	target, err := caddy.New(caddy.Config{Admin: s.CaddyAdmin, Render: caddy.RenderOptions{HTTPListen: s.ProxyHTTPListen, HTTPSListen: s.ProxyHTTPSListen}})
	if err != nil {
		return &config.Error{Setting: "caddy-admin", Value: s.CaddyAdmin, Cause: err}
	}
	srv, err := cli.NewServing(cli.ServingConfig{Logger: log, Listen: s.Listen, HTTPListen: s.HTTPListen, TLS: s.TLS.Files()})
	if err != nil {
		return err
	}
	srv.Ops.SetNotReady("no config applied yet")
	m := newMetrics(srv.Registry)
	conn, err := grpcx.Dial(s.TranslatorAddr, grpcx.ClientConfig{Logger: log, TLS: s.TLS.Files()})
	if err != nil {
		return &config.Error{Setting: "translator-addr", Value: s.TranslatorAddr, Cause: err}
	}
	defer conn.Close()
	gt, err := gate.New(gate.Config{
		Logger: log.Named("gate").With("pusher", id), Client: configv1.NewConfigServiceClient(conn), DataPlane: target,
		PusherID: id, SoftwareVersion: version.Version, Kind: configv1.DataPlaneKind_DATA_PLANE_KIND_CADDY, Metrics: m,
		GuardMaxDeleteRatio: s.GuardMaxDeletes, GuardHold: s.GuardHold, OnApplied: srv.Ops.SetReady,
	})
	if err != nil {
		return err
	}
	var g run.Group
	srv.Add(&g)
	g.Add("gate", gt.Run)
	return g.Run(ctx)
}
