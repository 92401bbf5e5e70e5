// Package app wires the translator process: its settings, the watch client, translation, the
// config versions and the Config service, and the endpoints that expose them.
package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/run"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/configserver"
	"github.com/sluice-io/sluice/translator/engine"
	"github.com/sluice-io/sluice/translator/statusreport"
	"github.com/sluice-io/sluice/translator/translate"
)

// Settings are the translator's settings.
type Settings struct {
	WatcherAddr              string
	Listen                   string
	HTTPListen               string
	IngressClass             string
	ControllerName           string
	WatchIngressWithoutClass bool
	SSLRedirect              bool
	DefaultCertificate       string
	Holdoff                  time.Duration
	MaxDelay                 time.Duration
	PublishService           string
	PublishAddresses         []string
	ReportStatus             bool
	SendTimeout              time.Duration
	TLS                      cli.TLSSettings
	MaxStreams               int
	MaxOperatorStreams       int
	Bounds                   cli.ConnectionBounds
	Pprof                    string
	MaxMessageSize           int
	GatewayControllerName    string
	GatewayHTTPPort          int32
	GatewayHTTPSPort         int32
	// GatewayPorts are "PORT/HTTP" or "PORT/HTTPS"; GatewayAddresses the pool of addresses.
	GatewayPorts     []string
	GatewayAddresses []string
	// GatewayReservedAddresses are given only to a Gateway asking for one by name.
	GatewayReservedAddresses []string
}

// gatewayPorts parses --gateway-port: each port once, none of them a main port.
func (s *Settings) gatewayPorts() ([]translate.GatewayPort, error) {
	seen := map[int32]bool{s.GatewayHTTPPort: true, s.GatewayHTTPSPort: true}
	var out []translate.GatewayPort
	for _, v := range s.GatewayPorts {
		ps, proto, ok := strings.Cut(v, "/")
		p, err := strconv.ParseUint(ps, 10, 16)
		if !ok || err != nil || p == 0 || (proto != "HTTP" && proto != "HTTPS") {
			return nil, config.Errorf("gateway-port", v, "must be PORT/HTTP or PORT/HTTPS with a port number (1-65535)")
		}
		if seen[int32(p)] {
			return nil, config.Errorf("gateway-port", v, "port %d is given twice (or is --gateway-http-port or --gateway-https-port)", p)
		}
		seen[int32(p)] = true
		out = append(out, translate.GatewayPort{Port: int32(p), HTTPS: proto == "HTTPS"})
	}
	return out, nil
}

// gatewayAddresses parses --gateway-address and --gateway-reserved-address: IP addresses,
// each once in both, in canonical form; reserved ones only beside a pool.
func (s *Settings) gatewayAddresses() (pool, reserved []string, err error) {
	seen := map[string]bool{}
	parse := func(flag string, vs []string) ([]string, error) {
		var out []string
		for _, v := range vs {
			a, err := netip.ParseAddr(v)
			if err != nil || a.Zone() != "" {
				return nil, config.Errorf(flag, v, "must be an IP address")
			}
			if seen[a.String()] {
				return nil, config.Errorf(flag, v, "is given twice (in --gateway-address or --gateway-reserved-address)")
			}
			seen[a.String()] = true
			out = append(out, a.String())
		}
		return out, nil
	}
	if pool, err = parse("gateway-address", s.GatewayAddresses); err != nil {
		return nil, nil, err
	}
	if reserved, err = parse("gateway-reserved-address", s.GatewayReservedAddresses); err != nil {
		return nil, nil, err
	}
	if len(reserved) > 0 && len(pool) == 0 {
		return nil, nil, config.Errorf("gateway-reserved-address", strings.Join(s.GatewayReservedAddresses, ","), "needs --gateway-address: without a pool every Gateway shares the published addresses")
	}
	return pool, reserved, nil
}

