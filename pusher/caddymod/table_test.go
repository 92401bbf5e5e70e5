package caddymod

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	testbackend "github.com/sluice-io/sluice/internal/backend"
	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/pki"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// get is a plain-HTTP GET of host and path, as the reference sees it.
func get(host, path string) contract.Request {
	return contract.Request{Scheme: "http", Method: http.MethodGet, Host: host, Path: path, Header: http.Header{}}
}

func goldenConfigs(t *testing.T) map[string]*configv1.Config {
	t.Helper()
	paths, err := filepath.Glob("../../translator/translate/testdata/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("golden inputs: %v", err)
	}
	out := map[string]*configv1.Config{}
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		in, _, err := translate.LoadManifests(p, data)
		if err != nil {
			t.Fatal(err)
		}
		opts := translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", Now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}
		if err := translate.CaseOptions(p, &opts); err != nil {
			t.Fatal(err)
		}
		res := translate.Translate(in, opts)
		out[filepath.Base(p)] = &configv1.Config{Epoch: "golden", Version: uint64(i + 1), Hash: contract.Hash(res), Resources: res}
	}
	return out
}

// fixtureConfig is internal/contract/testdata/dataplane.json, the data plane fixture that
// uses every field of a route, with a certificate for its host and ready endpoints.
func fixtureConfig(t *testing.T) *configv1.Config {
	t.Helper()
	data, err := os.ReadFile("../../internal/contract/testdata/dataplane.json")
	if err != nil {
		t.Fatal(err)
	}
	res := &configv1.Resources{}
	if err := protojson.Unmarshal(data, res); err != nil {
		t.Fatal(err)
	}
	crt, key, err := pki.SelfSigned("dp.example.com")
	if err != nil {
		t.Fatal(err)
	}
	res.Certificates = []*configv1.Certificate{{Name: "dp/tls", CertificatePem: crt, PrivateKeyPem: key}}
	for i, b := range res.GetBackends() {
		b.Endpoints = []*configv1.Endpoint{{Address: "10.0.0." + strconv.Itoa(i+1), Port: 8080, Ready: true}}
	}
	return &configv1.Config{Epoch: "fixture", Version: 1, Hash: contract.Hash(res), Resources: res}
}

// allConfigs are the golden cases (Ingress and Gateway API) and the data plane fixture.
func allConfigs(t *testing.T) map[string]*configv1.Config {
	t.Helper()
	out := goldenConfigs(t)
	out["dataplane.json"] = fixtureConfig(t)
	return out
}

// schemes are the probes of res over plain HTTP, and over HTTPS too, on the main listeners
// and on each further listener its routes name.
func schemes(res *configv1.Resources) []contract.Request {
	listeners := []string{""}
	for _, l := range contract.ListenersOf(res) {
		listeners = append(listeners, l.Name)
	}
	var out []contract.Request
	for _, r := range contract.Probes(res) {
		for _, l := range listeners {
			r.Listener = l
			s := r
			s.Scheme = "https"
			out = append(out, r, s)
		}
	}
	return out
}

// The module matches every golden case and the data plane fixture exactly as contract.Match,
// the reference every data plane follows: the same route for every probe (scheme, method,
// headers, query), and the same certificate per server name (contract.CertificateFor).
func TestTableMatchesLikeTheReference(t *testing.T) {
	for name, cfg := range allConfigs(t) {
		t.Run(name, func(t *testing.T) {
			s := &Store{}
			if err := s.Replace(cfg); err != nil {
				t.Fatal(err)
			}
			tb := s.Current()
			res := cfg.GetResources()
			probes := 0
			for _, req := range schemes(res) {
				for _, h := range []string{req.Host, strings.ToUpper(req.Host) + ":8443", "unlisted.example.net", ""} {
					req.Host = h
					want, got := contract.Match(res, req), tb.Match(req)
					if (want == nil) != (got == nil) || (want != nil && want.GetName() != got.name) {
						t.Errorf("%s %s://%s%s?%s %v on listener %q: module routes to %v, the reference to %v", req.Method, req.Scheme, h, req.Path, req.RawQuery, req.Header, req.Listener, got, want.GetName())
					}
					probes++
				}
			}
			certs := map[string]*tls.Certificate{}
			for _, c := range res.GetCertificates() {
				certs[c.GetName()], _ = tb.certs.get(c.GetName())
			}
			for _, vh := range res.GetVirtualHosts() {
				host := strings.Replace(vh.GetHostname(), "*.", "x.", 1)
				for _, name := range []string{host, "y." + host, strings.ToUpper(host), "unlisted.example.net", ""} {
					want, got := contract.CertificateFor(res, name), tb.Certificate(name)
					if got != certs[want] {
						t.Errorf("server name %q: certificate %v, the reference's %q", name, got != nil, want)
					}
				}
			}
			t.Logf("%d probes", probes)
		})
	}
}

