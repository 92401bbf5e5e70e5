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
		var d time.Duration
		for _, v := range []*gatewayv1.Duration{rule.Timeouts.Request, rule.Timeouts.BackendRequest} {
			if v == nil {
				continue
			}
			pd, err := time.ParseDuration(string(*v))
			if err != nil {
				out.findings = append(out.findings, &configv1.Finding{Object: owner, Field: field + ".timeouts", Severity: sevWarn, Reason: "UnsupportedValue",
					Cause: fmt.Sprintf("invalid duration %q (want a Gateway API duration such as \"30s\"); this timeout is not applied", *v)})
				continue
			}
			if pd > 0 && (d == 0 || pd < d) {
				d = pd // the smaller of request and backendRequest bounds the whole request
			}
		}
		if d > 0 {
			tmpl.Timeout = durationpb.New(d)
		}
	}

	if rule.Retry != nil {
		r, why := retryPolicy(rule.Retry)
		if why != "" {
			return drop("UnsupportedValue", "retry: "+why)
		}
		tmpl.Retry = r
	}
	if rule.SessionPersistence != nil {
		a, why := sessionAffinity(rule.SessionPersistence)
		if why != "" {
			return drop("UnsupportedValue", "sessionPersistence: "+why)
		}
		tmpl.SessionAffinity = a
	}

	var prefixRewrite bool
	type mirrorRef struct {
		fi    int
		ref   gatewayv1.BackendObjectReference
		share *configv1.Mirror
	}
	var mirrorRefs []mirrorRef
	var authRef *gatewayv1.HTTPExternalAuthFilter
	var authCfg *configv1.ExternalAuth
	authField := ""
	for fi, f := range rule.Filters {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterExternalAuth:
			a, why := externalAuthFilter(f.ExternalAuth)
			if why != "" {
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d]: externalAuth: %s", fi, why))
			}
			authCfg, authRef = a, f.ExternalAuth
			authField = fmt.Sprintf("%s.filters[%d].externalAuth.backendRef", field, fi)
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			tmpl.RequestHeaders = headerModifier(f.RequestHeaderModifier)
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			tmpl.ResponseHeaders = headerModifier(f.ResponseHeaderModifier)
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			r := f.RequestRedirect
			if r == nil {
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d] has no requestRedirect", fi))
			}
			red := &configv1.Redirect{StatusCode: 302}
			if r.Scheme != nil {
				red.Scheme = *r.Scheme
			}
			if r.Hostname != nil {
				red.Hostname = string(*r.Hostname)
			}
			if r.Port != nil {
				red.Port = uint32(*r.Port)
			}
			if r.StatusCode != nil {
				red.StatusCode = uint32(*r.StatusCode)
			}
			pm, prefix, err := pathModifier(r.Path)
			if err != "" {
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d]: %s", fi, err))
			}
			red.Path, prefixRewrite = pm, prefixRewrite || prefix
			tmpl.Redirect = red
		case gatewayv1.HTTPRouteFilterURLRewrite:
			r := f.URLRewrite
			if r == nil {
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d] has no urlRewrite", fi))
			}
			rw := &configv1.Rewrite{}
			if r.Hostname != nil {
				rw.Hostname = string(*r.Hostname)
			}
			pm, prefix, err := pathModifier(r.Path)
			if err != "" {
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d]: %s", fi, err))
			}
			rw.Path, prefixRewrite = pm, prefixRewrite || prefix
			tmpl.Rewrite = rw
		case gatewayv1.HTTPRouteFilterRequestMirror:
			m := f.RequestMirror
			if m == nil {
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d] has no requestMirror", fi))
			}
			// Every request without a share; a percent p is p/100.
			share := &configv1.Mirror{Numerator: 100, Denominator: 100}
			switch {
			case m.Percent != nil && m.Fraction != nil:
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d]: requestMirror has both percent and fraction", fi))
			case m.Percent != nil:
				share.Numerator = uint32(max(*m.Percent, 0))
				if *m.Percent < 0 {
					share.Numerator = share.Denominator + 1 // refused below, as over 100
				}
			case m.Fraction != nil:
				share.Numerator, share.Denominator = uint32(max(m.Fraction.Numerator, 0)), 100
				if m.Fraction.Denominator != nil {
					share.Denominator = uint32(max(*m.Fraction.Denominator, 0))
				}
				if m.Fraction.Numerator < 0 {
					share.Denominator = 0 // refused below
				}
			}
			// The share is checked now, the backendRef with the rule's (an unresolved one drops
			// the mirror alone).
			if err := contract.CheckRoute(&configv1.Route{Mirrors: []*configv1.Mirror{{Backend: "mirror", Numerator: share.Numerator, Denominator: share.Denominator}}}); err != nil {
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d]: %v", fi, err))
			}
			mirrorRefs = append(mirrorRefs, mirrorRef{fi, m.BackendRef, share})
		case gatewayv1.HTTPRouteFilterCORS:
			c := f.CORS
			if c == nil {
				return drop("UnsupportedValue", fmt.Sprintf("filters[%d] has no cors", fi))
			}
			// An unset maxAge is the Gateway API's default of 5 seconds (the CRD's default,
			// for objects that did not pass through it).
			cors := &configv1.Cors{MaxAge: 5}
			if c.MaxAge > 0 {
				cors.MaxAge = uint32(c.MaxAge)
			}
			if c.AllowCredentials != nil {
				cors.AllowCredentials = *c.AllowCredentials
			}
			for _, o := range c.AllowOrigins {
				cors.AllowOrigins = append(cors.AllowOrigins, string(o))
			}
			for _, m := range c.AllowMethods {
				cors.AllowMethods = append(cors.AllowMethods, string(m))
			}
			for _, h := range c.AllowHeaders {
				cors.AllowHeaders = append(cors.AllowHeaders, string(h))
			}
			for _, h := range c.ExposeHeaders {
				cors.ExposeHeaders = append(cors.ExposeHeaders, string(h))
			}
			tmpl.Cors = cors
		default:
			return drop("UnsupportedValue", fmt.Sprintf("filters[%d]: filter type %q is not supported", fi, f.Type))
		}
	}
	if tmpl.Redirect != nil && tmpl.Rewrite != nil {
		return drop("IncompatibleFilters", "RequestRedirect and URLRewrite cannot be combined")
	}
	// What the filters ask for, checked as every data plane checks it (the matches are
	// checked with them below).
	if err := contract.CheckRoute(tmpl); err != nil {
		return drop("UnsupportedValue", fmt.Sprintf("filters: %v", err))
	}

	// The authentication service, wherever the rule sends its requests: one that does not
	// resolve leaves the rule answering 500, never serving it unasked.
	authFailed := false
	if authRef != nil {
		if name := t.routeBackend(out, gatewayv1.BackendRef{BackendObjectReference: authRef.BackendRef}, authField, unresolved, false); name != "" {
			authCfg.Backend, tmpl.ExternalAuth = name, authCfg
		} else {
			authFailed = true
		}
	}
	if tmpl.Redirect == nil {
		for bi, br := range rule.BackendRefs {
			bfield := fmt.Sprintf("%s.backendRefs[%d]", field, bi)
			// A backendRef's filters apply only when that backend is picked, after the rule's.
			var reqHeaders *configv1.HeaderModifier
			for fi, f := range br.Filters {
				switch f.Type {
				case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
					reqHeaders = headerModifier(f.RequestHeaderModifier)
				default:
					return drop("UnsupportedValue", fmt.Sprintf("backendRefs[%d].filters[%d]: filter type %q is not supported on a backendRef", bi, fi, f.Type))
				}
			}
			if err := contract.CheckRoute(&configv1.Route{RequestHeaders: reqHeaders}); err != nil {
				return drop("UnsupportedValue", fmt.Sprintf("backendRefs[%d].filters: %v", bi, err))
			}
			name := t.routeBackend(out, br.BackendRef, bfield, unresolved, true)
			weight := int32(1)
			if br.Weight != nil {
				weight = *br.Weight
			}
			// An invalid backend's share is answered 500, as the Gateway API asks; weight 0 is
			// never chosen (and so not referred to).
			switch {
			case name != "" && weight > 0:
				tmpl.Backends = append(tmpl.Backends, &configv1.WeightedBackend{Backend: name, Weight: uint32(weight), RequestHeaders: reqHeaders})
			case name != "":
				out.refs = out.refs[:len(out.refs)-1]
			case weight > 0:
				tmpl.InvalidWeight += uint32(weight)
			}
		}
		// A rule with no backend to take traffic (none listed, or every weight 0) answers
		// 500, as one whose backends are all invalid; so does one whose authentication
		// service does not resolve.
		if len(tmpl.Backends) == 0 && tmpl.InvalidWeight == 0 || authFailed {
			tmpl.Backends, tmpl.InvalidWeight = nil, max(tmpl.InvalidWeight, 1)
		}
		// A mirror whose backendRef does not resolve is reported as any other and left out;
		// the rule is served without it.
		for _, m := range mirrorRefs {
			mfield := fmt.Sprintf("%s.filters[%d].requestMirror.backendRef", field, m.fi)
			if name := t.routeBackend(out, gatewayv1.BackendRef{BackendObjectReference: m.ref}, mfield, unresolved, false); name != "" {
				tmpl.Mirrors = append(tmpl.Mirrors, &configv1.Mirror{Backend: name, Numerator: m.share.Numerator, Denominator: m.share.Denominator})
			}
		}
		if err := contract.CheckRoute(tmpl); err != nil {
			return drop("UnsupportedValue", fmt.Sprintf("filters: %v", err))
		}
	}

	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gatewayv1.HTTPRouteMatch{{}}
	}
	var cr compiledRule
	for mi, m := range matches {
		route := proto.Clone(tmpl).(*configv1.Route)
		prec := routePrec{age: rt.CreationTimestamp.Time, ns: rt.Namespace, name: rt.Name, rule: ri, match: mi, kindRank: 1}
		pm, err := httpPathMatch(m.Path)
		if err != "" {
			return drop("UnsupportedValue", fmt.Sprintf("matches[%d]: %s", mi, err))
		}
		if prefixRewrite && pm.Type != configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX {
			return drop("UnsupportedValue", fmt.Sprintf("matches[%d]: ReplacePrefixMatch needs a PathPrefix match", mi))
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
		seenHeader := map[string]bool{}
		for hi, h := range m.Headers {
			name := strings.ToLower(string(h.Name))
			if seenHeader[name] {
				continue // the spec: only the first match of a name counts
			}
			seenHeader[name] = true
			hm := &configv1.HeaderMatch{Name: string(h.Name), Value: h.Value, Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_EXACT}
			if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
				if _, err := regexp.Compile(h.Value); err != nil {
					return drop("UnsupportedValue", fmt.Sprintf("matches[%d].headers[%d]: invalid regular expression %q: %v", mi, hi, h.Value, err))
				}
				hm.Type = configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX
			} else if h.Type != nil && *h.Type != gatewayv1.HeaderMatchExact {
				return drop("UnsupportedValue", fmt.Sprintf("matches[%d].headers[%d]: match type %q is not supported", mi, hi, *h.Type))
			}
			route.Headers = append(route.Headers, hm)
		}
		seenQuery := map[string]bool{}
		for qi, q := range m.QueryParams {
			if seenQuery[string(q.Name)] {
				continue
			}
			seenQuery[string(q.Name)] = true
			qm := &configv1.QueryMatch{Name: string(q.Name), Value: q.Value, Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_EXACT}
			if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
				if _, err := regexp.Compile(q.Value); err != nil {
					return drop("UnsupportedValue", fmt.Sprintf("matches[%d].queryParams[%d]: invalid regular expression %q: %v", mi, qi, q.Value, err))
				}
				qm.Type = configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX
			} else if q.Type != nil && *q.Type != gatewayv1.QueryParamMatchExact {
				return drop("UnsupportedValue", fmt.Sprintf("matches[%d].queryParams[%d]: match type %q is not supported", mi, qi, *q.Type))
			}
			route.Query = append(route.Query, qm)
		}
		if m.Method != nil {
			route.Method = string(*m.Method)
			prec.method = true
		}
		prec.headers, prec.query = len(route.Headers), len(route.Query)
		// Every rule a data plane enforces (and the bounds on what a tenant controls), so
		// that none refuses the config for this rule.
		if err := contract.CheckRoute(route); err != nil {
			return drop("UnsupportedValue", fmt.Sprintf("matches[%d]: %v", mi, err))
		}
		cr.routes = append(cr.routes, route)
		cr.precs = append(cr.precs, prec)
	}
	return cr
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
