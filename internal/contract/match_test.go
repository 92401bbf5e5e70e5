package contract

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

func prefix(v string) *configv1.PathMatch {
	return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: v}
}

func exact(v string) *configv1.PathMatch {
	return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_EXACT, Value: v}
}

// req builds a reference request from a URL-ish target ("/p?q"), with header lines "Name: value".
func req(t *testing.T, scheme, method, host, target string, headers ...string) Request {
	t.Helper()
	path, raw, _ := strings.Cut(target, "?")
	h := http.Header{}
	for _, l := range headers {
		n, v, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("bad header line %q", l)
		}
		h.Add(n, v)
	}
	return Request{Scheme: scheme, Host: host, Method: method, Path: path, RawQuery: raw, Query: QueryOf(raw), Header: h}
}

// The reference router (docs/architecture.md, "translate.Match is the reference"): hosts in
// order exact, one-label wildcard, catch-all; routes in order; a route matches only when its
// scheme, path, method, every header match and every query match accept the request.
func TestMatchAppliesEveryConditionOfARoute(t *testing.T) {
	route := func(name string, f func(*configv1.Route)) *configv1.Route {
		rt := &configv1.Route{Name: name, Path: prefix("/")}
		f(rt)
		return rt
	}
	res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{
		{Hostname: "a.example.com", Routes: []*configv1.Route{
			route("https-only", func(r *configv1.Route) {
				r.Path, r.Scheme = exact("/secure"), configv1.RouteScheme_ROUTE_SCHEME_HTTPS
			}),
			route("http-only", func(r *configv1.Route) {
				r.Path, r.Scheme = exact("/secure"), configv1.RouteScheme_ROUTE_SCHEME_HTTP
			}),
			route("post", func(r *configv1.Route) { r.Path, r.Method = exact("/m"), "POST" }),
			route("header-exact", func(r *configv1.Route) {
				r.Path = exact("/h")
				r.Headers = []*configv1.HeaderMatch{{Name: "x-env", Value: "canary", Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_EXACT},
					// A second match of the same name (case-insensitively) does not count.
					{Name: "X-ENV", Value: "never", Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_EXACT}}
			}),
			route("header-regex", func(r *configv1.Route) {
				r.Path = exact("/h")
				r.Headers = []*configv1.HeaderMatch{{Name: "X-User", Value: "b[0-9]", Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX}}
			}),
			route("query", func(r *configv1.Route) {
				r.Path = exact("/q")
				r.Query = []*configv1.QueryMatch{{Name: "v", Value: "2", Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_EXACT},
					{Name: "id", Value: "^[0-9]+$", Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX},
					{Name: "v", Value: "never"}}
			}),
			route("query-present", func(r *configv1.Route) {
				r.Path = exact("/q")
				r.Query = []*configv1.QueryMatch{{Name: "any", Value: ".*", Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX}}
			}),
			route("fallback", func(r *configv1.Route) {}),
		}},
		{Hostname: "*.example.com", Routes: []*configv1.Route{route("wild", func(r *configv1.Route) {})}},
		{Hostname: "", Routes: []*configv1.Route{route("catch-all", func(r *configv1.Route) { r.Path = exact("/only") })}},
	}}
	for _, c := range []struct {
		req  Request
		want string
	}{
		{req(t, "https", "GET", "a.example.com", "/secure"), "https-only"},
		{req(t, "http", "GET", "a.example.com", "/secure"), "http-only"},
		{req(t, "http", "POST", "A.Example.com:8080", "/m"), "post"},
		{req(t, "http", "GET", "a.example.com", "/m"), "fallback"},
		{req(t, "http", "post", "a.example.com", "/m"), "fallback"}, // methods are case-sensitive
		{req(t, "http", "GET", "a.example.com", "/h", "X-Env: canary"), "header-exact"},
		{req(t, "http", "GET", "a.example.com", "/h", "x-env: other", "X-Env: canary"), "header-exact"}, // any value
		{req(t, "http", "GET", "a.example.com", "/h", "X-Env: Canary"), "fallback"},                     // values are case-sensitive
		{req(t, "http", "GET", "a.example.com", "/h", "X-User: ab12"), "header-regex"},                  // unanchored
		{req(t, "http", "GET", "a.example.com", "/h", "X-User: a"), "fallback"},
		{req(t, "http", "GET", "a.example.com", "/h"), "fallback"},
		{req(t, "http", "GET", "a.example.com", "/q?v=2&id=17"), "query"},
		{req(t, "http", "GET", "a.example.com", "/q?id=17&v=2&x=1"), "query"},
		{req(t, "http", "GET", "a.example.com", "/q?v=2&id=17x"), "fallback"},
		{req(t, "http", "GET", "a.example.com", "/q?v=2&v=3&id=1"), "fallback"}, // values joined: "2,3"
		{req(t, "http", "GET", "a.example.com", "/q?V=2&id=1"), "fallback"},     // names are case-sensitive
		{req(t, "http", "GET", "a.example.com", "/q?any="), "query-present"},
		{req(t, "http", "GET", "a.example.com", "/q?any=1;x"), "fallback"}, // a malformed query matches no query match
		{req(t, "http", "GET", "a.example.com", "/q"), "fallback"},
		{req(t, "http", "GET", "b.example.com", "/q"), "wild"},
		{req(t, "http", "GET", "example.com", "/only"), "catch-all"},
		{req(t, "http", "GET", "example.com", "/other"), ""},
	} {
		got := Match(res, c.req)
		if got.GetName() != c.want {
			t.Errorf("%s %s://%s%s?%s %v: route %q, want %q", c.req.Method, c.req.Scheme, c.req.Host, c.req.Path, c.req.RawQuery, c.req.Header, got.GetName(), c.want)
		}
	}
}

