// Package caddymod is Sluice's Caddy module: Caddy's data plane without reloads. It holds
// the routing table (virtual hosts, routes, backends with their endpoints, certificates) as
// an immutable value behind an atomic pointer; a change builds the next table and swaps it
// whole, so a request sees the table before a change or after it, never a mix, and Caddy's
// own config never changes.
//
// It is five Caddy modules around one process-wide store (Caddy loads its admin modules once
// per process, and the table must outlive any config load):
//   - admin.api.sluice: the pusher's endpoint. PUT /sluice/state replaces the whole state
//     (a sluice.config.v1.Config, protobuf); POST /sluice/delta applies a ConfigDelta onto the
//     version held; GET /sluice/state says what is held. A change is checked whole (paths,
//     certificates, the state hash) before anything is swapped: it applies entirely or not at
//     all. 409 means "not at that base: send the complete state", 422 "this config is bad".
//   - http.handlers.sluice: the router. It matches a request exactly as contract.Match does
//     (the exact host, its suffixes' wildcards, the catch-all; in each the routes in order;
//     the listener's scheme, Exact, Prefix and regular-expression paths, the method, header
//     and query matches), answers 404 when nothing matches, a route's redirect itself, and
//     503 when the route has no ready endpoints; otherwise it picks a backend by weight,
//     rewrites the request and changes its headers as the route and then the picked
//     backend say (contract.ForwardedTo),
//     changes the response's headers on the way back, and hands the request on (to the
//     reverse_proxy that speaks the backend's protocol), again for each try the route's
//     retry policy asks for (retry.go).
//   - http.reverse_proxy.upstreams.sluice: the backend's ready endpoints, for Caddy's own
//     reverse_proxy, which does the proxying (transport, load balancing, retries, passive
//     health). Routing and proxying are split this way because reverse_proxy's dynamic
//     upstreams are its supported hook for per-request upstreams: nothing of the proxy is
//     written here.
//   - tls.get_certificate.sluice: the certificate for a handshake's SNI (exact host, then the
//     most specific wildcard serving it, then the catch-all's default), from the same
//     table, so a new or renewed Secret needs no reload either; with tls.permission.sluice, which refuses every on-demand issuance, the table
//     is the only source of certificates.
package caddymod

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/parallel"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Ref names the version a table was built from.
type Ref struct {
	Epoch   string `json:"epoch"`
	Version uint64 `json:"version"`
	Hash    string `json:"hash"`
}

// Table is one immutable routing table.
type Table struct {
	Ref
	hosts    cow[*vhost]
	backends cow[*backend]
	certs    cow[*tls.Certificate]
}

type vhost struct {
	cert   string
	routes []*route
	deep   bool // a route matches any depth (contract.HostCandidate.Deep)
}

type route struct {
	name string
	rt   *configv1.Route // what the route does to a request (the reference's functions read it)
	// match is the route's matches, compiled once by the reference's own Matcher: the module
	// and the reference router decide a match with one implementation.
	match    *contract.Matcher
	backends []*configv1.WeightedBackend
	timeout  time.Duration
	clients  *contract.AddressFilter // nil: every client
	zone     *zone                   // Route.rate_limit's counters; nil: no limit
	dial     timeouts                // Route.backend_timeouts, for the transport
}

type backend struct {
	name      string
	upstreams []*reverseproxy.Upstream // ready endpoints only
	// protocol is how reverse_proxy speaks to them: the router tells it through protocolVar.
	protocol string
	// tls, for a backend with TLS settings (Backend.tls), is how the transport verifies the
	// endpoints and what it presents: the router hands it over through tlsVar.
	tls *tlsProfile
}

// ErrNotAtBase means a delta is not onto the version held (or nothing is held): the sender
// must send the complete state.
var ErrNotAtBase = errors.New("not at the delta's base")

// ErrRejected means a config is invalid as a whole; nothing of it was applied.
var ErrRejected = errors.New("config rejected")

// Store is the process-wide state: the config state as received (for deltas and the hash)
// and the table built from it. Changes are serialised; readers only load the table.
type Store struct {
	mu    sync.Mutex
	chain contract.Chain
	table atomic.Pointer[Table]
}

