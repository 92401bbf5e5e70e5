package caddymod

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// rateLimited installs one virtual host whose routes /a and /b share the zone of l, and /c
// has a zone of its own with the same values, with the clock at the returned *time.Time.
func rateLimited(t *testing.T, l *configv1.RateLimit) *time.Time {
	t.Helper()
	savedStore, savedNow := store, now
	t.Cleanup(func() { store, now = savedStore, savedNow })
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now = func() time.Time { return clock }
	other := &configv1.RateLimit{Zone: "other", RequestsPerSecond: l.GetRequestsPerSecond(), RequestsPerMinute: l.GetRequestsPerMinute(),
		BurstMultiplier: l.GetBurstMultiplier(), Connections: l.GetConnections(), Exempt: l.GetExempt()}
	rt := func(path string, l *configv1.RateLimit) *configv1.Route {
		return &configv1.Route{Name: path, Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: path},
			RateLimit: l, Backends: []*configv1.WeightedBackend{{Backend: "b", Weight: 1}}}
	}
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{rt("/a", l), rt("/b", l), rt("/c", other)}}},
		Backends:     []*configv1.Backend{{Name: "b", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}}}}
	store = &Store{}
	if err := store.Replace(&configv1.Config{Epoch: "e", Version: 1, Hash: translate.Hash(res), Resources: res}); err != nil {
		t.Fatal(err)
	}
	return &clock
}

// status sends one request from client to path; block, when set, holds the request in the
// backend until it is closed.
func status(t *testing.T, client, path string, block chan struct{}) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://a.example.com"+path, nil)
	r.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr(client), 5000).String()
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if block != nil {
			<-block
		}
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if err := (&Router{}).ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	return w.Code
}

// Route.rate_limit, requests per second: burst+1 requests of one client pass at once, the
// next is 503; the excess drains at the rate; another client, an exempt one and another zone
// are counted apart; the routes of one zone count together.
func TestRateLimitAsNginxLimitReq(t *testing.T) {
	clock := rateLimited(t, &configv1.RateLimit{Zone: "z", RequestsPerSecond: 2, BurstMultiplier: 2, Exempt: []string{"192.0.2.0/24"}})
	want := func(what, client, path string, code int) {
		t.Helper()
		if got := status(t, client, path, nil); got != code {
			t.Errorf("%s: %s %s: %d, want %d", what, client, path, got, code)
		}
	}
	// Burst 4: five at once, on either route of the zone.
	for i := range 5 {
		want("within the burst", "10.0.0.1", []string{"/a", "/b"}[i%2], http.StatusOK)
	}
	want("over the burst", "10.0.0.1", "/a", http.StatusServiceUnavailable)
	want("over the burst, the zone's other route", "10.0.0.1", "/b", http.StatusServiceUnavailable)
	want("another zone", "10.0.0.1", "/c", http.StatusOK)
	want("another client", "10.0.0.2", "/a", http.StatusOK)
	for range 10 {
		want("an exempt client", "192.0.2.7", "/a", http.StatusOK)
	}
	*clock = clock.Add(500 * time.Millisecond) // one request drained at 2/s
	want("drained by one", "10.0.0.1", "/a", http.StatusOK)
	want("and no more", "10.0.0.1", "/a", http.StatusServiceUnavailable)
	*clock = clock.Add(10 * time.Second)
	for range 5 {
		want("drained whole", "10.0.0.1", "/b", http.StatusOK)
	}
}

// Route.rate_limit, requests per minute and connections: both apply; a request over one is
// refused without counting against the other.
func TestRateLimitPerMinuteAndConnections(t *testing.T) {
	clock := rateLimited(t, &configv1.RateLimit{Zone: "z", RequestsPerMinute: 60, BurstMultiplier: 1, Connections: 2})
	block := make(chan struct{})
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- status(t, "10.0.0.1", "/a", block) }()
	}
	// Two requests held in progress; wait until the zone counts them.
	for inFlight("10.0.0.1") != 2 {
		runtime.Gosched()
	}
	if got := status(t, "10.0.0.1", "/a", nil); got != http.StatusServiceUnavailable {
		t.Errorf("a third request in progress: %d, want 503", got)
	}
	close(block)
	for range 2 {
		if c := <-done; c != http.StatusOK {
			t.Errorf("a held request: %d", c)
		}
	}
	// 60/min with burst 60: 61 at once were allowed; two are taken, the refused one was not.
	for i := range 59 {
		if got := status(t, "10.0.0.1", "/a", nil); got != http.StatusOK {
			t.Fatalf("request %d within the minute's burst: %d", i+3, got)
		}
	}
	if got := status(t, "10.0.0.1", "/a", nil); got != http.StatusServiceUnavailable {
		t.Errorf("over the minute's burst: %d, want 503", got)
	}
	*clock = clock.Add(time.Second) // one drained at 1/s
	if got := status(t, "10.0.0.1", "/a", nil); got != http.StatusOK {
		t.Errorf("a second later: %d, want 200", got)
	}
}

