package contract

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// This file is the reference request router: what every data plane must do with a config.
// The data planes (the Sluice Caddy module, stock Caddy's /load rendering) are tested
// against it, request by request.

// Request is what the reference looks at in an HTTP request.
type Request struct {
	// Scheme is "http" or "https": the listener the request came in on.
	Scheme string
	// Listener names the proxy listener the request came in on (Route.listener): empty for
	// the main HTTP and HTTPS listeners.
	Listener string
	// Host is the Host header as sent (it may carry a port).
	Host   string
	Method string
	// Path is the decoded URL path.
	Path string
	// Query is the query parsed strictly (QueryOf): a query string that does not parse
	// leaves it nil, and then no query match accepts the request (stock Caddy refuses
	// malformed query strings the same way).
	Query url.Values
	// RawQuery is the query string as sent; a redirect keeps it.
	RawQuery string
	// Header is the request's header; "Host" is never in it (it is Host).
	Header http.Header
	// Client is the client's address (the TCP peer's), for Route.client_addresses.
	Client netip.Addr
	// BodySize is the body's length as its Content-Length says (0 without a body, -1 when
	// unknown), for Route.max_request_body_bytes.
	BodySize int64
	// AuthStatus is what the route's authentication service (Route.external_auth) answers
	// this request: the reference cannot ask it, so whoever asks the reference says (0: no
	// answer).
	AuthStatus int
}

// QueryOf parses a raw query string as the reference does: strictly, nil when it does not
// parse.
func QueryOf(raw string) url.Values {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil
	}
	return v
}

// RequestOf is the reference's view of r, which came in on the listener of scheme.
func RequestOf(scheme string, r *http.Request) Request {
	return Request{Scheme: scheme, Host: r.Host, Method: r.Method, Path: r.URL.Path, Query: QueryOf(r.URL.RawQuery), RawQuery: r.URL.RawQuery, Header: r.Header,
		Client: ClientOf(r), BodySize: r.ContentLength}
}

// Match returns the route req is sent to, or nil (404); a Stop route it returns answers 404
// too (OutcomeOf), and ends the search there. The virtual hosts that apply are
// tried in order (the exact host, then the wildcards of its suffixes from the longest, then
// the catch-all), and within each the routes in order; the first route that matches wins. A
// wildcard more than one label short of the host serves only its AnyDepth routes.
func Match(res *configv1.Resources, req Request) *configv1.Route {
	for _, c := range HostCandidates(req.Host) {
		for _, vh := range res.GetVirtualHosts() {
			if vh.GetHostname() != c.Name {
				continue
			}
			for _, rt := range vh.GetRoutes() {
				if c.Deep && !rt.GetAnyDepth() {
					continue
				}
				if RouteMatches(rt, req) {
					return rt
				}
			}
		}
	}
	return nil
}

// HostCandidate is a virtual host name that applies to a request's host.
type HostCandidate struct {
	Name string
	// Deep: a wildcard more than one label short of the host, which serves only routes that
	// match any depth (the Gateway API's wildcards; an Ingress's match one label).
	Deep bool
}

