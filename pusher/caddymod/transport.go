package caddymod

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

func init() { caddy.RegisterModule(new(Transport)) }

// timeoutsVar is the request variable through which the router hands the route's backend
// timeouts (Route.backend_timeouts) to the transport.
const timeoutsVar = "sluice.timeouts"

// tlsVar is the request variable through which the router hands the chosen backend's TLS
// settings (a *tlsProfile, Backend.tls) to the transport.
const tlsVar = "sluice.tls"

// timeouts is a route's backend timeouts, part of a transport variant's key.
type timeouts struct{ connect, read, write time.Duration }

// tlsProfile is a backend's TLS settings compiled once (contract.BackendTLSConfig), with key,
// the digest of the settings, which names its transport variant across config versions.
type tlsProfile struct {
	key string
	cfg *tls.Config
}

func compileTLSProfile(bt *configv1.BackendTLS) (*tlsProfile, error) {
	cfg, err := contract.BackendTLSConfig(bt)
	if err != nil {
		return nil, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(bt)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return &tlsProfile{key: string(sum[:]), cfg: cfg}, nil
}

// variantKey names a transport variant: a route's timeouts and a backend's TLS settings.
type variantKey struct {
	timeouts
	tls string // tlsProfile.key; "" for none
}

func timeoutsOf(t *configv1.BackendTimeouts) timeouts {
	if t == nil {
		return timeouts{}
	}
	var out timeouts
	if d := t.GetConnect(); d != nil {
		out.connect = d.AsDuration()
	}
	if d := t.GetRead(); d != nil {
		out.read = d.AsDuration()
	}
	if d := t.GetWrite(); d != nil {
		out.write = d.AsDuration()
	}
	return out
}

// maxVariants bounds the transports one reverse_proxy keeps for distinct route timeouts and
// backend TLS settings: past it, the one used least recently is dropped (its idle
// connections closed).
const maxVariants = 256

// Transport is Caddy's http transport for each set of route timeouts and backend TLS
// settings (http.reverse_proxy.transport.sluice): both are fixed in a transport's config,
// and routes change in place, so each set a request names gets a transport of its own,
// built from HTTP (the config of Caddy's http transport) with them, on first use.
type Transport struct {
	// HTTP is the config of Caddy's http transport every variant starts from.
	HTTP json.RawMessage `json:"http,omitempty"`

	ctx  caddy.Context
	base *reverseproxy.HTTPTransport

	mu       sync.Mutex
	variants map[variantKey]*variant
	uses     uint64
}

type variant struct {
	t    *reverseproxy.HTTPTransport
	used uint64
}

// CaddyModule returns the Caddy module information.
func (*Transport) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.reverse_proxy.transport.sluice", New: func() caddy.Module { return new(Transport) }}
}

// Provision builds the base transport.
func (t *Transport) Provision(ctx caddy.Context) error {
	t.ctx = ctx
	base, err := t.build(timeouts{}, nil)
	if err != nil {
		return err
	}
	t.base, t.variants = base, map[variantKey]*variant{}
	return nil
}

func (t *Transport) build(to timeouts, p *tlsProfile) (*reverseproxy.HTTPTransport, error) {
	h := new(reverseproxy.HTTPTransport)
	if len(t.HTTP) > 0 {
		if err := json.Unmarshal(t.HTTP, h); err != nil {
			return nil, fmt.Errorf("sluice transport: %w", err)
		}
	}
	if to.connect > 0 {
		h.DialTimeout = caddy.Duration(to.connect)
	}
	if to.read > 0 {
		h.ReadTimeout = caddy.Duration(to.read)
	}
	if to.write > 0 {
		h.WriteTimeout = caddy.Duration(to.write)
	}
	if p != nil && h.TLS == nil {
		return nil, fmt.Errorf("sluice transport: backend TLS settings for a transport without TLS")
	}
	if err := h.Provision(t.ctx); err != nil {
		return nil, fmt.Errorf("sluice transport: %w", err)
	}
	if p != nil {
		// Caddy's TLS client config, with its protocols (ALPN) as HTTP/2 configured them, but
		// the backend's verification, server name and client certificate. Set before the
		// transport is used, in place, since HTTP/2 kept a reference to it.
		c := h.Transport.TLSClientConfig
		c.InsecureSkipVerify, c.VerifyConnection, c.RootCAs = p.cfg.InsecureSkipVerify, p.cfg.VerifyConnection, nil
		c.ServerName, c.Certificates = p.cfg.ServerName, p.cfg.Certificates
	}
	return h, nil
}

// RoundTrip sends req with the transport of its route's timeouts and its backend's TLS
// settings.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	to, _ := caddyhttp.GetVar(req.Context(), timeoutsVar).(timeouts)
	p, _ := caddyhttp.GetVar(req.Context(), tlsVar).(*tlsProfile)
	if to == (timeouts{}) && p == nil {
		return t.base.RoundTrip(req)
	}
	h, err := t.variant(to, p)
	if err != nil {
		return nil, err
	}
	return h.RoundTrip(req)
}

func (t *Transport) variant(to timeouts, p *tlsProfile) (*reverseproxy.HTTPTransport, error) {
	key := variantKey{timeouts: to}
	if p != nil {
		key.tls = p.key
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.uses++
	if v := t.variants[key]; v != nil {
		v.used = t.uses
		return v.t, nil
	}
	h, err := t.build(to, p)
	if err != nil {
		return nil, err
	}
	if len(t.variants) >= maxVariants {
		var oldest variantKey
		var at uint64 = ^uint64(0)
		for k, v := range t.variants {
			if v.used < at {
				oldest, at = k, v.used
			}
		}
		_ = t.variants[oldest].t.Cleanup()
		delete(t.variants, oldest)
	}
	t.variants[key] = &variant{t: h, used: t.uses}
	return h, nil
}

// TLSEnabled, EnableTLS and RequestHeaderOps are the base transport's: the variants differ
// only in timeouts and in how TLS verifies and authenticates.
func (t *Transport) TLSEnabled() bool { return t.base.TLSEnabled() }

// EnableTLS implements reverseproxy.TLSTransport.
func (t *Transport) EnableTLS(base *reverseproxy.TLSConfig) error { return t.base.EnableTLS(base) }

// RequestHeaderOps implements reverseproxy.RequestHeaderOpsTransport.
func (t *Transport) RequestHeaderOps() *headers.HeaderOps { return t.base.RequestHeaderOps() }

// Cleanup closes every variant's idle connections.
func (t *Transport) Cleanup() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range t.variants {
		_ = v.t.Cleanup()
	}
	if t.base != nil {
		return t.base.Cleanup()
	}
	return nil
}

var (
	_ http.RoundTripper                      = (*Transport)(nil)
	_ caddy.Provisioner                      = (*Transport)(nil)
	_ caddy.CleanerUpper                     = (*Transport)(nil)
	_ reverseproxy.TLSTransport              = (*Transport)(nil)
	_ reverseproxy.RequestHeaderOpsTransport = (*Transport)(nil)
)
