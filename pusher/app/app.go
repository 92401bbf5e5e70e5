// Package app wires the pusher process: its settings, the config client and its gate, the
// data-plane target (Caddy), and the endpoints that expose them.
package app

import (
	"context"
	"net/url"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/run"
	"github.com/sluice-io/sluice/internal/version"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/pusher/caddy"
	"github.com/sluice-io/sluice/pusher/gate"
)

// Settings are the pusher's settings.
type Settings struct {
	ID              string
	TranslatorAddr  string
	CaddyAdmin      string
	CaddyTarget     string
	ProxyHTTPListen string
	// ProxyMetricsListen and ProxyAccessLog are what Caddy exposes about the traffic.
	ProxyMetricsListen string
	ProxyAccessLog     bool
	ProxyHTTPSListen   string
	// ProxyListeners are the further listeners: "http:NAME=LISTEN" or "https:NAME=LISTEN".
	ProxyListeners  []string
	Listen          string
	HTTPListen      string
	GuardMaxDeletes float64
	GuardHold       time.Duration
	TLS             cli.TLSSettings
	Pprof           string
	MaxMessageSize  int
	Bounds          cli.ConnectionBounds
}

// Register adds the settings to fs.
func (s *Settings) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.ID, "id", "", "this pusher's id in the translator's status (default: the host name)")
	fs.StringVar(&s.TranslatorAddr, "translator-addr", "127.0.0.1:18010", "gRPC address of the translator")
	fs.StringVar(&s.CaddyAdmin, "caddy-admin", "http://127.0.0.1:2019", "Caddy admin API: an http:// URL or unix:///path/to/socket")
	fs.StringVar(&s.CaddyTarget, "caddy-target", "auto", "how configs reach Caddy: module (Sluice's Caddy module: changes in place, no reload), load (stock Caddy: POST /load of the whole config per change, a reload each time), or auto (the module when the Caddy has it, else load)")
	fs.StringVar(&s.ProxyHTTPListen, "proxy-http-listen", ":8080", "address Caddy serves HTTP on")
	fs.StringVar(&s.ProxyHTTPSListen, "proxy-https-listen", ":8443", "address Caddy serves HTTPS on")
	fs.StringArrayVar(&s.ProxyListeners, "proxy-listener", nil, "a further listener, repeatable: SCHEME:NAME=ADDRESS, where SCHEME is http or https, NAME the listener the translator's routes name (a Gateway port on the shared address, \"8080\", or a Gateway address and port, \"192.0.2.21:80\") and ADDRESS what Caddy binds (\":18080\")")
	fs.StringVar(&s.ProxyMetricsListen, "proxy-metrics-listen", "", "address of a Caddy server answering /metrics (Caddy's Prometheus metrics, turned on with it) and /healthz, for scrapers and probes; empty for none")
	fs.BoolVar(&s.ProxyAccessLog, "proxy-access-log", false, "Caddy writes one JSON access log line per request to its standard output")
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:18020", "gRPC address of the pusher's health service")
	fs.StringVar(&s.HTTPListen, "http-listen", "127.0.0.1:18021", "address of /healthz, /readyz and /metrics")
	fs.Float64Var(&s.GuardMaxDeletes, "guard-max-delete-ratio", 0, "deletion guard: hold back a config that removes more than this share (0..1) of the served routes; 0 turns the guard off")
	fs.DurationVar(&s.GuardHold, "guard-hold", 30*time.Second, "deletion guard: how long a large deletion must stand in the newest config before it is applied; later changes that leave it as it is do not restart the hold")
	s.TLS.Register(fs, true)
	cli.RegisterPprof(fs, &s.Pprof)
	cli.RegisterMaxMessageSize(fs, &s.MaxMessageSize)
	s.Bounds.Register(fs)
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
	if _, err := s.listeners(); err != nil {
		return err
	}
	if s.ProxyMetricsListen != "" {
		if err := config.CheckHostPort("proxy-metrics-listen", s.ProxyMetricsListen, false); err != nil {
			return err
		}
	}
	if err := config.CheckURL("caddy-admin", s.CaddyAdmin); err != nil {
		return err
	}
	// Caddy's admin API changes what the proxy serves and has no authentication: only this
	// Pod may reach it.
	if u, _ := url.Parse(s.CaddyAdmin); u.Scheme != "unix" && !grpcx.IsLoopback(u.Host) {
		return config.Errorf("caddy-admin", s.CaddyAdmin, "must be a loopback address (http://127.0.0.1:2019) or a unix socket (unix:///path): Caddy's admin API has no authentication")
	}
	if err := cli.CheckPprof(s.Pprof); err != nil {
		return err
	}
	if err := cli.CheckMaxMessageSize(s.MaxMessageSize); err != nil {
		return err
	}
	if err := s.Bounds.Validate(); err != nil {
		return err
	}
	if err := s.TLS.CheckServing("listen", s.Listen); err != nil {
		return err
	}
	if err := s.TLS.CheckDialling("translator-addr", s.TranslatorAddr); err != nil {
		return err
	}
	switch s.CaddyTarget {
	case "auto", "module", "load":
	default:
		return config.Errorf("caddy-target", s.CaddyTarget, "must be auto, module or load")
	}
	if s.GuardMaxDeletes < 0 || s.GuardMaxDeletes > 1 {
		return config.Errorf("guard-max-delete-ratio", "", "must be between 0 and 1, got %g", s.GuardMaxDeletes)
	}
	if s.GuardHold < 0 {
		return config.Errorf("guard-hold", s.GuardHold.String(), "must not be negative")
	}
	return s.TLS.Validate()
}

