package contract

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Probes are requests that reach every route of res and its neighbours, for the tests
// that hold a data plane equal to the reference (Match): per virtual host, per route, one
// request that satisfies all of the route's matches (its method, a value for each header
// and query match), then the same request missing each of them in turn, on paths around
// the route's path. Probes are plain HTTP from ProbeClient, some with a body (BodySize
// bytes); a caller sends them over HTTPS too where the host has a certificate. The order is
// deterministic.
func Probes(res *configv1.Resources) []Request {
	var out []Request
	for _, vh := range res.GetVirtualHosts() {
		host := strings.Replace(vh.GetHostname(), "*.", "x.", 1)
		if host == "" {
			host = "unlisted.example.net"
		}
		for _, rt := range vh.GetRoutes() {
			v := rt.GetPath().GetValue()
			paths := []string{v, strings.TrimRight(v, "/") + "/", v + "/sub", v + "xyz", strings.ToUpper(v)}
			if rt.GetPath().GetType() == configv1.PathMatchType_PATH_MATCH_TYPE_REGEX {
				s := Sample("^(?:" + v + ")$")
				// Deeper and in other case too: the groups a rewrite uses (ingress-nginx's
				// "/api(/|$)(.*)") then carry something.
				paths = []string{s, strings.TrimRight(s, "/") + "/users/42", strings.ToUpper(s) + "x", "/users/42"}
			}
			full := Request{Scheme: "http", Host: host, Method: http.MethodGet, Header: http.Header{}, Client: ProbeClient}
			if rt.GetMethod() != "" {
				full.Method = rt.GetMethod()
			}
			q := url.Values{}
			for _, h := range rt.GetHeaders() {
				full.Header.Add(h.GetName(), matchingValue(h.GetValue(), h.GetType() == configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX))
			}
			for _, m := range rt.GetQuery() {
				q.Add(m.GetName(), matchingValue(m.GetValue(), m.GetType() == configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX))
			}
			variants := []Request{withQuery(full, q)}
			if rt.GetMethod() != "" {
				o := withQuery(full, q)
				o.Method = map[bool]string{true: http.MethodPost, false: http.MethodGet}[rt.GetMethod() == http.MethodGet]
				variants = append(variants, o)
			}
			for _, h := range rt.GetHeaders() {
				o := withQuery(full, q)
				o.Header = full.Header.Clone()
				o.Header.Del(h.GetName())
				variants = append(variants, o)
			}
			for _, m := range rt.GetQuery() {
				o := url.Values{}
				for k, vs := range q {
					if k != m.GetName() {
						o[k] = vs
					}
				}
				variants = append(variants, withQuery(full, o))
			}
			if c := rt.GetCors(); c != nil {
				variants = append(variants, corsProbes(c, withQuery(full, q))...)
			}
			if a := rt.GetSessionAffinity(); a != nil {
				// A client pinned to the first ready endpoint of the route's first backend
				// that has one.
				if v := firstPin(res, rt); v != "" {
					pinned := withQuery(full, q)
					pinned.Header = full.Header.Clone()
					pinned.Header.Add("Cookie", a.GetCookieName()+"="+v)
					variants = append(variants, pinned)
				}
			}
			if max := rt.GetMaxRequestBodyBytes(); max > 0 {
				// A body of the limit, and (for a limit small enough to send often) one over it.
				at := withQuery(full, q)
				at.BodySize = int64(min(max, maxProbeBody))
				variants = append(variants, at)
				if max < maxProbeBody {
					over := at
					over.BodySize = int64(max) + 1
					variants = append(variants, over)
				}
			}
			for _, p := range paths {
				for _, r := range variants {
					r.Path = p
					out = append(out, r)
					// A wildcard host is probed two labels deep as well, where only its
					// any-depth routes apply.
					if strings.HasPrefix(vh.GetHostname(), "*.") {
						r.Host = "y." + host
						out = append(out, r)
					}
				}
			}
		}
		for _, p := range []string{"/", "/nothing-here"} {
			out = append(out, Request{Scheme: "http", Host: host, Method: http.MethodGet, Path: p, Header: http.Header{}, Query: url.Values{}, Client: ProbeClient})
		}
	}
	return out
}

// firstPin is the affinity cookie value of the first ready endpoint of rt's first backend
// that has one, "" for none.
func firstPin(res *configv1.Resources, rt *configv1.Route) string {
	for _, wb := range rt.GetBackends() {
		for _, b := range res.GetBackends() {
			if b.GetName() != wb.GetBackend() {
				continue
			}
			for _, e := range b.GetEndpoints() {
				if e.GetReady() {
					return AffinityValue(b.GetName(), e.GetAddress(), e.GetPort())
				}
			}
		}
	}
	return ""
}