// inFlight is how many requests of client the zone of route /a holds in progress.
func inFlight(client string) uint32 {
	rt := store.Current().Match(contract.Request{Scheme: "http", Host: "a.example.com", Method: http.MethodGet, Path: "/a", Header: http.Header{}})
	z := rt.zone
	z.mu.Lock()
	defer z.mu.Unlock()
	if c := z.clients[netip.MustParseAddr(client)]; c != nil {
		return c.inFlight
	}
	return 0
}

// Route.external_auth in the module: the service is asked with the request's header and
// who asked for what; a request that passes carries the answer's ResponseHeaders (and no
// other of its headers); a 401 carries the service's WWW-Authenticate and nothing else of
// its answer (nginx's style); in the Gateway API's style a denial is the service's answer,
// its headers (not the framing ones) and body.
func TestExternalAuthAsksAndCopiesHeaders(t *testing.T) {
	savedStore, savedAuth := store, authClients
	t.Cleanup(func() { store, authClients = savedStore, savedAuth })
	var asked *http.Request
	fake := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		asked = r
		if r.Host == "g.example.com" { // the Gateway API style sends the request's Host
			return &http.Response{StatusCode: http.StatusForbidden, Request: r, Body: io.NopCloser(strings.NewReader("denied by policy\n")),
				Header: http.Header{"X-Reason": {"policy"}, "Content-Type": {"text/x-policy"}, "Connection": {"close"}, "Content-Length": {"17"}}}, nil
		}
		h := http.Header{"X-Auth-User": {"ann"}, "X-Other": {"no"}, "Www-Authenticate": {`Basic realm="x"`}}
		code := http.StatusOK
		if r.Header.Get("Authorization") == "" {
			code = http.StatusUnauthorized
		}
		return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: r}, nil
	})}
	authClients = map[string]*http.Client{"": fake}
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{{Name: "r",
			Path:         &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
			ExternalAuth: &configv1.ExternalAuth{Backend: "auth", Host: "auth.app.svc", Path: "/check?x=1", ResponseHeaders: []string{"X-Auth-User"}},
			Backends:     []*configv1.WeightedBackend{{Backend: "b", Weight: 1}}}}},
			{Hostname: "g.example.com", Routes: []*configv1.Route{{Name: "g",
				Path:         &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
				ExternalAuth: &configv1.ExternalAuth{Backend: "auth", Path: "/", Style: configv1.ExternalAuthStyle_EXTERNAL_AUTH_STYLE_GATEWAY_API},
				Backends:     []*configv1.WeightedBackend{{Backend: "b", Weight: 1}}}}}},
		Backends: []*configv1.Backend{
			{Name: "b", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}},
			{Name: "auth", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.9", Port: 8080, Ready: true}}}}}
	store = &Store{}
	if err := store.Replace(&configv1.Config{Epoch: "e", Version: 1, Hash: translate.Hash(res), Resources: res}); err != nil {
		t.Fatal(err)
	}
	serve := func(authz string, host ...string) (*httptest.ResponseRecorder, http.Header) {
		h := "a.example.com"
		if len(host) > 0 {
			h = host[0]
		}
		r := httptest.NewRequest(http.MethodPost, "http://"+h+"/cart?id=1", nil)
		r.RemoteAddr = "192.0.2.9:5000"
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		w := httptest.NewRecorder()
		var forwarded http.Header
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			forwarded = r.Header.Clone()
			w.WriteHeader(http.StatusOK)
			return nil
		})
		if err := (&Router{}).ServeHTTP(w, r, next); err != nil {
			t.Fatal(err)
		}
		return w, forwarded
	}
	w, fwd := serve("Bearer x")
	if w.Code != http.StatusOK || fwd.Get("X-Auth-User") != "ann" || fwd.Get("X-Other") != "" {
		t.Errorf("passed: %d, forwarded %v; want 200 with X-Auth-User and nothing else of the answer", w.Code, fwd)
	}
	if asked.Method != http.MethodGet || asked.URL.String() != "http://10.0.0.9:8080/check?x=1" || asked.Host != "auth.app.svc" ||
		asked.Header.Get("X-Original-Url") != "http://a.example.com/cart?id=1" || asked.Header.Get("X-Original-Method") != http.MethodPost ||
		asked.Header.Get("X-Forwarded-For") != "192.0.2.9" || asked.Header.Get("Authorization") != "Bearer x" {
		t.Errorf("asked %s %s Host %s %v", asked.Method, asked.URL, asked.Host, asked.Header)
	}
	w, fwd = serve("")
	if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != `Basic realm="x"` || w.Header().Get("X-Other") != "" || fwd != nil {
		t.Errorf("refused: %d %v, forwarded %v; want 401 with the challenge alone, nothing forwarded", w.Code, w.Header(), fwd)
	}
	w, fwd = serve("Bearer x", "g.example.com")
	if w.Code != http.StatusForbidden || w.Header().Get("X-Reason") != "policy" || w.Header().Get("Content-Type") != "text/x-policy" ||
		w.Header().Get("Connection") != "" || w.Body.String() != "denied by policy\n" || fwd != nil {
		t.Errorf("refused in the Gateway API style: %d %v %q, forwarded %v; want the service's 403, its headers and body", w.Code, w.Header(), w.Body.String(), fwd)
	}
}

