// Package app wires the pusher process: its settings, the config client and its gate, the
// data-plane target (Caddy), and the endpoints that expose them.
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
	srv, err := cli.NewServing(cli.ServingConfig{Logger: log, Listen: s.Listen, HTTPListen: s.HTTPListen, TLS: s.TLS.Files()})
	if err != nil {
		return err
	}
	var g run.Group
	srv.Add(&g)
	return g.Run(ctx)
}