// The Gateway API's RequestRedirect as the reference: unset parts keep the request's, a
// scheme change without a port drops the port, well-known ports are left out, PREFIX
// replaces the matched prefix with the spec's slash handling, the query is kept.
func TestRedirectLocation(t *testing.T) {
	rd := func(scheme, host string, port uint32, mod *configv1.PathModifier, code uint32) *configv1.Redirect {
		return &configv1.Redirect{Scheme: scheme, Hostname: host, Port: port, Path: mod, StatusCode: code}
	}
	full := func(v string) *configv1.PathModifier {
		return &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL, Value: v}
	}
	pre := func(v string) *configv1.PathModifier {
		return &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_PREFIX, Value: v}
	}
	for _, c := range []struct {
		match    *configv1.PathMatch
		redirect *configv1.Redirect
		req      Request
		want     string
		code     int
	}{
		{prefix("/"), rd("https", "", 0, nil, 301), req(t, "http", "GET", "a.example.com", "/x?y=1"), "https://a.example.com/x?y=1", 301},
		{prefix("/"), rd("https", "", 0, nil, 0), req(t, "http", "GET", "a.example.com:8080", "/x"), "https://a.example.com/x", 302},
		{prefix("/"), rd("", "", 0, nil, 0), req(t, "http", "GET", "a.example.com:8080", "/x"), "http://a.example.com:8080/x", 302},
		{prefix("/"), rd("", "b.example.com", 0, nil, 0), req(t, "http", "GET", "a.example.com:8080", "/x"), "http://b.example.com:8080/x", 302},
		{prefix("/"), rd("", "b.example.com", 0, nil, 0), req(t, "https", "GET", "a.example.com", "/x"), "https://b.example.com/x", 302},
		{prefix("/"), rd("https", "", 8443, nil, 0), req(t, "http", "GET", "a.example.com", "/"), "https://a.example.com:8443/", 302},
		{prefix("/"), rd("https", "", 443, nil, 0), req(t, "http", "GET", "a.example.com:80", "/"), "https://a.example.com/", 302},
		{prefix("/"), rd("", "", 80, nil, 0), req(t, "http", "GET", "a.example.com:8080", "/"), "http://a.example.com/", 302},
		{prefix("/"), rd("", "", 0, full("/new"), 0), req(t, "http", "GET", "h", "/old/x?q"), "http://h/new?q", 302},
		{prefix("/old"), rd("", "", 0, pre("/new"), 0), req(t, "http", "GET", "h", "/old/x"), "http://h/new/x", 302},
		{prefix("/old/"), rd("", "", 0, pre("/new/"), 0), req(t, "http", "GET", "h", "/old/x"), "http://h/new/x", 302},
		{prefix("/old"), rd("", "", 0, pre("/new"), 0), req(t, "http", "GET", "h", "/old/"), "http://h/new/", 302},
		{prefix("/old"), rd("", "", 0, pre("/new"), 0), req(t, "http", "GET", "h", "/old"), "http://h/new", 302},
		{prefix("/old"), rd("", "", 0, pre(""), 0), req(t, "http", "GET", "h", "/old/x"), "http://h/x", 302},
		{prefix("/old"), rd("", "", 0, pre(""), 0), req(t, "http", "GET", "h", "/old"), "http://h/", 302},
		{prefix("/old"), rd("", "", 0, pre("/"), 0), req(t, "http", "GET", "h", "/old/"), "http://h/", 302},
		{prefix("/"), rd("", "", 0, pre("/new"), 0), req(t, "http", "GET", "h", "/x"), "http://h/new/x", 302},
		{exact("/e"), rd("", "", 0, pre("/new"), 0), req(t, "http", "GET", "h", "/e"), "http://h/new", 302},
	} {
		rt := &configv1.Route{Name: "r", Path: c.match, Redirect: c.redirect}
		loc, code := RedirectLocation(rt, c.req)
		if loc != c.want || code != c.code {
			t.Errorf("%v on %s://%s%s: %d %s, want %d %s", c.redirect, c.req.Scheme, c.req.Host, c.req.Path, code, loc, c.code, c.want)
		}
	}
	if loc, code := RedirectLocation(&configv1.Route{}, req(t, "http", "GET", "h", "/")); loc != "" || code != 0 {
		t.Errorf("a route without a redirect redirects: %d %s", code, loc)
	}
}