// docs/translation.md, "Routing order": a rate limit counts what reaches nginx's preaccess
// phase, so a redirect and a CORS preflight, which its rewrite phase answers, are answered
// however many come and leave the client's allowance whole.
func TestRateLimitDoesNotCountRedirectsOrPreflights(t *testing.T) {
	savedStore, savedNow := store, now
	t.Cleanup(func() { store, now = savedStore, savedNow })
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now = func() time.Time { return clock }
	l := &configv1.RateLimit{Zone: "z", RequestsPerSecond: 1, BurstMultiplier: 1}
	rt := func(path string) *configv1.Route {
		return &configv1.Route{Name: path, Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: path},
			RateLimit: l, Backends: []*configv1.WeightedBackend{{Backend: "b", Weight: 1}},
			Cors: &configv1.Cors{AllowOrigins: []string{"*"}, AllowMethods: []string{"GET"}}}
	}
	moved := rt("/old")
	moved.Backends, moved.Redirect = nil, &configv1.Redirect{Location: "https://example.org/new", StatusCode: 301}
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{rt("/a"), moved}}},
		Backends:     []*configv1.Backend{{Name: "b", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}}}}
	store = &Store{}
	if err := store.Replace(&configv1.Config{Epoch: "e", Version: 1, Hash: translate.Hash(res), Resources: res}); err != nil {
		t.Fatal(err)
	}
	send := func(method, path string, preflight bool) int {
		t.Helper()
		r := httptest.NewRequest(method, "http://a.example.com"+path, nil)
		r.RemoteAddr = "10.0.0.9:5000"
		if preflight {
			r.Header.Set("Origin", "https://app.example.org")
			r.Header.Set("Access-Control-Request-Method", "GET")
		}
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		w := httptest.NewRecorder()
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(http.StatusOK); return nil })
		if err := (&Router{}).ServeHTTP(w, r, next); err != nil {
			t.Fatal(err)
		}
		return w.Code
	}
	for range 10 {
		if got := send(http.MethodGet, "/old", false); got != http.StatusMovedPermanently {
			t.Fatalf("redirect: %d, want 301", got)
		}
		if got := send(http.MethodOptions, "/a", true); got != http.StatusNoContent {
			t.Fatalf("preflight: %d, want 204", got)
		}
	}
	// Burst 1: two at once, then 503.
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusServiceUnavailable} {
		if got := send(http.MethodGet, "/a", false); got != want {
			t.Fatalf("request %d after the redirects and preflights: %d, want %d", i+1, got, want)
		}
	}
}