// HostCandidates are the virtual host names that apply to a request for host, in the order
// they are tried: the exact name (lower-case, without a port), the wildcard of each of its
// suffixes from the longest ("*.b.example.com", then "*.example.com" as a Deep one, ...), the
// catch-all "".
func HostCandidates(host string) []HostCandidate {
	host = strings.ToLower(host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	if host == "" {
		return []HostCandidate{{}}
	}
	out := []HostCandidate{{Name: host}}
	for i, deep := strings.IndexByte(host, '.'), false; i > 0 && i < len(host)-1; deep = true {
		out = append(out, HostCandidate{Name: "*" + host[i:], Deep: deep})
		next := strings.IndexByte(host[i+1:], '.')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return append(out, HostCandidate{})
}

// SchemeMatches reports whether a route of scheme s is served to a request that came in over
// scheme ("http" or "https").
func SchemeMatches(s configv1.RouteScheme, scheme string) bool {
	switch s {
	case configv1.RouteScheme_ROUTE_SCHEME_HTTP:
		return scheme == "http"
	case configv1.RouteScheme_ROUTE_SCHEME_HTTPS:
		return scheme == "https"
	}
	return true
}

// RouteMatches reports whether rt accepts req: its listener and scheme, path, method, and every header
// and query match (of each name, only the first match counts, as in the Gateway API).
func RouteMatches(rt *configv1.Route, req Request) bool {
	m, err := CompileMatcher(rt)
	return err == nil && m.Matches(req)
}

// Matcher is a route's request matches compiled once: listener, scheme, path, method, and
// the header and query matches that count. It is the one implementation of RouteMatches:
// the reference compiles one per call, and a data plane that routes in process (the Sluice
// Caddy module) keeps one per route, so that a request costs no compilation.
type Matcher struct {
	route   *configv1.Route
	path    *regexp.Regexp // a REGEX path match, anchored; nil for the others
	headers []headerMatcher
	query   []queryMatcher
}

type headerMatcher struct {
	name  string // canonical
	value string
	re    *regexp.Regexp // nil: EXACT
}

type queryMatcher struct {
	name  string
	value string
	re    *regexp.Regexp // nil: EXACT
}

// CompileMatcher compiles rt's matches. A regular expression that does not compile, or a
// path match of a type the reference does not know, is an error: such a route matches
// nothing.
func CompileMatcher(rt *configv1.Route) (*Matcher, error) { return compileMatcher(rt, compile) }

// CompileRoute checks rt as CheckRoute does and compiles its matches, each expression once
// (the check compiles them; the Matcher keeps what it compiled).
func CompileRoute(rt *configv1.Route) (*Matcher, error) {
	compiled := map[string]*regexp.Regexp{}
	if err := checkRoute(rt, compiled); err != nil {
		return nil, err
	}
	return compileMatcher(rt, func(expr string) (*regexp.Regexp, error) {
		if re, ok := compiled[expr]; ok {
			return re, nil
		}
		return compile(expr)
	})
}

func compileMatcher(rt *configv1.Route, compile func(string) (*regexp.Regexp, error)) (*Matcher, error) {
	m := &Matcher{route: rt}
	switch t := rt.GetPath().GetType(); t {
	case configv1.PathMatchType_PATH_MATCH_TYPE_EXACT, configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX:
	case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
		re, err := compile(anchoredPath(rt.GetPath().GetValue()))
		if err != nil {
			return nil, fmt.Errorf("path: %w", err)
		}
		m.path = re
	default:
		return nil, fmt.Errorf("unknown path match type %v", t)
	}
	for _, h := range HeaderMatches(rt) {
		hm := headerMatcher{name: http.CanonicalHeaderKey(h.GetName()), value: h.GetValue()}
		if h.GetType() == configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX {
			re, err := compile(h.GetValue())
			if err != nil {
				return nil, fmt.Errorf("header %s: %w", h.GetName(), err)
			}
			hm.re = re
		}
		m.headers = append(m.headers, hm)
	}
	for _, q := range QueryMatches(rt) {
		qm := queryMatcher{name: q.GetName(), value: q.GetValue()}
		if q.GetType() == configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX {
			re, err := compile(q.GetValue())
			if err != nil {
				return nil, fmt.Errorf("query parameter %s: %w", q.GetName(), err)
			}
			qm.re = re
		}
		m.query = append(m.query, qm)
	}
	return m, nil
}

// Route is the route m was compiled from.
func (m *Matcher) Route() *configv1.Route { return m.route }

// Matches reports whether m's route accepts req (RouteMatches).
func (m *Matcher) Matches(req Request) bool {
	rt := m.route
	if rt.GetListener() != req.Listener || !SchemeMatches(rt.GetScheme(), req.Scheme) {
		return false
	}
	if !pathAccepts(rt.GetPath(), m.path, req.Path) {
		return false
	}
	if meth := rt.GetMethod(); meth != "" && meth != req.Method {
		return false
	}
	for _, h := range m.headers {
		if !headerAccepts(h, req) {
			return false
		}
	}
	for _, q := range m.query {
		if !queryAccepts(q, req.Query) {
			return false
		}
	}
	return true
}

// anchoredPath is the expression a REGEX path match runs: the whole path must match.
func anchoredPath(value string) string { return "^(?:" + value + ")$" }

// PathMatches reports whether a path match accepts path.
func PathMatches(m *configv1.PathMatch, path string) bool {
	var re *regexp.Regexp
	if m.GetType() == configv1.PathMatchType_PATH_MATCH_TYPE_REGEX {
		var err error
		if re, err = compile(anchoredPath(m.GetValue())); err != nil {
			return false
		}
	}
	return pathAccepts(m, re, path)
}

// pathAccepts is PathMatches with a REGEX match's expression compiled (re).
func pathAccepts(m *configv1.PathMatch, re *regexp.Regexp, path string) bool {
	switch m.GetType() {
	case configv1.PathMatchType_PATH_MATCH_TYPE_EXACT:
		return path == m.GetValue()
	case configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX:
		v := m.GetValue()
		return v == "/" || path == v || strings.HasPrefix(path, v+"/")
	case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
		return re.MatchString(path)
	}
	return false
}

// HeaderMatches are the header matches of rt that count: the first of each name (names
// are case-insensitive).
func HeaderMatches(rt *configv1.Route) []*configv1.HeaderMatch {
	var out []*configv1.HeaderMatch
	seen := map[string]bool{}
	for _, h := range rt.GetHeaders() {
		if n := http.CanonicalHeaderKey(h.GetName()); !seen[n] {
			seen[n] = true
			out = append(out, h)
		}
	}
	return out
}

// HeaderMatchAccepts reports whether one of req's values of the header (each field line
// on its own; "Host" is req.Host) equals the match's value (EXACT) or contains a match of
// its RE2 expression (REGEX, unanchored). A header the request lacks matches nothing.
func HeaderMatchAccepts(h *configv1.HeaderMatch, req Request) bool {
	hm := headerMatcher{name: http.CanonicalHeaderKey(h.GetName()), value: h.GetValue()}
	if h.GetType() == configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX {
		re, err := compile(h.GetValue())
		if err != nil {
			return false
		}
		hm.re = re
	}
	return headerAccepts(hm, req)
}

func headerAccepts(h headerMatcher, req Request) bool {
	vals := req.Header[h.name]
	if h.name == "Host" {
		vals = []string{req.Host}
	}
	for _, v := range vals {
		if (h.re == nil && v == h.value) || (h.re != nil && h.re.MatchString(v)) {
			return true
		}
	}
	return false
}

// QueryMatches are the query matches of rt that count: the first of each name (names are
// case-sensitive).
func QueryMatches(rt *configv1.Route) []*configv1.QueryMatch {
	var out []*configv1.QueryMatch
	seen := map[string]bool{}
	for _, q := range rt.GetQuery() {
		if !seen[q.GetName()] {
			seen[q.GetName()] = true
			out = append(out, q)
		}
	}
	return out
}

// QueryMatchAccepts reports whether the parameter is in the query and its value (all its
// values joined with ",", as stock Caddy's placeholder gives them) equals the match's
// (EXACT) or contains a match of its RE2 expression (REGEX, unanchored).
func QueryMatchAccepts(q *configv1.QueryMatch, query url.Values) bool {
	qm := queryMatcher{name: q.GetName(), value: q.GetValue()}
	if q.GetType() == configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX {
		re, err := compile(q.GetValue())
		if err != nil {
			return false
		}
		qm.re = re
	}
	return queryAccepts(qm, query)
}

func queryAccepts(q queryMatcher, query url.Values) bool {
	vals, ok := query[q.name]
	if !ok {
		return false
	}
	v := strings.Join(vals, ",")
	if q.re != nil {
		return q.re.MatchString(v)
	}
	return v == q.value
}

// CheckRoute returns what makes rt unusable by any data plane, naming the field: a Stop
// route that does anything but answer 404 (backends, an invalid weight, a redirect, a
// rewrite, header modifiers, mirrors, a CORS or retry policy, a timeout), a regular
// expression that does not compile or is over MaxRegexLength, a path over MaxPathLength or
// with a control character, a header or query name that is empty (a header name that is
// not an HTTP token; a modifier's name with '*', which stock Caddy reads as a pattern; a
// query name with braces, which it reads as a placeholder), a header value with a control
// character or over MaxHeaderValueLength, a method that is not a token, a redirect status
// or scheme the reference does not know, a redirect's or rewrite's hostname that is not a
// hostname, a path modifier of unknown type, more than MaxMirrors mirrors, a mirror without
// a backend or whose share is not a fraction of at most 1 with a denominator up to
// MaxMirrorDenominator, a CORS policy that fails CheckCORS, a retry policy that fails
// CheckRetry, a listener that fails CheckListenerName.
func CheckRoute(rt *configv1.Route) error { return checkRoute(rt, nil) }

// checkRoute is CheckRoute; each match expression it compiles is kept in compiled (by the
// expression compiled), when compiled is not nil.
func checkRoute(rt *configv1.Route, compiled map[string]*regexp.Regexp) error {
	if rt.GetStop() {
		if err := checkStop(rt); err != nil {
			return err
		}
	}
	if l := rt.GetListener(); l != "" {
		if err := CheckListenerName(l); err != nil {
			return err
		}
	}
	if err := checkPath(rt.GetPath().GetValue()); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	if rt.GetPath().GetType() == configv1.PathMatchType_PATH_MATCH_TYPE_REGEX {
		if err := compileChecked(rt.GetPath().GetValue(), anchoredPath(rt.GetPath().GetValue()), compiled); err != nil {
			return fmt.Errorf("path: %w", err)
		}
	}
	if m := rt.GetMethod(); m != "" {
		if err := CheckHeaderName(m); err != nil {
			return fmt.Errorf("method %q is not a token", m)
		}
	}
	for _, h := range rt.GetHeaders() {
		if h.GetName() == "" {
			return fmt.Errorf("header match without a name")
		}
		if err := CheckHeaderName(h.GetName()); err != nil {
			return fmt.Errorf("header match: %w", err)
		}
		if h.GetType() == configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX {
			if err := compileChecked(h.GetValue(), h.GetValue(), compiled); err != nil {
				return fmt.Errorf("header %s: %w", h.GetName(), err)
			}
		} else if err := CheckHeaderValue(h.GetValue()); err != nil {
			return fmt.Errorf("header %s: %w", h.GetName(), err)
		}
	}
	for _, q := range rt.GetQuery() {
		if q.GetName() == "" {
			return fmt.Errorf("query match without a name")
		}
		if strings.ContainsAny(q.GetName(), "{}") || controlChar(q.GetName(), false) >= 0 {
			return fmt.Errorf("query parameter name %q holds braces or a control character", q.GetName())
		}
		if q.GetType() == configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX {
			if err := compileChecked(q.GetValue(), q.GetValue(), compiled); err != nil {
				return fmt.Errorf("query parameter %s: %w", q.GetName(), err)
			}
		}
	}
	for _, m := range []*configv1.HeaderModifier{rt.GetRequestHeaders(), rt.GetResponseHeaders()} {
		if err := checkHeaderModifier(m); err != nil {
			return err
		}
	}
	for _, wb := range rt.GetBackends() {
		if err := checkHeaderModifier(wb.GetRequestHeaders()); err != nil {
			return fmt.Errorf("backend %s: %w", wb.GetBackend(), err)
		}
	}
	if len(rt.GetMirrors()) > MaxMirrors {
		return fmt.Errorf("%d mirrors (at most %d)", len(rt.GetMirrors()), MaxMirrors)
	}
	for i, m := range rt.GetMirrors() {
		if m.GetBackend() == "" {
			return fmt.Errorf("mirrors[%d] names no backend", i)
		}
		if d := m.GetDenominator(); d == 0 || d > MaxMirrorDenominator || m.GetNumerator() > d {
			return fmt.Errorf("mirrors[%d] share %d/%d (1 <= denominator <= %d, numerator <= denominator)", i, m.GetNumerator(), d, MaxMirrorDenominator)
		}
	}
	if err := CheckCORS(rt.GetCors()); err != nil {
		return fmt.Errorf("cors: %w", err)
	}
	if err := CheckRetry(rt.GetRetry()); err != nil {
		return fmt.Errorf("retry: %w", err)
	}
	if _, err := CompileAddressFilter(rt.GetClientAddresses()); err != nil {
		return fmt.Errorf("client addresses: %w", err)
	}
	if err := CheckRateLimit(rt.GetRateLimit()); err != nil {
		return fmt.Errorf("rate limit: %w", err)
	}
	if err := CheckSessionAffinity(rt.GetSessionAffinity()); err != nil {
		return fmt.Errorf("session affinity: %w", err)
	}
	if err := CheckBackendTimeouts(rt.GetBackendTimeouts()); err != nil {
		return fmt.Errorf("backend timeouts: %w", err)
	}
	if err := CheckExternalAuth(rt.GetExternalAuth()); err != nil {
		return fmt.Errorf("external auth: %w", err)
	}
	if rd := rt.GetRedirect(); rd != nil {
		switch rd.GetStatusCode() {
		case 0, 301, 302, 303, 307, 308:
		default:
			return fmt.Errorf("redirect status code %d (301, 302, 303, 307 or 308)", rd.GetStatusCode())
		}
		switch rd.GetScheme() {
		case "", "http", "https":
		default:
			return fmt.Errorf("redirect scheme %q (http or https)", rd.GetScheme())
		}
		if err := checkHostname(rd.GetHostname()); err != nil {
			return fmt.Errorf("redirect: %w", err)
		}
		if l := rd.GetLocation(); l != "" {
			if err := checkLocation(rd); err != nil {
				return fmt.Errorf("redirect: %w", err)
			}
		}
		if rd.GetPort() > 65535 {
			return fmt.Errorf("redirect port %d", rd.GetPort())
		}
		if err := checkModifier(rd.GetPath()); err != nil {
			return fmt.Errorf("redirect path: %w", err)
		}
		if rd.GetPath().GetType() == configv1.PathModifierType_PATH_MODIFIER_TYPE_REGEX {
			return fmt.Errorf("redirect path: a regular expression only rewrites")
		}
	}
	if err := checkHostname(rt.GetRewrite().GetHostname()); err != nil {
		return fmt.Errorf("rewrite: %w", err)
	}
	if err := checkModifier(rt.GetRewrite().GetPath()); err != nil {
		return fmt.Errorf("rewrite path: %w", err)
	}
	return nil
}

// checkStop returns why a Stop route is not one: it answers 404 and nothing else, so a data
// plane never has to choose between stopping and what another field asks for.
func checkStop(rt *configv1.Route) error {
	switch {
	case len(rt.GetBackends()) > 0 || rt.GetInvalidWeight() > 0:
		return fmt.Errorf("a stop route has backends")
	case rt.GetRedirect() != nil:
		return fmt.Errorf("a stop route redirects")
	case rt.GetRewrite() != nil:
		return fmt.Errorf("a stop route rewrites")
	case rt.GetRequestHeaders() != nil || rt.GetResponseHeaders() != nil:
		return fmt.Errorf("a stop route modifies headers")
	case len(rt.GetMirrors()) > 0:
		return fmt.Errorf("a stop route mirrors")
	case rt.GetCors() != nil:
		return fmt.Errorf("a stop route has a CORS policy")
	case rt.GetRetry() != nil:
		return fmt.Errorf("a stop route has a retry policy")
	case rt.GetTimeout() != nil:
		return fmt.Errorf("a stop route has a timeout")
	case rt.GetClientAddresses() != nil || rt.GetMaxRequestBodyBytes() > 0 || rt.GetRateLimit() != nil:
		return fmt.Errorf("a stop route has client address, body or rate limits")
	case rt.GetSessionAffinity() != nil || rt.GetBackendTimeouts() != nil || rt.GetExternalAuth() != nil:
		return fmt.Errorf("a stop route has session affinity, backend timeouts or external auth")
	}
	return nil
}

// checkHeaderModifier checks the names and values a header modifier sets, adds or removes.
func checkHeaderModifier(m *configv1.HeaderModifier) error {
	for _, h := range append(append([]*configv1.HeaderValue(nil), m.GetSet()...), m.GetAdd()...) {
		if h.GetName() == "" {
			return fmt.Errorf("header modifier without a name")
		}
		if err := checkModifierName(h.GetName()); err != nil {
			return err
		}
		if err := CheckHeaderValue(h.GetValue()); err != nil {
			return fmt.Errorf("header modifier %s: %w", h.GetName(), err)
		}
	}
	for _, n := range m.GetRemove() {
		if n == "" {
			return fmt.Errorf("header modifier removes an empty name")
		}
		if err := checkModifierName(n); err != nil {
			return err
		}
	}
	return nil
}

// checkModifierName is CheckHeaderName for a name a header modifier sets, adds or removes,
// where '*' is refused too: stock Caddy's header operations read it as a pattern.
func checkModifierName(n string) error {
	if err := CheckHeaderName(n); err != nil {
		return fmt.Errorf("header modifier: %w", err)
	}
	if strings.Contains(n, "*") {
		return fmt.Errorf("header modifier: header name %q: '*' is not allowed (it reads as a pattern)", n)
	}
	return nil
}

func checkModifier(m *configv1.PathModifier) error {
	switch m.GetType() {
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_UNSPECIFIED:
		if m != nil && m.GetValue() != "" {
			return fmt.Errorf("value %q without a type", m.GetValue())
		}
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL, configv1.PathModifierType_PATH_MODIFIER_TYPE_PREFIX:
		if m.GetPattern() != "" {
			return fmt.Errorf("pattern %q on a modifier that is not a regular expression", m.GetPattern())
		}
		return checkPath(m.GetValue())
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_REGEX:
		if err := compileChecked(m.GetPattern(), RewriteExpr(m.GetPattern()), nil); err != nil {
			return err
		}
		if !strings.HasPrefix(m.GetValue(), "/") {
			return fmt.Errorf("replacement %q does not start with /", m.GetValue())
		}
		if err := checkReplacement(m.GetValue()); err != nil {
			return err
		}
		return checkPath(m.GetValue())
	default:
		return fmt.Errorf("unknown type %v", m.GetType())
	}
	return nil
}

// ModifiedPath is path changed by m for route rt (nil m: unchanged). FULL replaces it with
// m's value; PREFIX replaces the part rt's Prefix path match matched (the match's value
// without a trailing slash; the whole path for any other match) with m's value without a
// trailing slash, keeping the rest. A result that is empty is "/". (The Gateway API's
// ReplacePrefixMatch: /foo/bar with prefix /foo and value /xyz/ gives /xyz/bar; /foo with
// value "" gives /.)
func ModifiedPath(rt *configv1.Route, m *configv1.PathModifier, path string) string {
	var out string
	switch m.GetType() {
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL:
		out = m.GetValue()
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_PREFIX:
		rest := ""
		if rt.GetPath().GetType() == configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX {
			rest = strings.TrimPrefix(path, strings.TrimRight(rt.GetPath().GetValue(), "/"))
		}
		out = strings.TrimRight(m.GetValue(), "/") + rest
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_REGEX:
		re, err := compileCached(RewriteExpr(m.GetPattern()))
		if err != nil || !re.MatchString(path) {
			return path
		}
		out = re.ReplaceAllString(path, m.GetValue())
	default:
		return path
	}
	if out == "" {
		return "/"
	}
	return out
}

// RedirectLocation is the Location and status code of the redirect rt answers req with
// (code 0 when rt does not redirect). The Gateway API's RequestRedirect: each part of the
// request's URL that the redirect sets is replaced, the rest kept (the query too). The
// port: the redirect's if set; else, when it sets the scheme, that scheme's well-known
// port; else the port of the request's Host header, if it has one. A port that is the
// scheme's well-known one (http 80, https 443) is left out.
func RedirectLocation(rt *configv1.Route, req Request) (string, int) {
	rd := rt.GetRedirect()
	if rd == nil {
		return "", 0
	}
	code := int(rd.GetStatusCode())
	if code == 0 {
		code = http.StatusFound
	}
	if rd.GetLocation() != "" {
		return rd.GetLocation(), code
	}
	scheme := rd.GetScheme()
	if scheme == "" {
		scheme = req.Scheme
	}
	reqHost, reqPort := splitHost(req.Host)
	host := rd.GetHostname()
	if host == "" {
		host = reqHost
	}
	port := ""
	switch {
	case rd.GetPort() != 0:
		port = strconv.Itoa(int(rd.GetPort()))
		if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
			port = ""
		}
	case rd.GetScheme() == "":
		port = reqPort
	}
	loc := scheme + "://" + host
	if port != "" {
		loc += ":" + port
	}
	loc += ModifiedPath(rt, rd.GetPath(), req.Path)
	if req.RawQuery != "" {
		loc += "?" + req.RawQuery
	}
	return loc, code
}

// splitHost splits a Host header into host and port ("" when it has none), as Caddy's
// {http.request.host} and {http.request.port} do.
func splitHost(hostport string) (string, string) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, ""
	}
	return h, p
}