// ProbeClient is the client address of every probe: a test sends them from the proxy's
// host, over loopback.
var ProbeClient = netip.MustParseAddr("127.0.0.1")

// maxProbeBody bounds the bodies probes carry (BodySize): a route whose limit is larger is
// probed with a body of this size only.
const maxProbeBody = 64 << 10

// corsProbes are full as a preflight and as a cross-origin request, from an origin c allows
// and from one it does not.
func corsProbes(c *configv1.Cors, full Request) []Request {
	allowed := "https://allowed.example"
	if os := c.GetAllowOrigins(); len(os) > 0 && os[0] != "*" {
		allowed = strings.Replace(os[0], "*", "x.y", 1)
	}
	var out []Request
	for _, origin := range []string{allowed, "https://other.example.org:8443"} {
		pre := full
		pre.Method = http.MethodOptions
		pre.Header = full.Header.Clone()
		pre.Header.Set("Origin", origin)
		pre.Header.Set("Access-Control-Request-Method", "PUT")
		pre.Header.Set("Access-Control-Request-Headers", "x-one, x-two")
		actual := full
		actual.Header = full.Header.Clone()
		actual.Header.Set("Origin", origin)
		out = append(out, pre, actual)
	}
	return out
}

func withQuery(r Request, q url.Values) Request {
	r.RawQuery = q.Encode()
	r.Query = QueryOf(r.RawQuery)
	return r
}

// matchingValue is a value an exact match accepts, or one an expression matches.
func matchingValue(v string, isRegex bool) string {
	if !isRegex {
		return v
	}
	return Sample(v)
}

// Sample returns a short string that the RE2 expression expr matches, or "" when it finds
// none (it follows the first branch of every alternation, the fewest repetitions, the
// first character of every class).
func Sample(expr string) string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return ""
	}
	var b strings.Builder
	sample(&b, re.Simplify())
	s := b.String()
	if ok, _ := regexp.MatchString(expr, s); !ok {
		return ""
	}
	return s
}

func sample(b *strings.Builder, re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		if len(re.Rune) > 0 {
			r := re.Rune[0]
			if r < 0x20 && re.Rune[1] >= 'a' { // prefer a printable character
				r = 'a'
			}
			b.WriteRune(r)
		}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('a')
	case syntax.OpCapture, syntax.OpPlus:
		sample(b, re.Sub[0])
	case syntax.OpRepeat:
		for i := 0; i < re.Min; i++ {
			sample(b, re.Sub[0])
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			sample(b, s)
		}
	case syntax.OpAlternate:
		sample(b, re.Sub[0])
	}
}

// Outcome is what the reference says a data plane does with one request.
type Outcome struct {
	// Route is the route matched, nil for none (Status 404).
	Route *configv1.Route
	// Status is 404 (no route, or a Stop route), 204 (a CORS preflight), the redirect's code, 500 (the route has an invalid share
	// and no backend with a ready endpoint), 503 (no backend of the route has a ready
	// endpoint, and no invalid share) or 200 (proxied).
	Status   int
	Location string
	// Backends are the names of the route's backends that may answer (those with a ready
	// endpoint), when proxied.
	Backends []string
	// Forwards are what each of them receives (ForwardedTo), in the route's order: one per
	// entry of the route's backends with a ready endpoint, when proxied.
	Forwards []Forward
	// InvalidShare, when proxied: the route's InvalidWeight is set, so a request may be
	// answered 500 instead, for that share of the traffic (the module draws it by weight;
	// stock Caddy gives that share to the backends: docs/translation.md).
	InvalidShare bool
	// Mirrors are what each of the route's mirrors whose backend has a ready endpoint
	// receives (Forwarded: the route's rewrite and request header modifier, never a
	// backend's), in the route's order, when proxied; each gets its copy for its share of the
	// requests (numerator/denominator). A copy changes nothing else of the Outcome.
	Mirrors []Forward
	// Preflight: req is a CORS preflight for the route (IsPreflight), answered by the proxy
	// with Status 204 and Header (PreflightHeader), whatever the route's redirect or
	// backends; nothing is proxied or mirrored.
	Preflight bool
	// Header, for a preflight, is the whole CORS header of the answer.
	Header http.Header
	// Pinned, when proxied, is the endpoint (address:port) the request's session affinity
	// cookie names (Route.session_affinity): Backends is then its backend alone. Otherwise a
	// route with session affinity sets its cookie to the endpoint that answers.
	Pinned string
}

// Forward is what one backend of a route receives of a request when it is picked.
type Forward struct {
	Backend    string
	Host, Path string
	Header     http.Header
}

