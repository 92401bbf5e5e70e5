package translate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// This file serves ingress-nginx's canary Ingresses (docs/migrating-from-ingress-nginx.md,
// "Canary"): an Ingress with canary: "true" is not a route of its own; each of its paths
// joins the route of the main Ingress with the same host, path and pathType, and takes a
// share of that route's requests (by header, then cookie, then weight, in the order
// ingress-nginx's balancer decides). Everything else of the route (rewrites, redirects to
// HTTPS, CORS) is the main Ingress's, as in ingress-nginx, where a canary's other
// annotations are ignored.

// canary is what a canary Ingress's canary-* annotations ask.
type canary struct {
	header        string // canary-by-header: the header that decides, if present
	headerValue   string // canary-by-header-value: the value that sends to the canary
	headerPattern string // canary-by-header-pattern: the expression that sends to the canary
	cookie        string // canary-by-cookie: the cookie that decides, if "always" or "never"
	weight, total uint32 // canary-weight out of canary-weight-total
}

// canaryAnnotations are ingress-nginx's canary annotations (served on a canary Ingress).
var canaryAnnotations = []string{"canary", "canary-by-cookie", "canary-by-header", "canary-by-header-pattern", "canary-by-header-value", "canary-weight", "canary-weight-total"}

// canaryOwnAnnotations are the served annotations a canary Ingress may carry that matter:
// its canary-* ones, and backend-protocol, which names the protocol of its own backend.
var canaryOwnAnnotations = map[string]bool{"backend-protocol": true}

func init() {
	for _, a := range canaryAnnotations {
		canaryOwnAnnotations[a] = true
	}
}

// readCanary reads the canary-* annotations of a canary Ingress as ingress-nginx does:
// a value it cannot read gets a finding and its default.
func readCanary(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) *canary {
	cn := &canary{total: 100}
	uintOf := func(name string, def uint32) uint32 {
		v, ok := get(name)
		if !ok {
			return def
		}
		i, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			add(field(name), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a whole number; %d applies", v, def))
			return def
		}
		return uint32(i)
	}
	// ingress-nginx's balancer draws from 100 unless the total is larger.
	cn.total = max(uintOf("canary-weight-total", 100), 100)
	cn.weight = min(uintOf("canary-weight", 0), cn.total)
	if v, ok := get("canary-by-header"); ok && v != "" {
		if err := contract.CheckHeaderName(v); err != nil {
			add(field("canary-by-header"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not a header name (%v); no request goes to the canary by header", v, err))
		} else {
			cn.header = v
		}
	}
	if v, ok := get("canary-by-header-value"); ok && v != "" {
		switch {
		case cn.header == "":
			add(field("canary-by-header-value"), sevWarn, "InvalidAnnotation", "without canary-by-header it does nothing")
		case contract.CheckHeaderValue(v) != nil:
			add(field("canary-by-header-value"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not a header value; no request goes to the canary by header", v))
			cn.header = ""
		default:
			cn.headerValue = v
		}
	}
	if v, ok := get("canary-by-header-pattern"); ok && v != "" {
		switch {
		case cn.header == "":
			add(field("canary-by-header-pattern"), sevWarn, "InvalidAnnotation", "without canary-by-header it does nothing")
		case cn.headerValue != "":
			add(field("canary-by-header-pattern"), sevWarn, "InvalidAnnotation", "canary-by-header-value is set too, and takes precedence; the pattern is ignored")
		default:
			if _, err := regexp.Compile(v); err != nil {
				add(field("canary-by-header-pattern"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not an RE2 regular expression (%v); no request goes to the canary by header", v, err))
				cn.header = ""
			} else {
				cn.headerPattern = v
			}
		}
	}
	if v, ok := get("canary-by-cookie"); ok && v != "" {
		if strings.ContainsAny(v, " \t\r\n;=,\"") {
			add(field("canary-by-cookie"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not a cookie name; no request goes to the canary by cookie", v))
		} else {
			cn.cookie = v
		}
	}
	return cn
}

// routes are the routes that serve main's requests with the canary backend cb beside main's
// own backends, in the order they are tried: by header, by cookie, and main's route itself
// with the weighted share. A request whose header or cookie says "never" goes to main's
// backends whatever the weight.
//
// The routes a request reaches only by the canary's header or cookie are the canary's
// (named after its path, sourced from it), so that explain and a data plane's refusal name
// it; main's route with the weighted share stays main's.
func (cn *canary) routes(main, own *configv1.Route, cb string) []*configv1.Route {
	toCanary := []*configv1.WeightedBackend{{Backend: cb, Weight: 1}}
	decide := func(by string, name string, how configv1.HeaderMatchType, value string, to []*configv1.WeightedBackend) *configv1.Route {
		r := proto.Clone(main).(*configv1.Route)
		r.Name, r.Source = own.GetName()+"/"+by, own.GetSource()
		r.Headers = append(r.Headers, &configv1.HeaderMatch{Name: name, Type: how, Value: value})
		r.Backends = to
		return r
	}
	const exact, regex = configv1.HeaderMatchType_HEADER_MATCH_TYPE_EXACT, configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX
	var out []*configv1.Route
	switch {
	case cn.header == "":
	case cn.headerValue != "":
		out = append(out, decide("by-header-value", cn.header, exact, cn.headerValue, toCanary))
	case cn.headerPattern != "":
		out = append(out, decide("by-header-pattern", cn.header, regex, cn.headerPattern, toCanary))
	default:
		out = append(out, decide("by-header-always", cn.header, exact, "always", toCanary), decide("by-header-never", cn.header, exact, "never", main.GetBackends()))
	}
	if cn.cookie != "" {
		// nginx's $cookie_NAME: the name case-insensitive, the value exact.
		cookie := func(value string) string {
			return `(?:^|;)\s*(?i:` + regexp.QuoteMeta(cn.cookie) + `)=` + value + `\s*(?:;|$)`
		}
		out = append(out, decide("by-cookie-always", "Cookie", regex, cookie("always"), toCanary), decide("by-cookie-never", "Cookie", regex, cookie("never"), main.GetBackends()))
	}
	base := main
	if cn.weight > 0 {
		base = proto.Clone(main).(*configv1.Route)
		base.Backends = nil
		if rest := cn.total - cn.weight; rest > 0 {
			for _, b := range main.GetBackends() {
				base.Backends = append(base.Backends, &configv1.WeightedBackend{Backend: b.GetBackend(), Weight: b.GetWeight() * rest, RequestHeaders: b.GetRequestHeaders()})
			}
		}
		base.Backends = append(base.Backends, &configv1.WeightedBackend{Backend: cb, Weight: cn.weight})
	}
	return append(out, base)
}

// canaryBackend is the backend of a canary claim's route ("" when it has none: its Service
// is missing, a finding says so).
func canaryBackend(r *configv1.Route) string {
	if bs := r.GetBackends(); len(bs) == 1 {
		return bs[0].GetBackend()
	}
	return ""
}

// canaryMismatch is why a canary's backend cannot join main's route, or "".
func canaryMismatch(main *configv1.Route, cb string) string {
	switch {
	case main.GetRedirect() != nil:
		return "the main Ingress's path redirects: no request reaches a backend"
	case cb == "":
		return ""
	}
	for _, b := range main.GetBackends() {
		switch {
		case b.GetBackend() == cb:
			return fmt.Sprintf("its backend %s is the main Ingress's own: there is nothing to split", cb)
		case protocolSuffix(b.GetBackend()) != protocolSuffix(cb):
			return "the main Ingress and the canary speak different protocols to their Services (backend-protocol): set the same on both"
		}
	}
	return ""
}