// upstreamKey names a backend by what the router hands reverse_proxy of it.
func upstreamKey(protocol string, p *tlsProfile, dial string) string {
	key := protocol + " " + dial
	if p != nil {
		key += " " + fmt.Sprintf("%x", p.key)
	}
	return key
}

// The router does to every probe what the reference says (contract.OutcomeOf): 404, the
// redirect (status and Location), a CORS preflight answered by the proxy with the reference's
// header, 500 (the route's invalid share), 503, or the request handed on to a backend of the route
// with the rewritten Host and path and the request headers modified by the route and then by
// the backend picked; the route's CORS headers and then its response header
// modifier change what the backend answered.
func TestRouterDoesWhatTheReferenceSays(t *testing.T) {
	saved, savedDispatch, savedAuth := store, dispatch, authClients
	t.Cleanup(func() { store, dispatch, authClients = saved, savedDispatch, savedAuth })
	// Authentication services answer as the test backends do: /status/NNN with NNN.
	fakeAuth := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: testbackend.StatusOf(r.URL.Path), Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})}
	authClients = map[string]*http.Client{"": fakeAuth, protocolTLS: fakeAuth}
	var copies []*mirrorCopy
	dispatch = func(c *mirrorCopy) { copies = append(copies, c) }
	for name, cfg := range allConfigs(t) {
		t.Run(name, func(t *testing.T) {
			store = &Store{}
			if err := store.Replace(cfg); err != nil {
				t.Fatal(err)
			}
			res := cfg.GetResources()
			// protocol, TLS settings and first upstream's dial address -> backend name (backends
			// may share endpoints: one h2c, one verified for each of two Ingresses)
			upstreams := map[string]string{}
			for _, b := range res.GetBackends() {
				if bk, _ := store.Current().backends.get(b.GetName()); bk != nil && len(bk.upstreams) > 0 {
					upstreams[upstreamKey(bk.protocol, bk.tls, bk.upstreams[0].Dial)] = b.GetName()
				}
			}
			for _, req := range schemes(res) {
				if rt := contract.Match(res, req); rt.GetExternalAuth() != nil {
					req.AuthStatus = testbackend.StatusOf(rt.GetExternalAuth().GetPath())
				}
				want := contract.OutcomeOf(res, req)
				copies = nil
				got := routeThrough(t, req, upstreams)
				what := fmt.Sprintf("%s %s://%s%s?%s %v on listener %q", req.Method, req.Scheme, req.Host, req.Path, req.RawQuery, req.Header, req.Listener)
				if want.InvalidShare && want.Status == http.StatusOK && got.status == http.StatusInternalServerError {
					continue // the route's invalid share was drawn
				}
				if got.status != want.Status || got.location != want.Location {
					t.Errorf("%s: %d %q, want %d %q (route %s)", what, got.status, got.location, want.Status, want.Location, want.Route.GetName())
					continue
				}
				if want.Preflight {
					if got.backend != "" || !sameHeader(got.response, want.Header) {
						t.Errorf("%s: preflight answered with %v (backend %q), want %v from the proxy", what, got.response, got.backend, want.Header)
					}
					continue
				}
				if want.Status != http.StatusOK {
					continue
				}
				// The backend picked gets what the reference says it gets: the route's and then
				// its own request header modifier.
				if !slices.ContainsFunc(want.Forwards, func(f contract.Forward) bool {
					return f.Backend == got.backend && got.host == f.Host && got.path == f.Path && sameHeader(got.header, f.Header)
				}) {
					t.Errorf("%s: proxied to %s as %s %s %v, want one of %+v", what, got.backend, got.host, got.path, got.header, want.Forwards)
				}
				// Each copy is one the reference says a mirror gets (the route's forwarded
				// request); a mirror whose share is whole always gets its copy.
				for _, c := range copies {
					if !slices.ContainsFunc(want.Mirrors, func(f contract.Forward) bool {
						return f.Backend == c.backend && c.host == f.Host && c.path == f.Path && sameHeader(c.header, f.Header)
					}) {
						t.Errorf("%s: mirrored to %s as %s %s %v, want one of %+v", what, c.backend, c.host, c.path, c.header, want.Mirrors)
					}
				}
				whole := 0
				for _, m := range want.Route.GetMirrors() {
					if m.GetNumerator() == m.GetDenominator() && slices.ContainsFunc(want.Mirrors, func(f contract.Forward) bool { return f.Backend == m.GetBackend() }) {
						whole++
					}
				}
				if len(copies) < whole {
					t.Errorf("%s: %d copies, want at least the %d of whole mirrors", what, len(copies), whole)
				}
				resp := backendHeader(got.backend)
				if a := want.Route.GetSessionAffinity(); a != nil {
					// Pinned where the cookie said, or given the cookie of the endpoint reached.
					if want.Pinned != "" && got.dial != want.Pinned {
						t.Errorf("%s: sent to %s, want the pinned %s", what, got.dial, want.Pinned)
					}
					if want.Pinned == "" {
						host, port, _ := net.SplitHostPort(got.dial)
						p, _ := strconv.Atoi(port)
						resp.Add("Set-Cookie", contract.AffinityCookie(a, contract.AffinityValue(got.backend, host, uint32(p))))
					}
				}
				contract.ApplyResponseCORS(want.Route.GetCors(), req, resp)
				contract.ModifyHeaders(want.Route.GetResponseHeaders(), resp)
				if !sameHeader(got.response, resp) {
					t.Errorf("%s: response header %v, want %v", what, got.response, resp)
				}
			}
		})
	}
}