// store is the one Store of the process: the admin endpoint writes it, the router, the
// upstream source and the certificate manager read it.
var store = &Store{}

// Current is the table requests are routed by (nil before the first state).
func (s *Store) Current() *Table { return s.table.Load() }

// Replace makes cfg, a complete state, the one held.
func (s *Store) Replace(cfg *configv1.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var chain contract.Chain
	if err := chain.Complete(cfg, false); err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	res := cfg.GetResources()
	hosts, backends, certs := cow[*vhost]{}.edit(), cow[*backend]{}.edit(), cow[*tls.Certificate]{}.edit()
	vhs, cs := res.GetVirtualHosts(), res.GetCertificates()
	compiled, parsed := compileAll(vhs, cs)
	byName := make(map[string]*vhost, len(vhs))
	var rf refusals
	for i, vh := range vhs {
		hosts.set(vh.GetHostname(), compiled[i].h)
		byName[vh.GetHostname()] = compiled[i].h
		rf.merge(&compiled[i].rf)
	}
	for _, b := range res.GetBackends() {
		backends.set(b.GetName(), buildBackend(b, &rf))
	}
	for i, c := range cs {
		if parsed[i].tc != nil {
			certs.set(c.GetName(), parsed[i].tc)
		}
		rf.merge(&parsed[i].rf)
	}
	if err := rf.err(); err != nil {
		return err
	}
	t := &Table{Ref: Ref{cfg.GetEpoch(), cfg.GetVersion(), cfg.GetHash()}, hosts: hosts.done(), backends: backends.done(), certs: certs.done()}
	if err := t.check(byName); err != nil {
		return err
	}
	s.chain = chain
	s.table.Store(t)
	return nil
}

// ApplyDelta applies d onto the version held; on any error nothing changed.
func (s *Store) ApplyDelta(d *configv1.ConfigDelta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.table.Load()
	if err := contract.Onto(s.chain.Version, d); err != nil {
		return fmt.Errorf("%w: %v", ErrNotAtBase, err) // chain.Version is set with the table
	}
	// Everything that can fail is done before the state changes.
	hosts := map[string]*vhost{}
	var rf refusals
	for _, vh := range d.GetVirtualHosts() {
		hosts[vh.GetHostname()] = compileHost(vh, &rf)
	}
	certs := map[string]*tls.Certificate{}
	for _, c := range d.GetCertificates() {
		certs[c.GetName()] = parseCert(c, &rf)
	}
	backends := make([]*backend, len(d.GetBackends()))
	for i, b := range d.GetBackends() {
		backends[i] = buildBackend(b, &rf)
	}
	if err := rf.err(); err != nil {
		return err
	}
	he, be, ce := cur.hosts.edit(), cur.backends.edit(), cur.certs.edit()
	for name, h := range hosts {
		he.set(name, h)
	}
	for _, name := range d.GetRemovedVirtualHosts() {
		he.del(name)
	}
	for _, b := range backends {
		be.set(b.name, b)
	}
	for _, name := range d.GetRemovedBackends() {
		be.del(name)
	}
	for name, c := range certs {
		ce.set(name, c)
	}
	for _, name := range d.GetRemovedCertificates() {
		ce.del(name)
	}
	t := &Table{Ref: Ref{d.GetEpoch(), d.GetVersion(), d.GetHash()}, hosts: he.done(), backends: be.done(), certs: ce.done()}
	if err := t.check(hosts); err != nil {
		return err
	}
	if _, err := s.chain.Delta(d); err != nil {
		// The state held is not the sender's base after all: it must send the complete state.
		return fmt.Errorf("%w: %v", ErrNotAtBase, err)
	}
	s.table.Store(t)
	return nil
}