// URLRewrite and RequestHeaderModifier as the reference: the rewrite first (Host, path),
// then the modifier (remove, set, add; "Host" is the Host).
func TestForwardedAppliesRewriteThenHeaderModifier(t *testing.T) {
	pre := &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_PREFIX, Value: "/v2"}
	for _, c := range []struct {
		name     string
		rt       *configv1.Route
		req      Request
		host     string
		path     string
		header   http.Header
		rewrites [2]string
	}{
		{"nothing", &configv1.Route{Path: prefix("/")}, req(t, "http", "GET", "h:1", "/a", "A: 1"), "h:1", "/a", http.Header{"A": {"1"}}, [2]string{"h:1", "/a"}},
		{"rewrite", &configv1.Route{Path: prefix("/v1"), Rewrite: &configv1.Rewrite{Hostname: "inner", Path: pre}}, req(t, "http", "GET", "h", "/v1/x"),
			"inner", "/v2/x", http.Header{}, [2]string{"inner", "/v2/x"}},
		{"modifier", &configv1.Route{Path: prefix("/"), RequestHeaders: &configv1.HeaderModifier{
			Remove: []string{"x-gone", "x-set"},
			Set:    []*configv1.HeaderValue{{Name: "x-set", Value: "first"}, {Name: "X-Set", Value: "last"}},
			Add:    []*configv1.HeaderValue{{Name: "x-add", Value: "2"}, {Name: "X-Set", Value: "more"}}}},
			req(t, "http", "GET", "h", "/", "X-Gone: 1", "X-Add: 1", "X-Set: old"),
			"h", "/", http.Header{"X-Add": {"1", "2"}, "X-Set": {"last", "more"}}, [2]string{"h", "/"}},
		{"modifier sets the Host after the rewrite", &configv1.Route{Path: prefix("/"), Rewrite: &configv1.Rewrite{Hostname: "rewritten"},
			RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "host", Value: "modified"}}}},
			req(t, "http", "GET", "h", "/"), "modified", "/", http.Header{}, [2]string{"rewritten", "/"}},
	} {
		host, path, header := Forwarded(c.rt, c.req)
		if host != c.host || path != c.path || !equalHeader(header, c.header) {
			t.Errorf("%s: forwarded %s %s %v, want %s %s %v", c.name, host, path, header, c.host, c.path, c.header)
		}
		if h, p := Rewritten(c.rt, c.req); h != c.rewrites[0] || p != c.rewrites[1] {
			t.Errorf("%s: rewritten %s %s, want %v", c.name, h, p, c.rewrites)
		}
	}
}