// OutcomeOf is the Outcome of req under res: Match (a Stop route answers 404), then a CORS preflight's answer, the
// route's redirect, its
// backends' readiness and its invalid share, what each backend that may be picked
// receives (ForwardedTo), and what its mirrors receive.
func OutcomeOf(res *configv1.Resources, req Request) Outcome {
	rt := Match(res, req)
	if rt == nil {
		return Outcome{Status: http.StatusNotFound}
	}
	if rt.GetStop() {
		// A listener's hostname ends here: nothing less specific serves the request.
		return Outcome{Route: rt, Status: http.StatusNotFound}
	}
	if code := guard(rt, req); code != 0 {
		return Outcome{Route: rt, Status: code}
	}
	if IsPreflight(rt, req) {
		return Outcome{Route: rt, Status: http.StatusNoContent, Preflight: true, Header: PreflightHeader(rt.GetCors(), req)}
	}
	// nginx's auth_request comes after a redirect (its rewrite phase); the Gateway API's
	// filter before.
	authFirst := gatewayAPIAuth(rt.GetExternalAuth())
	if authFirst {
		if o, done := authOutcome(res, rt, req); done {
			return o
		}
	}
	if loc, code := RedirectLocation(rt, req); code != 0 {
		return Outcome{Route: rt, Status: code, Location: loc}
	}
	if !authFirst {
		if o, done := authOutcome(res, rt, req); done {
			return o
		}
	}
	o := Outcome{Route: rt, Status: http.StatusServiceUnavailable, InvalidShare: rt.GetInvalidWeight() > 0}
	pinned, ep, isPinned := PinnedEndpoint(res, rt, req)
	if isPinned {
		// The affinity cookie names a ready endpoint of the route: that one, whatever the
		// weights (and never the invalid share).
		o.InvalidShare, o.Pinned = false, net.JoinHostPort(ep.GetAddress(), strconv.Itoa(int(ep.GetPort())))
	}
	for _, wb := range rt.GetBackends() {
		if isPinned && wb.GetBackend() != pinned {
			continue
		}
		for _, b := range res.GetBackends() {
			if b.GetName() != wb.GetBackend() {
				continue
			}
			for _, ep := range b.GetEndpoints() {
				if ep.GetReady() {
					o.Backends = append(o.Backends, b.GetName())
					f := Forward{Backend: b.GetName()}
					f.Host, f.Path, f.Header = ForwardedTo(rt, wb, req)
					o.Forwards = append(o.Forwards, f)
					break
				}
			}
		}
	}
	switch {
	case len(o.Backends) > 0:
		o.Status = http.StatusOK
		for _, m := range rt.GetMirrors() {
			if ready(res, m.GetBackend()) {
				f := Forward{Backend: m.GetBackend()}
				f.Host, f.Path, f.Header = Forwarded(rt, req)
				o.Mirrors = append(o.Mirrors, f)
			}
		}
	case o.InvalidShare:
		// Nothing valid can take the request: the Gateway API's 500 for invalid backends.
		o.Status = http.StatusInternalServerError
	}
	return o
}

// authOutcome is the answer rt's authentication service makes req get, if it does not pass.
func authOutcome(res *configv1.Resources, rt *configv1.Route, req Request) (Outcome, bool) {
	a := rt.GetExternalAuth()
	if a == nil {
		return Outcome{}, false
	}
	status := req.AuthStatus
	if !ready(res, a.GetBackend()) {
		status = 0 // no endpoint of the service is ready: no answer
	}
	_, _, _, original := AuthRequest(a, req)
	if code, loc := AuthDecision(a, status, original); code != 0 {
		return Outcome{Route: rt, Status: code, Location: loc}, true
	}
	return Outcome{}, false
}

// ready says whether the backend named has a ready endpoint in res.
func ready(res *configv1.Resources, name string) bool {
	for _, b := range res.GetBackends() {
		if b.GetName() != name {
			continue
		}
		for _, ep := range b.GetEndpoints() {
			if ep.GetReady() {
				return true
			}
		}
	}
	return false
}

// ProbeListener is a further listener that routes of a config name (Route.listener).
type ProbeListener struct {
	Name string
	// HTTPS says a route is served there over HTTPS (a listener has one scheme).
	HTTPS bool
}

// ListenersOf are the further listeners res's routes name, sorted by name: what a test
// binds so that Probes reach every route, sent on each listener as well as the main ones.
func ListenersOf(res *configv1.Resources) []ProbeListener {
	https := map[string]bool{}
	for _, vh := range res.GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			if l := rt.GetListener(); l != "" {
				https[l] = https[l] || rt.GetScheme() == configv1.RouteScheme_ROUTE_SCHEME_HTTPS
			}
		}
	}
	out := make([]ProbeListener, 0, len(https))
	for name, s := range https {
		out = append(out, ProbeListener{Name: name, HTTPS: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
