package contract

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// docs/design.md, "The house": matching has one implementation and one compilation. A data
// plane that routes in process keeps CompileRoute's Matcher; it compiles each of the route's
// match expressions once (the check's compilation is the one the Matcher keeps, a header
// name matched twice is checked but only its first match counts), and it decides as the
// reference's RouteMatches, field by field.
func TestCompileRouteCompilesEachExpressionOnceAndMatchesAsTheReference(t *testing.T) {
	rt := &configv1.Route{Name: "r",
		Path:   &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: "/api/v[0-9]+/.*"},
		Method: "GET",
		Headers: []*configv1.HeaderMatch{
			{Name: "x-tenant", Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX, Value: "^(blue|green)$"},
			{Name: "X-Tenant", Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX, Value: "never"},
			{Name: "X-Exact", Value: "yes"},
		},
		Query: []*configv1.QueryMatch{{Name: "debug", Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX, Value: "^[01]$"}},
	}
	compiled := map[string]int{}
	real := compile
	compile = func(expr string) (*regexp.Regexp, error) { compiled[expr]++; return real(expr) }
	defer func() { compile = real }()
	m, err := CompileRoute(rt)
	if err != nil {
		t.Fatal(err)
	}
	if len(compiled) != 4 {
		t.Errorf("compiled %v, want the path, both header and the query expressions", compiled)
	}
	for expr, n := range compiled {
		if n != 1 {
			t.Errorf("%q compiled %d times", expr, n)
		}
	}
	compile = real

	req := func(path, method, tenant, exact, query string) Request {
		return Request{Scheme: "http", Host: "h", Path: path, Method: method, Query: QueryOf(query),
			Header: http.Header{"X-Tenant": {tenant}, "X-Exact": {exact}}}
	}
	for _, tc := range []struct {
		name string
		req  Request
		want bool
	}{
		{"every match", req("/api/v2/items", "GET", "blue", "yes", "debug=1"), true},
		{"the path", req("/api/vx/items", "GET", "blue", "yes", "debug=1"), false},
		{"the method", req("/api/v2/items", "POST", "blue", "yes", "debug=1"), false},
		{"the first header match of a name", req("/api/v2/items", "GET", "red", "yes", "debug=1"), false},
		{"an exact header", req("/api/v2/items", "GET", "green", "no", "debug=1"), false},
		{"the query", req("/api/v2/items", "GET", "green", "yes", "debug=2"), false},
		{"the query absent", req("/api/v2/items", "GET", "green", "yes", url.Values{}.Encode()), false},
		{"another listener", func() Request {
			r := req("/api/v2/items", "GET", "blue", "yes", "debug=1")
			r.Listener = "admin"
			return r
		}(), false},
	} {
		if got := m.Matches(tc.req); got != tc.want || RouteMatches(rt, tc.req) != tc.want {
			t.Errorf("%s: the Matcher says %v, RouteMatches %v; want %v", tc.name, got, RouteMatches(rt, tc.req), tc.want)
		}
	}
}