// backendHeader is what the test's next handler answers with.
func backendHeader(name string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "X-Sluice-Backend": {name}}
}

type routed struct {
	status           int
	location         string
	backend          string
	dial             string // the endpoint reverse_proxy was handed first
	host, path       string
	header, response http.Header
}

// routeThrough serves req with the Router, whose next handler stands in for reverse_proxy:
// it records what it was handed and answers as a backend.
func routeThrough(t *testing.T, req contract.Request, upstreams map[string]string) routed {
	t.Helper()
	target := req.Path
	if req.RawQuery != "" {
		target += "?" + req.RawQuery
	}
	var body io.Reader
	if req.BodySize > 0 {
		body = bytes.NewReader(bytes.Repeat([]byte("x"), int(req.BodySize)))
	}
	r := httptest.NewRequest(req.Method, "http://placeholder"+target, body)
	r.URL.Path = req.Path
	r.Host = req.Host
	r.Header = req.Header.Clone()
	if req.Client.IsValid() {
		r.RemoteAddr = netip.AddrPortFrom(req.Client, 40000).String()
	}
	if req.Scheme == "https" {
		r.TLS = &tls.ConnectionState{ServerName: req.Host}
	}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	w := httptest.NewRecorder()
	var got routed
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		ups, _ := caddyhttp.GetVar(r.Context(), upstreamsVar).([]*reverseproxy.Upstream)
		if len(ups) > 0 {
			protocol, _ := caddyhttp.GetVar(r.Context(), protocolVar).(string)
			p, _ := caddyhttp.GetVar(r.Context(), tlsVar).(*tlsProfile)
			got.backend, got.dial = upstreams[upstreamKey(protocol, p, ups[0].Dial)], ups[0].Dial
		}
		got.host, got.path, got.header = r.Host, r.URL.Path, r.Header.Clone()
		for k, v := range backendHeader(got.backend) {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusOK)
		_, err := w.Write([]byte("{}"))
		return err
	})
	if err := (&Router{Listener: req.Listener}).ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	got.status, got.location = w.Code, w.Header().Get("Location")
	if got.status == http.StatusOK || got.status == http.StatusNoContent {
		got.response = w.Header().Clone()
	}
	return got
}

func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// A table is checked whole: a route whose query expression does not compile refuses the
// whole state (422 through the admin API), naming the route; nothing of it is served.
func TestBadQueryExpressionRefusesTheWholeChange(t *testing.T) {
	cfg := fixtureConfig(t)
	s := &Store{}
	if err := s.Replace(cfg); err != nil {
		t.Fatal(err)
	}
	before := s.Current()
	bad := proto.Clone(cfg).(*configv1.Config)
	bad.Version++
	rt := bad.GetResources().GetVirtualHosts()[0].GetRoutes()[0]
	rt.Query = []*configv1.QueryMatch{{Name: "q", Value: "(", Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX}}
	bad.Hash = contract.Hash(bad.GetResources())
	err := s.Replace(bad)
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), rt.GetName()) || !strings.Contains(err.Error(), "query parameter q") {
		t.Fatalf("a bad query expression: %v, want rejected naming route %s and the parameter", err, rt.GetName())
	}
	w := httptest.NewRecorder()
	if aerr, ok := answer(w, err).(caddy.APIError); !ok || aerr.HTTPStatus != http.StatusUnprocessableEntity {
		t.Fatalf("the admin API answers %v, want 422", answer(w, err))
	}
	if s.Current() != before {
		t.Fatal("a refused state changed the table")
	}
}

