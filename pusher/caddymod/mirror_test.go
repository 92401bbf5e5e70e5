package caddymod

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// seen is what a mirror backend received.
type seen struct {
	method, host, uri, body string
	header                  http.Header
}

// mirrorBackend is an httptest server that reports every request on the channel returned,
// answering after release is closed (nil: at once).
func mirrorBackend(t *testing.T, release chan struct{}) (*httptest.Server, <-chan seen) {
	t.Helper()
	got := make(chan seen, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Host, r.RequestURI, string(body), r.Header.Clone()}
		if release != nil {
			<-release
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// mirroredConfig routes a.example.com/ to web (an address nothing listens on: the test's next
// handler stands in for reverse_proxy) with the mirrors given, to backend "copy" at addr.
func mirroredConfig(t *testing.T, addr string, ms ...*configv1.Mirror) *configv1.Config {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{{Name: "r",
			Path:           &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
			Rewrite:        &configv1.Rewrite{Path: &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL, Value: "/inner"}},
			RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X-Route", Value: "r"}}, Remove: []string{"X-Secret"}},
			Backends:       []*configv1.WeightedBackend{{Backend: "web", Weight: 1, RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X-Backend", Value: "web"}}}}},
			Mirrors:        ms}}}},
		Backends: []*configv1.Backend{
			{Name: "web", Endpoints: []*configv1.Endpoint{{Address: "192.0.2.1", Port: 80, Ready: true}}},
			{Name: "copy", Endpoints: []*configv1.Endpoint{{Address: host, Port: uint32(p), Ready: true}}},
		},
	}
	return &configv1.Config{Epoch: "e", Version: 1, Hash: contract.Hash(res), Resources: res}
}

// useConfig makes cfg the store's, with a fresh mirror sender of inFlight slots, for the
// test's duration.
func useConfig(t *testing.T, cfg *configv1.Config, inFlight int) *mirrorSender {
	t.Helper()
	savedStore, savedMirrors := store, mirrors
	t.Cleanup(func() { store, mirrors = savedStore, savedMirrors })
	store, mirrors = &Store{}, newMirrorSender(inFlight)
	if err := store.Replace(cfg); err != nil {
		t.Fatal(err)
	}
	return mirrors
}

// serve sends a POST with body through the Router; next records the body the backend gets.
func serve(t *testing.T, body string) (code int, backendBody string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://a.example.com/outer?id=7", strings.NewReader(body))
	r.Header.Set("X-Client", "c")
	r.Header.Set("X-Secret", "s")
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		backendBody = string(b)
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if err := (&Router{}).ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	return w.Code, backendBody
}

func waitSeen(t *testing.T, got <-chan seen) seen {
	t.Helper()
	select {
	case s := <-got:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the mirror got no copy")
		return seen{}
	}
}

// A mirror gets a copy of the request as the route forwards it (method, rewritten path,
// query, the route's request header modifier but not the picked backend's, the body), and
// the backend gets the request and its body unchanged.
func TestMirrorGetsTheRoutesForwardedRequest(t *testing.T) {
	srv, got := mirrorBackend(t, nil)
	useConfig(t, mirroredConfig(t, srv.Listener.Addr().String(), &configv1.Mirror{Backend: "copy", Numerator: 1, Denominator: 1}), 4)
	code, body := serve(t, "hello")
	if code != http.StatusOK || body != "hello" {
		t.Fatalf("client answered %d, backend got body %q; want 200 and hello", code, body)
	}
	s := waitSeen(t, got)
	if s.method != http.MethodPost || s.uri != "/inner?id=7" || s.host != "a.example.com" || s.body != "hello" {
		t.Errorf("mirror got %s %s (host %s) body %q, want POST /inner?id=7 a.example.com hello", s.method, s.uri, s.host, s.body)
	}
	if s.header.Get("X-Route") != "r" || s.header.Get("X-Client") != "c" || s.header.Get("X-Secret") != "" || s.header.Get("X-Backend") != "" {
		t.Errorf("mirror got header %v, want the route's modifier applied, not the backend's", s.header)
	}
}

// Several mirrors each get their copy.
func TestEveryMirrorGetsItsCopy(t *testing.T) {
	srv, got := mirrorBackend(t, nil)
	whole := &configv1.Mirror{Backend: "copy", Numerator: 1, Denominator: 1}
	useConfig(t, mirroredConfig(t, srv.Listener.Addr().String(), whole, whole, whole), 4)
	if code, _ := serve(t, ""); code != http.StatusOK {
		t.Fatalf("client answered %d", code)
	}
	for range 3 {
		waitSeen(t, got)
	}
}

// A mirror that does not answer neither delays nor changes the client's answer, and once
// the copies in flight reach the bound, further copies are dropped and counted.
func TestASlowMirrorNeverHoldsTheClientAndIsBounded(t *testing.T) {
	release := make(chan struct{})
	srv, got := mirrorBackend(t, release)
	defer close(release) // before srv.Close, which waits for the handlers
	s := useConfig(t, mirroredConfig(t, srv.Listener.Addr().String(), &configv1.Mirror{Backend: "copy", Numerator: 1, Denominator: 1}), 2)
	for i := range 5 {
		if code, _ := serve(t, "x"); code != http.StatusOK {
			t.Fatalf("request %d answered %d while the mirror hangs", i, code)
		}
		if i < 2 {
			waitSeen(t, got) // the copy holds its slot until released
		}
	}
	if st := s.stats(); st.Dropped != 3 {
		t.Errorf("stats %+v, want the 3 copies over the bound of 2 dropped", st)
	}
}

// A request whose body is too large or of unknown length is not mirrored (its copy is
// dropped and counted), and the backend still gets the whole body.
func TestABodyTooLargeToCopyIsNotMirrored(t *testing.T) {
	srv, got := mirrorBackend(t, nil)
	s := useConfig(t, mirroredConfig(t, srv.Listener.Addr().String(), &configv1.Mirror{Backend: "copy", Numerator: 1, Denominator: 1}), 4)
	big := strings.Repeat("b", maxMirrorBody+1)
	if code, body := serve(t, big); code != http.StatusOK || body != big {
		t.Fatalf("client answered %d, backend got %d bytes; want 200 and all %d", code, len(body), len(big))
	}
	if st := s.stats(); st.Dropped != 1 || len(got) != 0 {
		t.Errorf("stats %+v with %d copies, want one dropped and none sent", st, len(got))
	}
}

// A mirror gets its share of the requests: none at 0, all at 1, about half at 1/2.
func TestAMirrorIsDrawnByItsShare(t *testing.T) {
	const draws = 10000
	for _, c := range []struct {
		num, den uint32
		want     int
	}{{0, 100, 0}, {100, 100, draws}, {25, 50, draws / 2}, {20, 100, draws / 5}} {
		n := 0
		for range draws {
			if drawn(&configv1.Mirror{Backend: "m", Numerator: c.num, Denominator: c.den}) {
				n++
			}
		}
		// Within 10 standard deviations: never flaky, exact at 0 and 1.
		if d := n - c.want; d < -500 || d > 500 || (c.want == 0) != (n == 0) || (c.want == draws) != (n == draws) {
			t.Errorf("%d/%d drew %d of %d, want about %d", c.num, c.den, n, draws, c.want)
		}
	}
}