// Register adds the settings to fs.
func (s *Settings) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.WatcherAddr, "watcher-addr", "127.0.0.1:18000", "gRPC address of the watcher; a comma-separated list names replicas, tried in order")
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:18010", "gRPC address of the Config service")
	fs.StringVar(&s.HTTPListen, "http-listen", "127.0.0.1:18011", "address of /healthz, /readyz and /metrics")
	fs.StringVar(&s.IngressClass, "ingress-class", "sluice", "name of the IngressClass this translator serves")
	fs.StringVar(&s.ControllerName, "controller-name", "sluice.io/ingress-controller", "spec.controller of the IngressClasses this translator serves")
	fs.BoolVar(&s.WatchIngressWithoutClass, "watch-ingress-without-class", false, "also serve Ingresses without a class while no other controller's IngressClass is the default")
	fs.BoolVar(&s.SSLRedirect, "ssl-redirect", true, "redirect HTTP to HTTPS (308) on the hosts of Ingresses that have a certificate, unless an Ingress's ssl-redirect annotation is \"false\" (force-ssl-redirect redirects whatever this says)")
	fs.StringVar(&s.DefaultCertificate, "default-certificate", "", "namespace/name of a TLS Secret served for handshakes no host has a certificate for (an unknown name, or a host whose Secret is missing or invalid); the watcher must carry it (its --default-certificate)")
	fs.DurationVar(&s.Holdoff, "holdoff", 10*time.Millisecond, "quiet time after a change before a config is built (coalesces bursts); a change after a quiet holdoff is built at once")
	fs.DurationVar(&s.MaxDelay, "max-delay", 500*time.Millisecond, "longest a change waits for a config while changes keep coming")
	fs.StringVar(&s.PublishService, "publish-service", "", "namespace/name of the proxy's Service: its status.loadBalancer and externalIPs become every served Ingress's status.loadBalancer")
	fs.StringSliceVar(&s.PublishAddresses, "publish-address", nil, "the proxy's addresses (IPs or hostnames) to put in every served Ingress's status.loadBalancer, instead of --publish-service")
	fs.DurationVar(&s.SendTimeout, "send-timeout", 30*time.Second, "longest one send on a Config stream may take; a pusher that stopped reading for longer is dropped and must reconnect")
	fs.BoolVar(&s.ReportStatus, "report-status", true, "report the served Ingresses' statuses and findings to the watcher, which writes them")
	fs.StringVar(&s.GatewayControllerName, "gateway-controller-name", translate.DefaultGatewayControllerName, "spec.controllerName of the GatewayClasses this translator serves (Gateway API)")
	fs.Int32Var(&s.GatewayHTTPPort, "gateway-http-port", translate.DefaultGatewayHTTPPort, "Gateway listener port served on the proxy's HTTP listener: the port clients see, whatever the proxy binds; HTTP listeners on other ports are refused (PortUnavailable)")
	fs.StringSliceVar(&s.GatewayPorts, "gateway-port", nil, "further Gateway listener ports the proxies serve, as PORT/HTTP or PORT/HTTPS (comma-separated or repeated): each is a --proxy-listener of every pusher, named by the port on the shared address and by ADDRESS:PORT on each --gateway-address")
	fs.StringSliceVar(&s.GatewayAddresses, "gateway-address", nil, "a pool of IP addresses the proxies serve Gateways on, one Gateway each: spec.addresses when it asks for one of them, else one chosen by name; each Gateway port on each address is a --proxy-listener of every pusher (ADDRESS:PORT). Empty: every Gateway shares the published addresses")
	fs.StringSliceVar(&s.GatewayReservedAddresses, "gateway-reserved-address", nil, "IP addresses the proxies also serve Gateways on, given only to a Gateway whose spec.addresses asks for one of them (never chosen for a Gateway that asks for none); needs --gateway-address")
	fs.Int32Var(&s.GatewayHTTPSPort, "gateway-https-port", translate.DefaultGatewayHTTPSPort, "Gateway listener port served on the proxy's HTTPS listener: the port clients see, whatever the proxy binds; HTTPS listeners on other ports are refused (PortUnavailable)")
	s.TLS.Register(fs, true)
	fs.IntVar(&s.MaxStreams, "max-streams", 64, "concurrent Config streams that pushers may hold together; more get RESOURCE_EXHAUSTED")
	cli.RegisterMaxOperatorStreams(fs, &s.MaxOperatorStreams, "Config")
	s.Bounds.Register(fs)
	cli.RegisterPprof(fs, &s.Pprof)
	cli.RegisterMaxMessageSize(fs, &s.MaxMessageSize)
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	if s.DefaultCertificate != "" {
		if err := config.CheckNamespacedName("default-certificate", s.DefaultCertificate); err != nil {
			return err
		}
	}
	for _, a := range []struct{ name, v string }{{"listen", s.Listen}, {"http-listen", s.HTTPListen}} {
		if err := config.CheckHostPort(a.name, a.v, false); err != nil {
			return err
		}
	}
	for _, a := range strings.Split(s.WatcherAddr, ",") {
		if err := config.CheckHostPort("watcher-addr", a, false); err != nil {
			return err
		}
	}
	if s.PublishService != "" {
		if len(s.PublishAddresses) > 0 {
			return config.Errorf("publish-address", strings.Join(s.PublishAddresses, ","), "cannot be used with --publish-service")
		}
		if err := config.CheckNamespacedName("publish-service", s.PublishService); err != nil {
			return err
		}
	}
	for _, a := range s.PublishAddresses {
		if a == "" || (net.ParseIP(a) == nil && len(validation.IsDNS1123Subdomain(a)) > 0) {
			return config.Errorf("publish-address", a, "must be an IP address or a DNS name")
		}
	}
	if s.IngressClass == "" {
		return config.Errorf("ingress-class", "", "must not be empty")
	}
	if s.ControllerName == "" {
		return config.Errorf("controller-name", "", "must not be empty")
	}
	if domain, path, ok := strings.Cut(s.GatewayControllerName, "/"); !ok || domain == "" || path == "" {
		return config.Errorf("gateway-controller-name", s.GatewayControllerName, "must be a domain-prefixed path, such as %s", translate.DefaultGatewayControllerName)
	}
	for _, p := range []struct {
		name string
		v    int32
	}{{"gateway-http-port", s.GatewayHTTPPort}, {"gateway-https-port", s.GatewayHTTPSPort}} {
		if p.v < 1 || p.v > 65535 {
			return config.Errorf(p.name, fmt.Sprint(p.v), "must be a port number (1-65535)")
		}
	}
	if s.GatewayHTTPPort == s.GatewayHTTPSPort {
		return config.Errorf("gateway-https-port", fmt.Sprint(s.GatewayHTTPSPort), "must differ from --gateway-http-port")
	}
	if _, err := s.gatewayPorts(); err != nil {
		return err
	}
	if _, _, err := s.gatewayAddresses(); err != nil {
		return err
	}
	if s.Holdoff < 0 {
		return config.Errorf("holdoff", s.Holdoff.String(), "must not be negative")
	}
	if s.SendTimeout <= 0 {
		return config.Errorf("send-timeout", s.SendTimeout.String(), "must be positive")
	}
	if s.MaxStreams <= 0 {
		return config.Errorf("max-streams", fmt.Sprint(s.MaxStreams), "must be positive")
	}
	if err := cli.CheckPprof(s.Pprof); err != nil {
		return err
	}
	if err := cli.CheckMaxMessageSize(s.MaxMessageSize); err != nil {
		return err
	}
	if err := cli.CheckMaxOperatorStreams(s.MaxOperatorStreams); err != nil {
		return err
	}
	if err := s.Bounds.Validate(); err != nil {
		return err
	}
	if err := s.TLS.CheckServing("listen", s.Listen); err != nil {
		return err
	}
	if err := s.TLS.CheckDialling("watcher-addr", s.WatcherAddr); err != nil {
		return err
	}
	if s.MaxDelay < s.Holdoff {
		return config.Errorf("max-delay", s.MaxDelay.String(), "must be at least --holdoff (%s)", s.Holdoff)
	}
	return s.TLS.Validate()
}