// A backendRef's RequestHeaderModifier applies only to the backend picked, after the rule's
// own: the rule's set is overwritten by the backend's, the backend's remove sees the rule's
// add, and a Host the rule set is set again by the backend.
func TestForwardedToAppliesTheBackendsModifierAfterTheRoutes(t *testing.T) {
	rt := &configv1.Route{Path: prefix("/"), RequestHeaders: &configv1.HeaderModifier{
		Set: []*configv1.HeaderValue{{Name: "X-Both", Value: "route"}, {Name: "Host", Value: "route-host"}},
		Add: []*configv1.HeaderValue{{Name: "X-Route-Add", Value: "r"}}}}
	v1 := &configv1.WeightedBackend{Backend: "v1", Weight: 1, RequestHeaders: &configv1.HeaderModifier{
		Set:    []*configv1.HeaderValue{{Name: "x-both", Value: "v1"}, {Name: "host", Value: "v1-host"}},
		Remove: []string{"x-route-add"}}}
	v2 := &configv1.WeightedBackend{Backend: "v2", Weight: 1, RequestHeaders: &configv1.HeaderModifier{
		Add: []*configv1.HeaderValue{{Name: "X-Both", Value: "v2"}}}}
	rt.Backends = []*configv1.WeightedBackend{v1, v2}
	r := req(t, "http", "GET", "h", "/", "X-Both: client")
	for _, c := range []struct {
		wb     *configv1.WeightedBackend
		host   string
		header http.Header
	}{
		{nil, "route-host", http.Header{"X-Both": {"route"}, "X-Route-Add": {"r"}}},
		{v1, "v1-host", http.Header{"X-Both": {"v1"}}},
		{v2, "route-host", http.Header{"X-Both": {"route", "v2"}, "X-Route-Add": {"r"}}},
	} {
		host, _, header := ForwardedTo(rt, c.wb, r)
		if host != c.host || !equalHeader(header, c.header) {
			t.Errorf("backend %s: forwarded %s %v, want %s %v", c.wb.GetBackend(), host, header, c.host, c.header)
		}
	}
	// Without the route's modifier, the backend's alone applies.
	host, _, header := ForwardedTo(&configv1.Route{Path: prefix("/")}, v1, r)
	if want := (http.Header{"X-Both": {"v1"}}); host != "v1-host" || !equalHeader(header, want) {
		t.Errorf("backend only: forwarded %s %v, want v1-host %v", host, header, want)
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

// Scenario 8 (bad input gets a clear error naming the cause): CheckRoute names the field.
func TestCheckRouteNamesTheFieldAtFault(t *testing.T) {
	for _, c := range []struct {
		rt   *configv1.Route
		want string
	}{
		{&configv1.Route{Path: prefix("/")}, ""},
		{&configv1.Route{Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: "("}}, "path"},
		{&configv1.Route{Path: prefix("/"), Headers: []*configv1.HeaderMatch{{Name: "X", Value: "(", Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX}}}, "header X"},
		{&configv1.Route{Path: prefix("/"), Query: []*configv1.QueryMatch{{Name: "q", Value: "[", Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX}}}, "query parameter q"},
		{&configv1.Route{Path: prefix("/"), Redirect: &configv1.Redirect{StatusCode: 303}}, ""},
		{&configv1.Route{Path: prefix("/"), Redirect: &configv1.Redirect{StatusCode: 307}}, ""},
		{&configv1.Route{Path: prefix("/"), Redirect: &configv1.Redirect{StatusCode: 308}}, ""},
		{&configv1.Route{Path: prefix("/"), Redirect: &configv1.Redirect{StatusCode: 304}}, "status code 304"},
		{&configv1.Route{Path: prefix("/"), Redirect: &configv1.Redirect{Hostname: "a.example.com\r\nX: y"}}, "redirect: hostname"},
		{&configv1.Route{Path: prefix("/"), Rewrite: &configv1.Rewrite{Hostname: "a/b"}}, "rewrite: hostname"},
		{&configv1.Route{Path: prefix("/"), Redirect: &configv1.Redirect{Path: &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL, Value: "/a\nb"}}}, "redirect path"},
		{&configv1.Route{Path: prefix("/a\x00")}, "control character"},
		{&configv1.Route{Path: prefix("/" + strings.Repeat("a", MaxPathLength))}, "at most"},
		{&configv1.Route{Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: "/" + strings.Repeat("a", MaxRegexLength)}}, "at most 1024"},
		{&configv1.Route{Path: prefix("/"), Method: "GET\r\n"}, "method"},
		{&configv1.Route{Path: prefix("/"), Headers: []*configv1.HeaderMatch{{Name: "X Y", Value: "v"}}}, "header match"},
		{&configv1.Route{Path: prefix("/"), Headers: []*configv1.HeaderMatch{{Name: "X", Value: "a\rb"}}}, "control character"},
		{&configv1.Route{Path: prefix("/"), Query: []*configv1.QueryMatch{{Name: "{q}", Value: "v"}}}, "braces"},
		{&configv1.Route{Path: prefix("/"), RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X", Value: "a\r\nSet-Cookie: x"}}}}, "control character"},
		{&configv1.Route{Path: prefix("/"), RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X", Value: "a\tb"}}}}, ""},
		{&configv1.Route{Path: prefix("/"), RequestHeaders: &configv1.HeaderModifier{Add: []*configv1.HeaderValue{{Name: "X:Y", Value: "v"}}}}, "header modifier"},
		{&configv1.Route{Path: prefix("/"), RequestHeaders: &configv1.HeaderModifier{Remove: []string{"X-*"}}}, "'*'"},
		{&configv1.Route{Path: prefix("/"), RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X", Value: strings.Repeat("v", MaxHeaderValueLength+1)}}}}, "at most 4096"},
		{&configv1.Route{Path: prefix("/"), Redirect: &configv1.Redirect{Scheme: "ftp"}}, "scheme"},
		{&configv1.Route{Path: prefix("/"), Rewrite: &configv1.Rewrite{Path: &configv1.PathModifier{Type: 9}}}, "rewrite path"},
		{&configv1.Route{Path: prefix("/"), ResponseHeaders: &configv1.HeaderModifier{Remove: []string{""}}}, "empty name"},
		{&configv1.Route{Path: prefix("/"), Backends: []*configv1.WeightedBackend{{Backend: "b", RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X", Value: "a\nb"}}}}}}, "backend b: header modifier X"},
		{&configv1.Route{Path: prefix("/"), Backends: []*configv1.WeightedBackend{{Backend: "b", RequestHeaders: &configv1.HeaderModifier{Remove: []string{"X-*"}}}}}, "backend b: header modifier"},
		{&configv1.Route{Path: prefix("/"), Mirrors: []*configv1.Mirror{{Backend: "m", Numerator: 1, Denominator: 100}}}, ""},
		{&configv1.Route{Path: prefix("/"), Mirrors: []*configv1.Mirror{{Numerator: 1, Denominator: 1}}}, "mirrors[0] names no backend"},
		{&configv1.Route{Path: prefix("/"), Mirrors: []*configv1.Mirror{{Backend: "m", Numerator: 1, Denominator: 1}, {Backend: "m", Numerator: 101, Denominator: 100}}}, "mirrors[1] share"},
		{&configv1.Route{Path: prefix("/"), Mirrors: []*configv1.Mirror{{Backend: "m"}}}, "mirrors[0] share"},
		{&configv1.Route{Path: prefix("/"), Mirrors: []*configv1.Mirror{{Backend: "m", Numerator: 1, Denominator: MaxMirrorDenominator + 1}}}, "mirrors[0] share"},
		{&configv1.Route{Path: prefix("/"), Mirrors: make([]*configv1.Mirror, MaxMirrors+1)}, "mirrors"},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{AllowOrigins: []string{"*"}, AllowMethods: []string{"*"}, AllowHeaders: []string{"*"}}}, ""},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{AllowOrigins: []string{"https://*.a.example:8443"}, AllowMethods: []string{"GET"}, ExposeHeaders: []string{"X-A"}}}, ""},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{AllowOrigins: []string{"a.example"}}}, "cors: origin"},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{AllowOrigins: []string{"https://a.*.example"}}}, "cors: origin"},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{AllowOrigins: []string{"https://a.example\r\nX: y"}}}, "cors: origin"},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{AllowMethods: []string{"GET POST"}}}, "cors: method"},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{AllowHeaders: []string{"x\n"}}}, "cors: allowed header"},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{ExposeHeaders: []string{"x y"}}}, "cors: exposed header"},
		{&configv1.Route{Path: prefix("/"), Cors: &configv1.Cors{AllowMethods: make([]string, MaxCORSEntries+1)}}, "cors: 65 allowMethods"},
		{&configv1.Route{Path: prefix("/"), Retry: &configv1.Retry{Codes: []uint32{500, 502}, Attempts: 2, Backoff: durationpb.New(100 * time.Millisecond)}}, ""},
		{&configv1.Route{Path: prefix("/"), Retry: &configv1.Retry{Codes: []uint32{200}, Attempts: 2}}, "retry: code 200"},
		{&configv1.Route{Path: prefix("/"), Retry: &configv1.Retry{Codes: []uint32{500, 500}, Attempts: 2}}, "retry: code 500 given twice"},
		{&configv1.Route{Path: prefix("/"), Retry: &configv1.Retry{Codes: []uint32{500}}}, "retry: 0 attempts"},
		{&configv1.Route{Path: prefix("/"), Retry: &configv1.Retry{Codes: []uint32{500}, Attempts: MaxRetryAttempts + 1}}, "retry: 11 attempts"},
		{&configv1.Route{Path: prefix("/"), Retry: &configv1.Retry{Codes: []uint32{500}, Attempts: 1, Backoff: durationpb.New(-time.Second)}}, "retry: backoff"},
		{&configv1.Route{Path: prefix("/"), Retry: &configv1.Retry{Codes: []uint32{500}, Attempts: 1, Backoff: durationpb.New(MaxRetryBackoff + 1)}}, "retry: backoff"},
	} {
		err := CheckRoute(c.rt)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want an error naming %q", c.rt, err, c.want)
		}
	}
}