// Rewritten is the Host and path req is proxied with after rt's rewrite: the rewrite's
// hostname replaces the Host (with any port), its path modifier changes the path.
func Rewritten(rt *configv1.Route, req Request) (host, path string) {
	host = req.Host
	if h := rt.GetRewrite().GetHostname(); h != "" {
		host = h
	}
	return host, ModifiedPath(rt, rt.GetRewrite().GetPath(), req.Path)
}

// Forwarded is what the backend receives of req through rt when rt has no backend with its
// own request header modifier: ForwardedTo with no backend.
func Forwarded(rt *configv1.Route, req Request) (host, path string, header http.Header) {
	return ForwardedTo(rt, nil, req)
}

// ForwardedTo is what backend wb (of rt; nil for none) receives of req through rt once it
// was picked: the rewrite first, then the route's request header modifier, then the
// backend's (the Gateway API applies a backendRef's filters after the rule's). In both
// modifiers "Host" is the Host: set or added it replaces it, removed it empties it, as
// Caddy's own request header operations do. The header returned is a copy; req's is not
// changed.
func ForwardedTo(rt *configv1.Route, wb *configv1.WeightedBackend, req Request) (host, path string, header http.Header) {
	host, path = Rewritten(rt, req)
	header = req.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	m, bm := rt.GetRequestHeaders(), wb.GetRequestHeaders()
	if m == nil && bm == nil {
		return host, path, header
	}
	header["Host"] = append(header["Host"], host)
	ModifyHeaders(m, header)
	ModifyHeaders(bm, header)
	host = ""
	if hs := header["Host"]; len(hs) > 0 {
		host = hs[len(hs)-1]
	}
	delete(header, "Host")
	return host, path, header
}