// check rejects a table whose hosts (all of them for a complete state, those a delta
// changes for a delta, so that its cost is that of the change) refer to a backend or a
// certificate the table does not hold. A removal that leaves a reference dangling can only
// come with a state hash that matched, from a broken translator; it would answer 503 or fail
// the handshake, never route elsewhere.
func (t *Table) check(hosts map[string]*vhost) error {
	for name, h := range hosts {
		if _, ok := t.certs.get(h.cert); h.cert != "" && !ok {
			return fmt.Errorf("%w: virtual host %q uses certificate %q, which is not in the config", ErrRejected, name, h.cert)
		}
		for _, r := range h.routes {
			for _, b := range r.backends {
				if _, ok := t.backends.get(b.GetBackend()); !ok {
					return fmt.Errorf("%w: virtual host %q routes to backend %q, which is not in the config", ErrRejected, name, b.GetBackend())
				}
			}
			for _, m := range r.rt.GetMirrors() {
				if _, ok := t.backends.get(m.GetBackend()); !ok {
					return fmt.Errorf("%w: virtual host %q mirrors to backend %q, which is not in the config", ErrRejected, name, m.GetBackend())
				}
			}
		}
	}
	return nil
}

// parallelCompile is the number of hosts and certificates below which a complete state is
// compiled on one goroutine.
const parallelCompile = 256

type compiledHost struct {
	h  *vhost
	rf refusals
}

type parsedCert struct {
	tc *tls.Certificate
	rf refusals
}

// compileAll compiles a complete state's hosts and parses its certificates on every core:
// they are independent of each other, and parsing a private key is the largest part of a
// cold start's apply (docs/design.md, "Cold start"). Each result keeps its own refusals, so
// that they are merged in the state's order, as one goroutine would have found them.
func compileAll(vhs []*configv1.VirtualHost, cs []*configv1.Certificate) ([]compiledHost, []parsedCert) {
	hosts, certs := make([]compiledHost, len(vhs)), make([]parsedCert, len(cs))
	parallel.Ranges(len(vhs), parallelCompile, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			hosts[i].h = compileHost(vhs[i], &hosts[i].rf)
		}
	})
	// Apart from the hosts: a certificate costs far more than a host, and a range of each
	// kind per core keeps the cores evenly loaded.
	parallel.Ranges(len(cs), parallelCompile/16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			certs[i].tc = parseCert(cs[i], &certs[i].rf)
		}
	})
	return hosts, certs
}

// compileHost compiles vh's routes; a route refused is recorded in rf (the host is then not
// used: the change is refused whole).
func compileHost(vh *configv1.VirtualHost, rf *refusals) *vhost {
	h := &vhost{cert: vh.GetCertificate()}
	for _, rt := range vh.GetRoutes() {
		r, err := compileRoute(rt)
		if err != nil {
			rf.add(contract.Refusal{Host: vh.GetHostname(), Route: rt.GetName()}, fmt.Sprintf("route %s: %v", rt.GetName(), err))
			continue
		}
		h.routes = append(h.routes, r)
		h.deep = h.deep || rt.GetAnyDepth()
	}
	return h
}

// compileRoute checks rt as the reference does (contract.CompileRoute, which also compiles
// its matches, each expression once), so that a request costs no compilation.
func compileRoute(rt *configv1.Route) (*route, error) {
	m, err := contract.CompileRoute(rt)
	if err != nil {
		return nil, err
	}
	if testRule != nil {
		if err := testRule(rt); err != nil {
			return nil, err
		}
	}
	r := &route{name: rt.GetName(), rt: rt, match: m, backends: rt.GetBackends(), timeout: rt.GetTimeout().AsDuration()}
	r.clients, _ = contract.CompileAddressFilter(rt.GetClientAddresses()) // CheckRoute parsed it
	r.zone = zoneOf(rt.GetRateLimit())
	r.dial = timeoutsOf(rt.GetBackendTimeouts())
	return r, nil
}

// buildBackend builds b; TLS settings that do not compile (contract.BackendTLSConfig, which
// the translator checked them with) are recorded in rf.
func buildBackend(b *configv1.Backend, rf *refusals) *backend {
	out := &backend{name: b.GetName()}
	switch b.GetProtocol() {
	case configv1.BackendProtocol_BACKEND_PROTOCOL_H2C:
		out.protocol = protocolH2C
	case configv1.BackendProtocol_BACKEND_PROTOCOL_TLS:
		out.protocol = protocolTLS
		if bt := b.GetTls(); bt != nil {
			p, err := compileTLSProfile(bt)
			if err != nil {
				rf.add(contract.Refusal{Backend: b.GetName()}, fmt.Sprintf("backend %s: %v", b.GetName(), err))
			}
			out.tls = p
		}
	}
	for _, ep := range b.GetEndpoints() {
		if ep.GetReady() {
			out.upstreams = append(out.upstreams, &reverseproxy.Upstream{Dial: net.JoinHostPort(ep.GetAddress(), strconv.Itoa(int(ep.GetPort())))})
		}
	}
	return out
}