// Wildcard depth (docs/translation.md): an Ingress's wildcard serves exactly one label in front
// of its suffix, a Gateway API route's (AnyDepth) any number; the most specific host still
// wins, and a deeper name falls through a one-label route to a broader any-depth one.
func TestWildcardDepthFollowsEachAPI(t *testing.T) {
	if got := HostCandidates("A.b.Example.com:8080"); len(got) != 5 ||
		got[0] != (HostCandidate{Name: "a.b.example.com"}) || got[1] != (HostCandidate{Name: "*.b.example.com"}) ||
		got[2] != (HostCandidate{Name: "*.example.com", Deep: true}) || got[3] != (HostCandidate{Name: "*.com", Deep: true}) || got[4] != (HostCandidate{}) {
		t.Fatalf("HostCandidates = %+v", got)
	}
	res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{
		{Hostname: "*.ingress.example", Routes: []*configv1.Route{{Name: "ingress", Path: prefix("/")}}},
		{Hostname: "*.gateway.example", Routes: []*configv1.Route{{Name: "gateway", Path: prefix("/"), AnyDepth: true}}},
		{Hostname: "*.b.gateway.example", Routes: []*configv1.Route{{Name: "specific", Path: prefix("/only")}}},
		{Hostname: "*.mixed.example", Routes: []*configv1.Route{{Name: "mixed-ingress", Path: prefix("/i")}, {Name: "mixed-gateway", Path: prefix("/"), AnyDepth: true}}},
	}}
	for _, tc := range []struct{ host, path, want string }{
		{"a.ingress.example", "/", "ingress"},
		{"a.b.ingress.example", "/", ""},
		{"a.gateway.example", "/", "gateway"},
		{"a.b.c.gateway.example", "/", "gateway"},
		{"gateway.example", "/", ""},
		{"x.b.gateway.example", "/only", "specific"},
		{"x.b.gateway.example", "/other", "gateway"},
		{"a.mixed.example", "/i", "mixed-ingress"},
		{"a.b.mixed.example", "/i", "mixed-gateway"},
	} {
		got := ""
		if rt := Match(res, req(t, "http", "GET", tc.host, tc.path)); rt != nil {
			got = rt.GetName()
		}
		if got != tc.want {
			t.Errorf("%s%s matched %q, want %q", tc.host, tc.path, got, tc.want)
		}
	}
}