// A delta applies entirely or not at all: a bad certificate or regular expression anywhere in
// it leaves the table and the state exactly as they were (the same table is served); a delta
// onto another version is refused as not at its base; a good one is swapped in whole.
func TestDeltaAppliesWholeOrNotAtAll(t *testing.T) {
	cfg := goldenConfigs(t)["tls.yaml"]
	s := &Store{}
	if err := s.Replace(cfg); err != nil {
		t.Fatal(err)
	}
	before := s.Current()
	st, err := contract.FromResources(cfg.GetResources(), cfg.GetHash())
	if err != nil {
		t.Fatal(err)
	}
	delta := func(version uint64, change func(*contract.State)) *configv1.ConfigDelta {
		next, _ := contract.StateOf(st.Resources())
		change(next)
		d := next.TakeDelta()
		d.Epoch, d.Version, d.BaseVersion, d.Hash = cfg.GetEpoch(), version, cfg.GetVersion(), next.Hash()
		return d
	}
	newHost := &configv1.VirtualHost{Hostname: "new.example.com", Routes: []*configv1.Route{{Name: "new", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}}}}

	bad := delta(cfg.GetVersion()+1, func(n *contract.State) {
		n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost)
		n.Put(contract.VirtualHosts, "bad.example.com", &configv1.VirtualHost{Hostname: "bad.example.com", Routes: []*configv1.Route{{Name: "bad",
			Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: "/a("}}}})
	})
	if err := s.ApplyDelta(bad); !errors.Is(err, ErrRejected) {
		t.Fatalf("a delta with a bad regular expression: %v, want rejected", err)
	}
	badCert := delta(cfg.GetVersion()+1, func(n *contract.State) {
		n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost)
		n.Put(contract.Certificates, "app/secure-cert", &configv1.Certificate{Name: "app/secure-cert", CertificatePem: []byte("garbage"), PrivateKeyPem: []byte("garbage")})
	})
	if err := s.ApplyDelta(badCert); !errors.Is(err, ErrRejected) {
		t.Fatalf("a delta with a bad certificate: %v, want rejected", err)
	}
	if s.Current() != before || s.chain.State.Hash() != cfg.GetHash() {
		t.Fatal("a rejected delta changed the table or the state")
	}
	if before.Match(get("new.example.com", "/")) != nil {
		t.Fatal("a rejected delta's host is routed")
	}

	good := delta(cfg.GetVersion()+1, func(n *contract.State) { n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost) })
	wrongBase := delta(cfg.GetVersion()+1, func(n *contract.State) { n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost) })
	wrongBase.BaseVersion = cfg.GetVersion() - 1
	if err := s.ApplyDelta(wrongBase); !errors.Is(err, ErrNotAtBase) {
		t.Fatalf("a delta onto another version: %v, want not at base", err)
	}
	corrupt := delta(cfg.GetVersion()+1, func(n *contract.State) { n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost) })
	corrupt.Hash = strings.Repeat("0", 64)
	if err := s.ApplyDelta(corrupt); !errors.Is(err, ErrNotAtBase) || s.Current() != before {
		t.Fatalf("a delta with another resulting hash: %v (table changed: %v), want not at base and nothing changed", err, s.Current() != before)
	}
	if err := s.ApplyDelta(good); err != nil {
		t.Fatal(err)
	}
	after := s.Current()
	if after.Match(get("new.example.com", "/")) == nil || after.Version != good.GetVersion() || s.chain.State.Hash() != good.GetHash() {
		t.Fatal("the good delta is not what the store serves")
	}
	if before.Match(get("new.example.com", "/")) != nil {
		t.Fatal("the previous table changed: a table must never change once served")
	}
}