// parseCert parses c; a certificate refused is recorded in rf (nil).
func parseCert(c *configv1.Certificate, rf *refusals) *tls.Certificate {
	tc, err := tls.X509KeyPair(c.GetCertificatePem(), c.GetPrivateKeyPem())
	if err != nil {
		rf.add(contract.Refusal{Certificate: c.GetName()}, fmt.Sprintf("certificate %s: %v", c.GetName(), err))
		return nil
	}
	return &tls.Certificate{Certificate: tc.Certificate, PrivateKey: tc.PrivateKey, Leaf: tc.Leaf}
}

// Match returns the route for a request, nil when none matches (404): contract.Match, with
// the matches compiled.
func (t *Table) Match(req contract.Request) *route {
	for _, c := range contract.HostCandidates(req.Host) {
		vh, ok := t.hosts.get(c.Name)
		if !ok || (c.Deep && !vh.deep) {
			continue
		}
		for _, r := range vh.routes {
			if c.Deep && !r.rt.GetAnyDepth() {
				continue
			}
			if r.match.Matches(req) {
				return r
			}
		}
	}
	return nil
}

// pick chooses, by weight, a backend of r among those with ready endpoints (b, and wb, the
// entry of r's backends it was chosen as), or r's invalid share (invalid: answer 500); nil
// and not invalid when there is neither (503).
func (t *Table) pick(r *route) (b *backend, wb *configv1.WeightedBackend, invalid bool) {
	total := r.rt.GetInvalidWeight()
	for _, wb := range r.backends {
		if b, _ := t.backends.get(wb.GetBackend()); b != nil && len(b.upstreams) > 0 {
			total += max(wb.GetWeight(), 1)
		}
	}
	if total == 0 {
		return nil, nil, false
	}
	n := rand.Uint32N(total)
	for _, wb := range r.backends {
		b, _ := t.backends.get(wb.GetBackend())
		if b == nil || len(b.upstreams) == 0 {
			continue
		}
		if w := max(wb.GetWeight(), 1); n < w {
			return b, wb, false
		} else {
			n -= w
		}
	}
	return nil, nil, true
}

// pinned is the backend of r (its entry wb) and the ready endpoint that req's session
// affinity cookie names (contract.PinnedEndpoint), or nils.
func (t *Table) pinned(r *route, a *configv1.SessionAffinity, req contract.Request) (*backend, *configv1.WeightedBackend, *reverseproxy.Upstream) {
	if a == nil {
		return nil, nil, nil
	}
	v := contract.AffinityCookieValue(a, req.Header)
	if v == "" {
		return nil, nil, nil
	}
	for _, wb := range r.backends {
		b, _ := t.backends.get(wb.GetBackend())
		if b == nil {
			continue
		}
		for _, u := range b.upstreams {
			if b.affinityValue(u) == v {
				return b, wb, u
			}
		}
	}
	return nil, nil, nil
}

// affinityValue is the session affinity cookie value of endpoint u of b.
func (b *backend) affinityValue(u *reverseproxy.Upstream) string {
	host, port, _ := net.SplitHostPort(u.Dial)
	p, _ := strconv.Atoi(port)
	return contract.AffinityValue(b.name, host, uint32(p))
}

// Certificate returns the certificate for a handshake's server name (contract.CertificateFor):
// the exact host's, else the most specific wildcard's that serves the name (one label, or
// any depth for a host with such routes), else the catch-all's (a Gateway listener without
// hostname: the default certificate); nil when none has one, and the handshake fails.
func (t *Table) Certificate(serverName string) *tls.Certificate {
	for _, c := range contract.HostCandidates(serverName) {
		if vh, _ := t.hosts.get(c.Name); vh != nil && vh.cert != "" && (!c.Deep || vh.deep) {
			c, _ := t.certs.get(vh.cert)
			return c
		}
	}
	return nil
}