// The default certificate: a handshake gets the exact host's certificate, else the most
// specific wildcard's that serves the name (deeper than one label only with an any-depth
// route), else the catch-all's (a Gateway listener without hostname), also without a server
// name; without a catch-all certificate a name no host covers gets none.
func TestCertificateForFallsBackToTheCatchAll(t *testing.T) {
	deepRoute := &configv1.Route{Name: "deep", AnyDepth: true}
	res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{
		{Hostname: "a.example.com", Certificate: "exact"},
		{Hostname: "plain.example.com"},
		{Hostname: "*.example.com", Certificate: "wild"},
		{Hostname: "*.deep.org", Certificate: "deep", Routes: []*configv1.Route{deepRoute}},
		{Hostname: "", Certificate: "default"},
	}}
	for name, want := range map[string]string{
		"a.example.com": "exact", "A.Example.com:443": "exact", "plain.example.com": "wild", "b.example.com": "wild",
		"x.b.example.com": "default", "x.y.deep.org": "deep", "unknown-example.org": "default", "": "default",
	} {
		if got := CertificateFor(res, name); got != want {
			t.Errorf("server name %q: certificate %q, want %q", name, got, want)
		}
	}
	res.VirtualHosts = res.VirtualHosts[:4]
	if got := CertificateFor(res, "unknown-example.org"); got != "" {
		t.Errorf("without a catch-all certificate: %q, want none", got)
	}
}

// A mirror never changes the client's answer: the Outcome is the route's own, and each
// mirror with a ready endpoint receives what the route forwards (its rewrite and request
// header modifier, not a backend's own), only when the request is proxied.
func TestOutcomeOfAMirroredRouteIsTheRoutesOwn(t *testing.T) {
	ep := []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}
	rt := &configv1.Route{Path: prefix("/"), Rewrite: &configv1.Rewrite{Hostname: "inner"},
		RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X-Route", Value: "r"}}},
		Backends:       []*configv1.WeightedBackend{{Backend: "web", Weight: 1, RequestHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X-Backend", Value: "b"}}}}},
		Mirrors:        []*configv1.Mirror{{Backend: "copy", Numerator: 1, Denominator: 1}, {Backend: "gone", Numerator: 1, Denominator: 1}, {Backend: "copy", Numerator: 1, Denominator: 2}}}
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "h", Routes: []*configv1.Route{rt}}},
		Backends:     []*configv1.Backend{{Name: "web", Endpoints: ep}, {Name: "copy", Endpoints: ep}, {Name: "gone"}},
	}
	r := req(t, "http", "GET", "h", "/a", "X-Client: c")
	o := OutcomeOf(res, r)
	without := proto.Clone(res).(*configv1.Resources)
	without.VirtualHosts[0].Routes[0].Mirrors = nil
	plain := OutcomeOf(without, r)
	if o.Status != plain.Status || !slices.Equal(o.Backends, plain.Backends) || len(o.Forwards) != 1 || !equalHeader(o.Forwards[0].Header, plain.Forwards[0].Header) {
		t.Fatalf("mirrored outcome %+v, want the route's own %+v", o, plain)
	}
	want := http.Header{"X-Client": {"c"}, "X-Route": {"r"}}
	if len(o.Mirrors) != 2 {
		t.Fatalf("mirrors %+v, want the two copies to the ready backend", o.Mirrors)
	}
	for _, m := range o.Mirrors {
		if m.Backend != "copy" || m.Host != "inner" || m.Path != "/a" || !equalHeader(m.Header, want) {
			t.Errorf("mirror gets %+v, want copy inner /a %v", m, want)
		}
	}
	// Nothing is mirrored when nothing is proxied.
	res.Backends[0].Endpoints = nil
	if o := OutcomeOf(res, r); o.Status != http.StatusServiceUnavailable || len(o.Mirrors) != 0 {
		t.Errorf("unproxied outcome %d with mirrors %+v, want 503 and none", o.Status, o.Mirrors)
	}
}