// ModifyHeaders applies m to h: remove, then set (the last value of a name wins), then add;
// names are case-insensitive.
func ModifyHeaders(m *configv1.HeaderModifier, h http.Header) {
	for _, n := range m.GetRemove() {
		h.Del(n)
	}
	for _, hv := range m.GetSet() {
		h.Set(hv.GetName(), hv.GetValue())
	}
	for _, hv := range m.GetAdd() {
		h.Add(hv.GetName(), hv.GetValue())
	}
}

// compile compiles expr; the reference keeps no cache (it is pure, and called only by
// tests and checks). A variable so that a test can count compilations; a test that swaps it
// must not run in parallel with others.
var compile = regexp.Compile

// RewriteExpr is the expression a PATH_MODIFIER_TYPE_REGEX modifier runs over the whole
// path: pattern's leftmost match with the rest of the path around it, so that replacing the
// one match of RewriteExpr replaces the whole path (as stock Caddy's path_regexp rewrite
// does) and the groups are pattern's own.
func RewriteExpr(pattern string) string { return `^(?s:.*?)(?:` + pattern + `)(?s:.*)$` }

// rewriteCache holds compiled rewrite expressions, which the reference would otherwise
// compile on every request; emptied when it reaches maxRewriteCache so that patterns of
// states long gone do not stay.
var rewriteCache struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}

