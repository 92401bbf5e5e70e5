package translate

// HTTPRoute rules: each rule compiled once into one route per match (its timeouts, filters,
// backends and matches), before translateRoute places the routes on the hosts they serve.

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// compiledRule is one rule of an HTTPRoute, before it is placed on hosts: one route per
// match, without name, host or scheme; dropped says why it is not served.
type compiledRule struct {
	routes  []*configv1.Route
	precs   []routePrec
	dropped string
	reason  string
}

// compileRule translates one rule's matches, filters, backends and timeouts.
func (t *Translator) compileRule(out *routeOut, ri int, owner *configv1.ObjectRef, unresolved func(field, reason, msg string)) compiledRule {
	rt := out.rt
	rule := rt.Spec.Rules[ri]
	field := fmt.Sprintf("spec.rules[%d]", ri)
	drop := func(reason, why string) compiledRule { return compiledRule{dropped: why, reason: reason} }
	tmpl := &configv1.Route{Source: owner}

	if rule.Timeouts != nil {
		if d := ruleTimeout(out, owner, field, rule.Timeouts); d > 0 {
			tmpl.Timeout = durationpb.New(d)
		}
	}

	if rule.Retry != nil {
		r, why := retryPolicy(rule.Retry)
		if why != "" {
			return drop(string(gatewayv1.RouteReasonUnsupportedValue), "retry: "+why)
		}
		tmpl.Retry = r
	}
	if rule.SessionPersistence != nil {
		a, why := sessionAffinity(rule.SessionPersistence)
		if why != "" {
			return drop(string(gatewayv1.RouteReasonUnsupportedValue), "sessionPersistence: "+why)
		}
		tmpl.SessionAffinity = a
	}

	rf, why := compileFilters(tmpl, rule.Filters, field)
	if why != "" {
		return drop(string(gatewayv1.RouteReasonUnsupportedValue), why)
	}
	if tmpl.Redirect != nil && tmpl.Rewrite != nil {
		return drop(string(gatewayv1.RouteReasonIncompatibleFilters), "RequestRedirect and URLRewrite cannot be combined")
	}
	// What the filters ask for, checked as every data plane checks it (the matches are
	// checked with them below).
	if err := contract.CheckRoute(tmpl); err != nil {
		return drop(string(gatewayv1.RouteReasonUnsupportedValue), fmt.Sprintf("filters: %v", err))
	}

	// The authentication service, wherever the rule sends its requests: one that does not
	// resolve leaves the rule answering 500, never serving it unasked.
	authFailed := false
	if rf.authRef != nil {
		if name := t.routeBackend(out, gatewayv1.BackendRef{BackendObjectReference: rf.authRef.BackendRef}, rf.authField, unresolved, false); name != "" {
			rf.authCfg.Backend, tmpl.ExternalAuth = name, rf.authCfg
		} else {
			authFailed = true
		}
	}
	if tmpl.Redirect == nil {
		if why := t.ruleBackends(out, tmpl, rule.BackendRefs, rf.mirrors, field, authFailed, unresolved); why != "" {
			return drop(string(gatewayv1.RouteReasonUnsupportedValue), why)
		}
	}

	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gatewayv1.HTTPRouteMatch{{}}
	}
	var cr compiledRule
	for mi, m := range matches {
		prec := routePrec{age: rt.CreationTimestamp.Time, ns: rt.Namespace, name: rt.Name, rule: ri, match: mi, kindRank: 1}
		route, prec, why := compileMatch(tmpl, m, mi, prec, rf.prefixRewrite)
		if why != "" {
			return drop(string(gatewayv1.RouteReasonUnsupportedValue), why)
		}
		cr.routes = append(cr.routes, route)
		cr.precs = append(cr.precs, prec)
	}
	return cr
}

// ruleTimeout is the timeout of a rule's timeouts: the smaller of request and
// backendRequest, 0 for none. One that does not parse gets a finding and is not applied.
func ruleTimeout(out *routeOut, owner *configv1.ObjectRef, field string, timeouts *gatewayv1.HTTPRouteTimeouts) time.Duration {
	var d time.Duration
	for _, v := range []*gatewayv1.Duration{timeouts.Request, timeouts.BackendRequest} {
		if v == nil {
			continue
		}
		pd, err := time.ParseDuration(string(*v))
		if err != nil {
			out.findings = append(out.findings, &configv1.Finding{Object: owner, Field: field + ".timeouts", Severity: sevWarn, Reason: string(gatewayv1.RouteReasonUnsupportedValue),
				Cause: fmt.Sprintf("invalid duration %q (want a Gateway API duration such as \"30s\"); this timeout is not applied", *v)})
			continue
		}
		if pd > 0 && (d == 0 || pd < d) {
			d = pd // the smaller of request and backendRequest bounds the whole request
		}
	}
	return d
}