// Run runs the translator until ctx is done or it fails.
func (s *Settings) Run(ctx context.Context, log hclog.Logger) error {
	var m *metrics // set below, before anything is served
	// The watcher judges this translator's status reports by the class its certificate names.
	if err := s.TLS.CheckIdentity(identity.Identity{Role: identity.Translator, Class: s.IngressClass}); err != nil {
		return err
	}
	srv, err := cli.NewServing(cli.ServingConfig{Logger: log, Listen: s.Listen, HTTPListen: s.HTTPListen, TLS: s.TLS.Files(),
		Insecure: s.TLS.Insecure, Pprof: s.Pprof, MaxMessageSize: s.MaxMessageSize, ColdStartEndsLater: true,
		Bounds: s.Bounds, StreamLimits: map[string]grpcx.StreamLimit{
			configv1.ConfigService_StreamConfig_FullMethodName: grpcx.LimitByAccess(identity.DefaultPolicy(), configv1.ConfigService_StreamConfig_FullMethodName, s.MaxStreams, s.MaxOperatorStreams),
		},
		CountSent: func(method string, n int) {
			if method == configv1.ConfigService_StreamConfig_FullMethodName {
				m.sentBytes.Add(float64(n))
			}
		}})
	if err != nil {
		return err
	}
	srv.Ops.SetNotReady("no complete config yet")
	m = newMetrics(srv.Registry)
	// The engine takes the NACKs that name objects (quarantine); it is made after the
	// server it publishes to, and no stream is served before both exist.
	var eng *engine.Engine
	cfgSrv, err := configserver.New(configserver.Config{Logger: log.Named("config"), Stopping: ctx.Done(), Metrics: m,
		SendTimeout: s.SendTimeout, MaxMessageSize: s.MaxMessageSize, // the limit cli.NewServing's server sends with
		OnComplete: func() { srv.Ops.SetReady() }, OnNack: func(n *configv1.Nack) { eng.Rejected(n) },
		// The system's start is over once a data plane runs a config: only then does the
		// translator's end-of-cold-start collection no longer take the CPU the pusher and
		// the proxy need for the first one (docs/design.md, "Cold start").
		OnAck: srv.ColdStartOver})
	if err != nil {
		return err
	}
	configv1.RegisterConfigServiceServer(srv.GRPC.Server, cfgSrv)
	cc := s.TLS.Client(log, identity.Watcher)
	cc.MaxMessageSize = s.MaxMessageSize
	cc.Metrics = srv.Registry
	conn, err := grpcx.Dial(s.WatcherAddr, cc)
	if err != nil {
		return &config.Error{Setting: "watcher-addr", Value: s.WatcherAddr, Cause: err}
	}
	defer conn.Close()
	var g run.Group
	srv.Add(&g)
	var sink engine.StatusSink
	if s.ReportStatus {
		rep, err := statusreport.New(statusreport.Config{Logger: log.Named("status"), Client: watchv1.NewStatusServiceClient(conn),
			Source: s.ControllerName + "/" + s.IngressClass, Metrics: m})
		if err != nil {
			return err
		}
		sink = rep
		g.Add("status", rep.Run)
	}
	ports, _ := s.gatewayPorts()               // checked by Validate
	addrs, reserved, _ := s.gatewayAddresses() // checked by Validate
	eng, err = engine.New(engine.Config{
		Logger: log.Named("engine"), Client: watchv1.NewWatchServiceClient(conn), Publisher: cfgSrv, Metrics: m, Status: sink,
		Options: translate.Options{IngressClass: s.IngressClass, ControllerName: s.ControllerName, WatchIngressWithoutClass: s.WatchIngressWithoutClass,
			NoSSLRedirect: !s.SSLRedirect, DefaultCertificate: s.DefaultCertificate, PublishService: s.PublishService, PublishAddresses: s.PublishAddresses,
			GatewayControllerName: s.GatewayControllerName, GatewayHTTPPort: s.GatewayHTTPPort, GatewayHTTPSPort: s.GatewayHTTPSPort,
			GatewayPorts: ports, GatewayAddresses: addrs, GatewayReservedAddresses: reserved},
		Holdoff: s.Holdoff, MaxDelay: s.MaxDelay,
	})
	if err != nil {
		return err
	}
	g.Add("engine", eng.Run)
	return g.Run(ctx)
}