// listeners parses --proxy-listener: every name once, every bind address once among all of
// the proxy's listeners.
func (s *Settings) listeners() ([]caddy.Listener, error) {
	var out []caddy.Listener
	names := map[string]bool{}
	binds := map[string]bool{s.ProxyHTTPListen: true, s.ProxyHTTPSListen: true}
	for _, v := range s.ProxyListeners {
		l, err := caddy.ParseListener(v)
		if err != nil {
			return nil, config.Errorf("proxy-listener", v, "%v", err)
		}
		name, listen := l.Name, l.Listen
		if err := config.CheckHostPort("proxy-listener", listen, false); err != nil {
			return nil, err
		}
		if names[name] {
			return nil, config.Errorf("proxy-listener", v, "listener %q is given twice", name)
		}
		if binds[listen] {
			return nil, config.Errorf("proxy-listener", v, "address %s is bound by another listener", listen)
		}
		names[name], binds[listen] = true, true
		out = append(out, l)
	}
	return out, nil
}

// target chooses the data plane target: with auto, it asks Caddy (waiting for its admin API)
// whether it has Sluice's module.
func (s *Settings) target(ctx context.Context, log hclog.Logger) (gate.DataPlane, error) {
	cc := caddy.Config{Admin: s.CaddyAdmin, Render: caddy.RenderOptions{HTTPListen: s.ProxyHTTPListen, HTTPSListen: s.ProxyHTTPSListen,
		MetricsListen: s.ProxyMetricsListen, AccessLog: s.ProxyAccessLog}}
	cc.Render.Listeners, _ = s.listeners() // checked by Validate
	cc.UnboundListener = func(l string) {
		log.Warn("routes name a listener this pusher does not bind; they are served nowhere here: give every pusher the translator's listeners (--proxy-listener)",
			"listener", l)
	}
	kind := s.CaddyTarget
	if kind == "auto" {
		for {
			has, err := caddy.HasModule(ctx, cc)
			if err == nil {
				kind = "load"
				if has {
					kind = "module"
				} else {
					log.Warn("caddy has no Sluice module; every change reloads Caddy's whole config (POST /load)", "caddy_admin", s.CaddyAdmin,
						"hint", "run the Caddy that make build builds (bin/caddy), or set --caddy-target=load to say this is intended")
				}
				break
			}
			log.Info("waiting for caddy's admin API to choose the target", "error", err)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	var dp gate.DataPlane
	var err error
	if kind == "module" {
		dp, err = caddy.NewModule(cc)
	} else {
		dp, err = caddy.New(cc)
	}
	if err != nil {
		return nil, &config.Error{Setting: "caddy-admin", Value: s.CaddyAdmin, Cause: err}
	}
	log.Info("data plane target", "target", dp.Name())
	return dp, nil
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
	if err := s.TLS.CheckIdentity(identity.Identity{Role: identity.Pusher}); err != nil {
		return err
	}
	srv, err := cli.NewServing(cli.ServingConfig{Logger: log, Listen: s.Listen, HTTPListen: s.HTTPListen, TLS: s.TLS.Files(),
		Insecure: s.TLS.Insecure, Pprof: s.Pprof, MaxMessageSize: s.MaxMessageSize, Bounds: s.Bounds})
	if err != nil {
		return err
	}
	srv.Ops.SetNotReady("no config applied yet")
	m := newMetrics(srv.Registry)
	cc := s.TLS.Client(log, identity.Translator)
	cc.MaxMessageSize = s.MaxMessageSize
	cc.Metrics = srv.Registry
	conn, err := grpcx.Dial(s.TranslatorAddr, cc)
	if err != nil {
		return &config.Error{Setting: "translator-addr", Value: s.TranslatorAddr, Cause: err}
	}
	defer conn.Close()
	var g run.Group
	srv.Add(&g)
	// The target is chosen once Caddy answers, while health and metrics are already served.
	g.Add("gate", func(ctx context.Context) error {
		target, err := s.target(ctx, log)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		gt, err := gate.New(gate.Config{
			Logger: log.Named("gate").With("pusher", id), Client: configv1.NewConfigServiceClient(conn), DataPlane: target,
			PusherID: id, SoftwareVersion: version.Version, Kind: configv1.DataPlaneKind_DATA_PLANE_KIND_CADDY, Metrics: m,
			GuardMaxDeleteRatio: s.GuardMaxDeletes, GuardHold: s.GuardHold, OnApplied: srv.Ops.SetReady,
		})
		if err != nil {
			return err
		}
		return gt.Run(ctx)
	})
	return g.Run(ctx)
}