const maxRewriteCache = 4096

func compileCached(expr string) (*regexp.Regexp, error) {
	rewriteCache.Lock()
	re, ok := rewriteCache.m[expr]
	rewriteCache.Unlock()
	if ok {
		return re, nil
	}
	re, err := compile(expr)
	if err != nil {
		return nil, err
	}
	rewriteCache.Lock()
	if rewriteCache.m == nil || len(rewriteCache.m) >= maxRewriteCache {
		rewriteCache.m = map[string]*regexp.Regexp{}
	}
	rewriteCache.m[expr] = re
	rewriteCache.Unlock()
	return re, nil
}

// checkReplacement returns why v cannot be a REGEX modifier's replacement: a '$' that is
// neither "$$" nor "${N}" with N a number (Go's other forms, "$name" and "$1x", read
// differently in every data plane's template syntax).
func checkReplacement(v string) error {
	for i := 0; i < len(v); i++ {
		if v[i] != '$' {
			continue
		}
		if i+1 < len(v) && v[i+1] == '$' {
			i++
			continue
		}
		end := strings.IndexByte(v[i:], '}')
		if i+1 >= len(v) || v[i+1] != '{' || end < 3 {
			return fmt.Errorf("replacement %q: '$' is neither $$ nor ${N}", v)
		}
		if _, err := strconv.Atoi(v[i+2 : i+end]); err != nil {
			return fmt.Errorf("replacement %q: ${%s} is not a group number", v, v[i+2:i+end])
		}
		i += end
	}
	return nil
}

