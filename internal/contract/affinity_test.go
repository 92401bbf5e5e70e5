package contract

import (
	"net/http"
	"strings"
	"testing"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Route.session_affinity in the reference: a cookie that names a ready endpoint of a backend
// of the route sends the request there, whatever the weights; one that names an endpoint no
// longer ready, another backend's, or nothing, leaves the route's choice; the cookie the
// proxy sets carries the route's attributes.
func TestSessionAffinityPinsToTheNamedEndpoint(t *testing.T) {
	a := &configv1.SessionAffinity{CookieName: "INGRESSCOOKIE", Path: "/cart", MaxAgeSeconds: 60, Secure: true, SameSite: "Lax"}
	rt := &configv1.Route{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, SessionAffinity: a,
		Backends: []*configv1.WeightedBackend{{Backend: "main", Weight: 90}, {Backend: "canary", Weight: 10}}}
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{rt}}},
		Backends: []*configv1.Backend{
			{Name: "main", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}, {Address: "10.0.0.2", Port: 80}}},
			{Name: "canary", Endpoints: []*configv1.Endpoint{{Address: "10.0.1.1", Port: 80, Ready: true}}},
			{Name: "elsewhere", Endpoints: []*configv1.Endpoint{{Address: "10.0.9.9", Port: 80, Ready: true}}},
		}}
	for _, tc := range []struct {
		name, cookie string
		backends     string
		pinned       string
	}{
		{"no cookie", "", "main canary", ""},
		{"the canary's endpoint", AffinityValue("canary", "10.0.1.1", 80), "canary", "10.0.1.1:80"},
		{"main's endpoint", AffinityValue("main", "10.0.0.1", 80), "main", "10.0.0.1:80"},
		{"an endpoint no longer ready", AffinityValue("main", "10.0.0.2", 80), "main canary", ""},
		{"another route's backend", AffinityValue("elsewhere", "10.0.9.9", 80), "main canary", ""},
		{"garbage", "zzz", "main canary", ""},
	} {
		h := http.Header{}
		if tc.cookie != "" {
			h.Set("Cookie", "other=1; INGRESSCOOKIE="+tc.cookie)
		}
		o := OutcomeOf(res, Request{Scheme: "https", Host: "a.example.com", Method: http.MethodGet, Path: "/cart", Header: h})
		if got := strings.Join(o.Backends, " "); got != tc.backends || o.Pinned != tc.pinned {
			t.Errorf("%s: backends %q pinned %q, want %q %q", tc.name, got, o.Pinned, tc.backends, tc.pinned)
		}
	}
	c := AffinityCookie(a, "abc")
	for _, want := range []string{"INGRESSCOOKIE=abc", "Path=/cart", "Max-Age=60", "HttpOnly", "Secure", "SameSite=Lax"} {
		if !strings.Contains(c, want) {
			t.Errorf("cookie %q lacks %s", c, want)
		}
	}
	if err := CheckSessionAffinity(&configv1.SessionAffinity{CookieName: "a b"}); err == nil {
		t.Error("a cookie name with a space was accepted")
	}
	if err := CheckSessionAffinity(&configv1.SessionAffinity{CookieName: "a", Path: "/x;y"}); err == nil {
		t.Error("a cookie path with ';' was accepted")
	}
}
