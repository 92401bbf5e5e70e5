package main_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// Route.session_affinity through a real Caddy, on both targets: a client without the cookie
// is sent where the route sends it and gets the cookie; with it, it stays on that endpoint,
// request after request; when that endpoint is no longer ready it is sent to another and
// gets a new cookie. With the module the cookie is the protocol's (contract.AffinityCookie:
// its value names the endpoint, its Path the route's); stock Caddy sets its own cookie
// policy's.
func TestSessionAffinityPinsAClientToItsEndpoint(t *testing.T) {
	for _, target := range []string{"module", "load"} {
		t.Run(target, func(t *testing.T) { affinityOn(t, target == "load") })
	}
}

func affinityOn(t *testing.T, stock bool) {
	n := testenv.SharedNet(t)
	one, err := n.StartBackend("one")
	if err != nil {
		t.Fatal(err)
	}
	two, err := n.StartBackend("two")
	if err != nil {
		t.Fatal(err)
	}
	fake, addr := startFake(t)
	e := startPusherOn(t, stock, addr)
	s := fake.nextStream(t)
	affinity := &configv1.SessionAffinity{CookieName: "INGRESSCOOKIE", Path: "/cart", MaxAgeSeconds: 3600}
	config := func(version uint64, ready ...*testenv.Backend) *configv1.Config {
		var eps []*configv1.Endpoint
		for _, b := range []*testenv.Backend{one, two} {
			eps = append(eps, &configv1.Endpoint{Address: b.Address, Port: uint32(b.Port), Ready: b == ready[0] || len(ready) > 1 && b == ready[1]})
		}
		res := &configv1.Resources{
			VirtualHosts: []*configv1.VirtualHost{{Hostname: "sticky.example.com", Routes: []*configv1.Route{{Name: "r",
				Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/cart"}, SessionAffinity: affinity,
				Backends: []*configv1.WeightedBackend{{Backend: "be", Weight: 1}}}}}},
			Backends: []*configv1.Backend{{Name: "be", Endpoints: eps}},
		}
		return &configv1.Config{Epoch: "e1", Version: version, Hash: translate.Hash(res), Resources: res}
	}
	both := config(1, one, two)
	_ = s.send(marker("e1", 1))
	_ = s.send(configMsg(both))
	e.waitConfig(t, both)

	send := func(cookie *http.Cookie) (string, *http.Cookie) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/cart/items", e.caddy.HTTPPort), nil)
		req.Host = "sticky.example.com"
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := oneShot.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var set *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == affinity.GetCookieName() {
				set = c
			}
		}
		return answer(resp), set
	}

	first, cookie := send(nil)
	if cookie == nil {
		t.Fatalf("the first answer (from %s) sets no %s cookie", first, affinity.GetCookieName())
	}
	byName := map[string]*testenv.Backend{"one": one, "two": two}
	if !stock {
		b := byName[first]
		if want := contract.AffinityValue("be", b.Address, uint32(b.Port)); cookie.Value != want || cookie.Path != "/cart" || !cookie.HttpOnly || cookie.MaxAge != 3600 {
			t.Errorf("cookie %v, want value %s, Path /cart, HttpOnly, Max-Age 3600", cookie, want)
		}
	}
	for i := range 15 {
		if got, set := send(cookie); got != first || set != nil && set.Value != cookie.Value {
			t.Fatalf("request %d with the cookie: answered by %s (cookie %v), want %s as the first", i, got, set, first)
		}
	}
	seen := map[string]bool{}
	for range 40 {
		got, _ := send(nil)
		seen[got] = true
	}
	if !seen["one"] || !seen["two"] {
		t.Errorf("without the cookie 40 requests reached %v, want both endpoints", seen)
	}

	// The pinned endpoint is no longer ready: the client moves, and is pinned anew.
	other := two
	if first == "two" {
		other = one
	}
	moved := config(2, other)
	_ = s.send(configMsg(moved))
	e.waitConfig(t, moved)
	got, set := send(cookie)
	if got != other.Name || set == nil || set.Value == cookie.Value {
		t.Fatalf("with the cookie of an endpoint no longer ready: answered by %s, cookie %v; want %s and a new cookie", got, set, other.Name)
	}
	if got, _ := send(set); got != other.Name {
		t.Errorf("with the new cookie: %s, want %s", got, other.Name)
	}
}