// checkLocation returns why a redirect's literal Location cannot be sent: not an absolute
// http(s) URL, a control character, or other fields set beside it.
func checkLocation(rd *configv1.Redirect) error {
	l := rd.GetLocation()
	if rd.GetScheme() != "" || rd.GetHostname() != "" || rd.GetPort() != 0 || rd.GetPath() != nil {
		return fmt.Errorf("location %q with scheme, hostname, port or path", l)
	}
	if len(l) > MaxPathLength {
		return fmt.Errorf("location of %d bytes (at most %d)", len(l), MaxPathLength)
	}
	if i := controlChar(l, false); i >= 0 || strings.ContainsAny(l, " {}") {
		return fmt.Errorf("location %q holds a space, a brace or a control character", l)
	}
	u, err := url.Parse(l)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("location %q is not an absolute http or https URL", l)
	}
	return nil
}

// CertificateFor names the certificate a handshake for serverName gets, "" for none (the
// handshake fails): that of the first host that applies (HostCandidates: the exact name, the
// wildcards from the longest, the catch-all "") and has a certificate; a wildcard more than
// one label short of the name only when the host has a route that matches any depth. The
// catch-all's is the default certificate (a Gateway listener without hostname), also for a
// handshake without a server name.
func CertificateFor(res *configv1.Resources, serverName string) string {
	for _, c := range HostCandidates(serverName) {
		for _, vh := range res.GetVirtualHosts() {
			if vh.GetHostname() != c.Name || vh.GetCertificate() == "" {
				continue
			}
			if c.Deep && !slices.ContainsFunc(vh.GetRoutes(), (*configv1.Route).GetAnyDepth) {
				continue
			}
			return vh.GetCertificate()
		}
	}
	return ""
}