// The Gateway API's invalid backendRefs: a route's invalid share is answered 500 in its
// proportion of the weight against the backends with a ready endpoint (a backend without
// one drops out of the draw, the invalid share never does); a route with only the invalid
// share answers 500, one with neither 503.
func TestInvalidShareAnswers500ByWeight(t *testing.T) {
	ready := &configv1.Backend{Name: "ready", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}}
	idle := &configv1.Backend{Name: "idle"}
	routeTo := func(invalid uint32, wbs ...*configv1.WeightedBackend) *configv1.Config {
		res := &configv1.Resources{
			VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{{Name: "r",
				Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, Backends: wbs, InvalidWeight: invalid}}}},
			Backends: []*configv1.Backend{idle, ready},
		}
		return &configv1.Config{Epoch: "e", Version: 1, Hash: contract.Hash(res), Resources: res}
	}
	for _, c := range []struct {
		name    string
		cfg     *configv1.Config
		invalid int // of 1000 draws, about
		want503 bool
	}{
		{name: "one valid, one invalid of equal weight", cfg: routeTo(1, &configv1.WeightedBackend{Backend: "ready", Weight: 1}), invalid: 500},
		{name: "invalid share 1 of 4", cfg: routeTo(10, &configv1.WeightedBackend{Backend: "ready", Weight: 30}), invalid: 250},
		{name: "only an invalid share", cfg: routeTo(1), invalid: 1000},
		{name: "invalid share and a backend without endpoints", cfg: routeTo(1, &configv1.WeightedBackend{Backend: "idle", Weight: 5}), invalid: 1000},
		{name: "no invalid share, no ready endpoint", cfg: routeTo(0, &configv1.WeightedBackend{Backend: "idle", Weight: 1}), want503: true},
		{name: "no invalid share", cfg: routeTo(0, &configv1.WeightedBackend{Backend: "ready", Weight: 1})},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Store{}
			if err := s.Replace(c.cfg); err != nil {
				t.Fatal(err)
			}
			tb := s.Current()
			r := tb.Match(get("a.example.com", "/"))
			const draws = 1000
			invalid, unavailable := 0, 0
			for range draws {
				b, _, inv := tb.pick(r)
				switch {
				case inv:
					invalid++
				case b == nil:
					unavailable++
				}
			}
			if c.want503 != (unavailable == draws) || (!c.want503 && unavailable != 0) {
				t.Fatalf("%d of %d draws found no backend, want 503: %v", unavailable, draws, c.want503)
			}
			// Within 10 standard deviations of a fair draw: never flaky, still exact at 0 and 1000.
			if d := invalid - c.invalid; d < -160 || d > 160 || (c.invalid == 0) != (invalid == 0) || (c.invalid == draws) != (invalid == draws) {
				t.Fatalf("%d of %d draws were the invalid share, want about %d", invalid, draws, c.invalid)
			}
			want := contract.OutcomeOf(c.cfg.GetResources(), get("a.example.com", "/"))
			if (c.invalid == draws) != (want.Status == http.StatusInternalServerError) || (c.invalid > 0) != want.InvalidShare || c.want503 != (want.Status == http.StatusServiceUnavailable) {
				t.Fatalf("the reference says %d (invalid share %v)", want.Status, want.InvalidShare)
			}
		})
	}
}

// Route.max_request_body_bytes on a body of unknown length (chunked): it is cut at the limit,
// and the answer is 413 whatever the next handler made of the cut (reverse_proxy: 502); a
// body within the limit reaches the next handler whole.
func TestChunkedBodyOverTheLimitIs413(t *testing.T) {
	saved := store
	t.Cleanup(func() { store = saved })
	store = &Store{}
	cfg := &configv1.Config{Epoch: "e", Version: 1, Resources: &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{{Name: "r",
			Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, MaxRequestBodyBytes: 8,
			Backends: []*configv1.WeightedBackend{{Backend: "b", Weight: 1}}}}}},
		Backends: []*configv1.Backend{{Name: "b", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}}}}}
	cfg.Hash = translate.Hash(cfg.GetResources())
	if err := store.Replace(cfg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body string
		want int // 0: handed on whole
	}{{"12345678", 0}, {"123456789", http.StatusRequestEntityTooLarge}} {
		r := httptest.NewRequest(http.MethodPost, "http://a.example.com/up", io.NopCloser(strings.NewReader(tc.body)))
		r.ContentLength = -1
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		var got []byte
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			b, err := io.ReadAll(r.Body)
			got = b
			if err != nil {
				return caddyhttp.Error(http.StatusBadGateway, err) // as reverse_proxy does
			}
			return nil
		})
		err := (&Router{}).ServeHTTP(httptest.NewRecorder(), r, next)
		var he caddyhttp.HandlerError
		switch {
		case tc.want == 0 && (err != nil || string(got) != tc.body):
			t.Errorf("body %q: %v, handed on %q", tc.body, err, got)
		case tc.want != 0 && (!errors.As(err, &he) || he.StatusCode != tc.want):
			t.Errorf("body %q: %v, want a %d", tc.body, err, tc.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
