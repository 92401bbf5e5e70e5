package contract

import (
	"net/http"
	"net/netip"
	"testing"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Route.external_auth, as nginx's auth_request: 2xx passes, 401 is 401 (or a 302 to the
// sign-in URL with rd= the original URL), 403 is 403, anything else or no answer is 500; the
// service gets the request's header without its body's, and who asked for what.
func TestExternalAuthDecidesAsAuthRequest(t *testing.T) {
	signin := &configv1.ExternalAuth{SigninUrl: "https://login.example.com/start?app=shop"}
	for _, tc := range []struct {
		a        *configv1.ExternalAuth
		status   int
		code     int
		location string
	}{
		{&configv1.ExternalAuth{}, 200, 0, ""},
		{&configv1.ExternalAuth{}, 204, 0, ""},
		{&configv1.ExternalAuth{}, 401, 401, ""},
		{&configv1.ExternalAuth{}, 403, 403, ""},
		{&configv1.ExternalAuth{}, 302, 500, ""},
		{&configv1.ExternalAuth{}, 404, 500, ""},
		{&configv1.ExternalAuth{}, 0, 500, ""},
		{signin, 401, 302, "https://login.example.com/start?app=shop&rd=https%3A%2F%2Fshop.example.com%2Fcart%3Fid%3D1"},
		{signin, 403, 403, ""},
	} {
		code, loc := AuthDecision(tc.a, tc.status, "https://shop.example.com/cart?id=1")
		if code != tc.code || loc != tc.location {
			t.Errorf("signin %q, service answered %d: %d %q, want %d %q", tc.a.GetSigninUrl(), tc.status, code, loc, tc.code, tc.location)
		}
	}
	req := Request{Scheme: "https", Host: "shop.example.com", Method: http.MethodPost, Path: "/cart", RawQuery: "id=1",
		Header: http.Header{"Cookie": {"s=1"}, "Content-Length": {"12"}, "Authorization": {"Bearer x"}}, Client: netip.MustParseAddr("192.0.2.9")}
	method, path, h, original := AuthRequest(&configv1.ExternalAuth{Path: "/check"}, req)
	if method != http.MethodGet || path != "/check" {
		t.Errorf("asked %s %s, want GET /check", method, path)
	}
	want := map[string]string{"Cookie": "s=1", "Authorization": "Bearer x", "Content-Length": "", "X-Original-Url": "https://shop.example.com/cart?id=1",
		"X-Original-Method": "POST", "X-Real-Ip": "192.0.2.9", "X-Forwarded-For": "192.0.2.9", "X-Auth-Request-Redirect": "/cart?id=1"}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("auth request header %s = %q, want %q", k, got, v)
		}
	}
	if original != "https://shop.example.com/cart?id=1" {
		t.Errorf("original URL %q", original)
	}
	if req.Header.Get("X-Original-Url") != "" {
		t.Error("the request's own header was changed")
	}
	for _, bad := range []*configv1.ExternalAuth{
		{Host: "a", Path: "/"},
		{Backend: "b", Host: "a", Path: "no-slash"},
		{Backend: "b", Host: "a b", Path: "/"},
		{Backend: "b", Host: "a", Path: "/", SigninUrl: "javascript:alert(1)"},
	} {
		if CheckExternalAuth(bad) == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}

// Route.external_auth in the Gateway API's style (its HTTP ExternalAuth filter): the
// request's method and the filter's path before the request's path and query, with Host,
// Authorization and the allowed headers only; 200 passes, any other answer is the client's,
// no answer 403; without allowed response headers every header of the answer but Host and
// the connection's is copied; and the question comes before a redirect.
func TestExternalAuthInTheGatewayAPIStyle(t *testing.T) {
	a := &configv1.ExternalAuth{Style: configv1.ExternalAuthStyle_EXTERNAL_AUTH_STYLE_GATEWAY_API, Backend: "auth", Path: "/check/", RequestHeaders: []string{"X-Tenant"}}
	req := Request{Scheme: "http", Host: "shop.example.com", Method: http.MethodPut, Path: "/cart", RawQuery: "id=1",
		Header: http.Header{"Cookie": {"s=1"}, "Authorization": {"Bearer x"}, "X-Tenant": {"t1"}}, Client: netip.MustParseAddr("192.0.2.9")}
	method, path, h, _ := AuthRequest(a, req)
	if method != http.MethodPut || path != "/check/cart?id=1" || h.Get("Authorization") != "Bearer x" || h.Get("X-Tenant") != "t1" || h.Get("Cookie") != "" || h.Get("X-Original-Url") != "" {
		t.Errorf("asked %s %s %v", method, path, h)
	}
	for status, want := range map[int]int{200: 0, 204: 204, 401: 401, 403: 403, 302: 302, 0: 403} {
		if code, _ := AuthDecision(a, status, "http://shop.example.com/cart"); code != want {
			t.Errorf("answer %d: %d, want %d", status, code, want)
		}
	}
	got := AuthPassHeaders(a, http.Header{"X-User": {"ann"}, "Host": {"x"}, "Content-Length": {"0"}, "Connection": {"close"}})
	if len(got) != 1 || got[0] != "X-User" {
		t.Errorf("copied %v, want X-User alone", got)
	}
	rt := &configv1.Route{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, ExternalAuth: a,
		Redirect: &configv1.Redirect{Scheme: "https", StatusCode: 301}}
	res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{{Hostname: "shop.example.com", Routes: []*configv1.Route{rt}}},
		Backends: []*configv1.Backend{{Name: "auth", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}}}}
	req.AuthStatus = 401
	if o := OutcomeOf(res, req); o.Status != 401 {
		t.Errorf("a redirect route whose service says 401: %d, want 401 (asked before the redirect)", o.Status)
	}
	req.AuthStatus = 200
	if o := OutcomeOf(res, req); o.Status != 301 {
		t.Errorf("a redirect route whose service says 200: %d, want the redirect", o.Status)
	}
}