// A CORS preflight is answered by the proxy (204, never proxied or redirected) with the
// policy's headers for an allowed origin ("*" and wildcards echo the origin, "*" methods and
// headers echo what was asked), and only Vary for another; an allowed cross-origin request
// is proxied and its answer gets the origin, credentials and exposed headers.
func TestCORSPreflightIsAnsweredByTheProxy(t *testing.T) {
	ep := []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}
	cors := &configv1.Cors{AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com"}, AllowMethods: []string{"GET", "OPTIONS"},
		AllowHeaders: []string{"x-header-1"}, ExposeHeaders: []string{"x-header-3", "x-header-4"}, AllowCredentials: true, MaxAge: 3600}
	any := &configv1.Cors{AllowOrigins: []string{"*"}, AllowMethods: []string{"*"}, AllowHeaders: []string{"*"}}
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "h", Routes: []*configv1.Route{
			{Path: prefix("/any"), Cors: any, Redirect: &configv1.Redirect{Hostname: "elsewhere"}},
			{Path: prefix("/"), Cors: cors, Backends: []*configv1.WeightedBackend{{Backend: "web", Weight: 1}}},
		}}},
		Backends: []*configv1.Backend{{Name: "web", Endpoints: ep}},
	}
	pre := func(path, origin string) Outcome {
		return OutcomeOf(res, req(t, "http", "OPTIONS", "h", path, "Origin: "+origin, "Access-Control-Request-Method: PUT", "Access-Control-Request-Headers: x-a, x-b"))
	}
	for _, origin := range []string{"https://www.foo.com", "https://a.bar.com", "https://a.b.bar.com"} {
		o := pre("/", origin)
		want := http.Header{"Vary": {"Origin"}, "Access-Control-Allow-Origin": {origin}, "Access-Control-Allow-Credentials": {"true"},
			"Access-Control-Allow-Methods": {"GET, OPTIONS"}, "Access-Control-Allow-Headers": {"x-header-1"},
			"Access-Control-Expose-Headers": {"x-header-3, x-header-4"}, "Access-Control-Max-Age": {"3600"}}
		if !o.Preflight || o.Status != http.StatusNoContent || len(o.Backends) != 0 || !equalHeader(o.Header, want) {
			t.Errorf("preflight from %s: %+v, want 204 with %v", origin, o, want)
		}
	}
	for _, origin := range []string{"https://foobar.com", "https://bar.com", "http://www.foo.com", "https://www.foo.com.evil"} {
		if o := pre("/", origin); !o.Preflight || !equalHeader(o.Header, http.Header{"Vary": {"Origin"}}) {
			t.Errorf("preflight from %s: %+v, want 204 with Vary only", origin, o)
		}
	}
	o := pre("/any/x", "https://o.example:1")
	if want := (http.Header{"Vary": {"Origin"}, "Access-Control-Allow-Origin": {"https://o.example:1"}, "Access-Control-Allow-Methods": {"PUT"}, "Access-Control-Allow-Headers": {"x-a, x-b"}}); o.Status != http.StatusNoContent || !equalHeader(o.Header, want) {
		t.Errorf("preflight of a redirecting route with wildcards: %+v, want 204 with %v", o, want)
	}
	if o := OutcomeOf(res, req(t, "http", "OPTIONS", "h", "/", "Origin: https://www.foo.com")); o.Preflight || o.Status != http.StatusOK {
		t.Errorf("OPTIONS without Access-Control-Request-Method: %+v, want proxied", o)
	}
	r := req(t, "http", "GET", "h", "/", "Origin: https://x.bar.com")
	if o := OutcomeOf(res, r); o.Preflight || o.Status != http.StatusOK {
		t.Errorf("cross-origin GET: %+v, want proxied", o)
	}
	h := http.Header{"Vary": {"Accept-Encoding"}, "Access-Control-Allow-Origin": {"*"}}
	ApplyResponseCORS(cors, r, h)
	if want := (http.Header{"Vary": {"Accept-Encoding", "Origin"}, "Access-Control-Allow-Origin": {"https://x.bar.com"}, "Access-Control-Allow-Credentials": {"true"}, "Access-Control-Expose-Headers": {"x-header-3, x-header-4"}}); !equalHeader(h, want) {
		t.Errorf("answer to a cross-origin GET: %v, want %v", h, want)
	}
	h = http.Header{}
	ApplyResponseCORS(cors, req(t, "http", "GET", "h", "/", "Origin: https://foobar.com"), h)
	if len(h) != 0 {
		t.Errorf("answer to a GET from an origin not allowed: %v, want nothing added", h)
	}
}