// compileMatch is the route of match mi, from the rule's route template tmpl, with prec
// completed by what the match asks; or why the rule is dropped ("" when it is not).
// prefixRewrite: a filter replaces the matched prefix, which needs a PathPrefix match.
func compileMatch(tmpl *configv1.Route, m gatewayv1.HTTPRouteMatch, mi int, prec routePrec, prefixRewrite bool) (*configv1.Route, routePrec, string) {
	route := proto.Clone(tmpl).(*configv1.Route)
	pm, err := httpPathMatch(m.Path)
	if err != "" {
		return nil, prec, fmt.Sprintf("matches[%d]: %s", mi, err)
	}
	if prefixRewrite && pm.Type != configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX {
		return nil, prec, fmt.Sprintf("matches[%d]: ReplacePrefixMatch needs a PathPrefix match", mi)
	}
	route.Path = pm
	switch pm.Type {
	case configv1.PathMatchType_PATH_MATCH_TYPE_EXACT:
		prec.pathRank = 0
	case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
		prec.pathRank = 1
	default:
		prec.pathRank = 2
	}
	prec.pathLen = len(pm.Value)
	if why := headerMatches(route, m.Headers, mi); why != "" {
		return nil, prec, why
	}
	if why := queryMatches(route, m.QueryParams, mi); why != "" {
		return nil, prec, why
	}
	if m.Method != nil {
		route.Method = string(*m.Method)
		prec.method = true
	}
	prec.headers, prec.query = len(route.Headers), len(route.Query)
	// Every rule a data plane enforces (and the bounds on what a tenant controls), so
	// that none refuses the config for this rule.
	if err := contract.CheckRoute(route); err != nil {
		return nil, prec, fmt.Sprintf("matches[%d]: %v", mi, err)
	}
	return route, prec, ""
}

// headerMatches adds the header matches of match mi to route and returns why the rule is
// dropped ("" when it is not).
func headerMatches(route *configv1.Route, headers []gatewayv1.HTTPHeaderMatch, mi int) string {
	seenHeader := map[string]bool{}
	for hi, h := range headers {
		name := strings.ToLower(string(h.Name))
		if seenHeader[name] {
			continue // the spec: only the first match of a name counts
		}
		seenHeader[name] = true
		hm := &configv1.HeaderMatch{Name: string(h.Name), Value: h.Value, Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_EXACT}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			if _, err := regexp.Compile(h.Value); err != nil {
				return fmt.Sprintf("matches[%d].headers[%d]: invalid regular expression %q: %v", mi, hi, h.Value, err)
			}
			hm.Type = configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX
		} else if h.Type != nil && *h.Type != gatewayv1.HeaderMatchExact {
			return fmt.Sprintf("matches[%d].headers[%d]: match type %q is not supported", mi, hi, *h.Type)
		}
		route.Headers = append(route.Headers, hm)
	}
	return ""
}

// queryMatches adds the query parameter matches of match mi to route and returns why the
// rule is dropped ("" when it is not).
func queryMatches(route *configv1.Route, params []gatewayv1.HTTPQueryParamMatch, mi int) string {
	seenQuery := map[string]bool{}
	for qi, q := range params {
		if seenQuery[string(q.Name)] {
			continue
		}
		seenQuery[string(q.Name)] = true
		qm := &configv1.QueryMatch{Name: string(q.Name), Value: q.Value, Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_EXACT}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			if _, err := regexp.Compile(q.Value); err != nil {
				return fmt.Sprintf("matches[%d].queryParams[%d]: invalid regular expression %q: %v", mi, qi, q.Value, err)
			}
			qm.Type = configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX
		} else if q.Type != nil && *q.Type != gatewayv1.QueryParamMatchExact {
			return fmt.Sprintf("matches[%d].queryParams[%d]: match type %q is not supported", mi, qi, *q.Type)
		}
		route.Query = append(route.Query, qm)
	}
	return ""
}

func httpPathMatch(p *gatewayv1.HTTPPathMatch) (*configv1.PathMatch, string) {
	typ, value := gatewayv1.PathMatchPathPrefix, "/"
	if p != nil && p.Type != nil {
		typ = *p.Type
	}
	if p != nil && p.Value != nil {
		value = *p.Value
	}
	switch typ {
	case gatewayv1.PathMatchExact:
		if !strings.HasPrefix(value, "/") {
			return nil, fmt.Sprintf("Exact path %q does not start with /", value)
		}
		return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_EXACT, Value: value}, ""
	case gatewayv1.PathMatchPathPrefix:
		if !strings.HasPrefix(value, "/") {
			return nil, fmt.Sprintf("PathPrefix %q does not start with /", value)
		}
		if len(value) > 1 {
			value = strings.TrimRight(value, "/")
			if value == "" {
				value = "/"
			}
		}
		return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: value}, ""
	case gatewayv1.PathMatchRegularExpression:
		if _, err := regexp.Compile("^(?:" + value + ")$"); err != nil {
			return nil, fmt.Sprintf("invalid regular expression %q: %v", value, err)
		}
		return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: value}, ""
	}
	return nil, fmt.Sprintf("path match type %q is not supported", typ)
}