// A route's retry policy (docs/translation.md, "Retry"): a try answered with one of its codes
// is tried again while fewer than attempts tries again were made; the client gets the answer
// of the try that is not tried again, whatever its status.
func TestRetriedAnswer(t *testing.T) {
	rt := func(attempts uint32, codes ...uint32) *configv1.Route {
		return &configv1.Route{Retry: &configv1.Retry{Codes: codes, Attempts: attempts}}
	}
	for _, c := range []struct {
		name               string
		rt                 *configv1.Route
		statuses           []int
		wantStatus, wantTr int
	}{
		{"no policy", &configv1.Route{}, []int{500, 200}, 500, 1},
		{"succeeds after 2 retries of 3", rt(3, 500), []int{500, 500, 200}, 200, 3},
		{"3 retries are not enough", rt(3, 500), []int{500, 500, 500, 500, 200}, 500, 4},
		{"a code not retried", rt(3, 500), []int{503, 200}, 503, 1},
		{"another code on a later try ends it", rt(3, 500, 502), []int{500, 502, 504, 200}, 504, 3},
		{"the last try's answer, whatever it is", rt(2, 500, 502, 503, 504), []int{502, 502, 502, 200}, 502, 3},
		{"a success is never retried", rt(2, 500), []int{200, 500}, 200, 1},
	} {
		status, tries := RetriedAnswer(c.rt, c.statuses)
		if status != c.wantStatus || tries != c.wantTr {
			t.Errorf("%s: %d after %d tries, want %d after %d", c.name, status, tries, c.wantStatus, c.wantTr)
		}
	}
	if d := RetryBackoff(&configv1.Route{Retry: &configv1.Retry{Backoff: durationpb.New(time.Second)}}); d != time.Second {
		t.Errorf("backoff %s, want 1s", d)
	}
	if d := RetryBackoff(&configv1.Route{}); d != 0 {
		t.Errorf("backoff without a policy %s, want 0", d)
	}
}

// A stop route (listener isolation) answers 404 where it matches, so that a less specific
// virtual host never serves the request, and CheckRoute refuses one that would do anything
// else.
func TestStopRouteAnswers404AndEndsTheSearch(t *testing.T) {
	all := prefix("/")
	stop := &configv1.Route{Name: "stop", Path: all, Scheme: configv1.RouteScheme_ROUTE_SCHEME_HTTP, AnyDepth: true, Stop: true}
	res := &configv1.Resources{
		Backends: []*configv1.Backend{{Name: "web", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}}},
		VirtualHosts: []*configv1.VirtualHost{
			{Hostname: "*.example.com", Routes: []*configv1.Route{stop}},
			{Hostname: "", Routes: []*configv1.Route{{Name: "any", Path: all, Backends: []*configv1.WeightedBackend{{Backend: "web", Weight: 1}}}}},
		},
	}
	for _, c := range []struct {
		scheme, host string
		route        string
		status       int
	}{
		{"http", "a.example.com", "stop", 404},
		{"http", "a.b.example.com", "stop", 404}, // any depth
		{"https", "a.example.com", "any", 200},   // another listener's scheme
		{"http", "a.example.org", "any", 200},
	} {
		req := Request{Scheme: c.scheme, Host: c.host, Method: "GET", Path: "/x", Header: http.Header{}}
		o := OutcomeOf(res, req)
		if o.Route.GetName() != c.route || o.Status != c.status {
			t.Errorf("%s://%s: route %q status %d, want %q %d", c.scheme, c.host, o.Route.GetName(), o.Status, c.route, c.status)
		}
	}
	if err := CheckRoute(stop); err != nil {
		t.Errorf("stop route refused: %v", err)
	}
	for name, bad := range map[string]*configv1.Route{
		"backends": {Stop: true, Path: all, Backends: []*configv1.WeightedBackend{{Backend: "web", Weight: 1}}},
		"redirect": {Stop: true, Path: all, Redirect: &configv1.Redirect{Scheme: "https"}},
		"rewrite":  {Stop: true, Path: all, Rewrite: &configv1.Rewrite{Hostname: "a.example.com"}},
	} {
		if err := CheckRoute(bad); err == nil || !strings.Contains(err.Error(), "stop route") {
			t.Errorf("a stop route with %s: CheckRoute says %v, want a refusal", name, err)
		}
	}
}
