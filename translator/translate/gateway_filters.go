package translate

// HTTPRoute filters: what a rule's filters ask of its routes (headers, redirects, rewrites,
// mirrors, CORS), translated into the route they are applied to.

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

func headerModifier(f *gatewayv1.HTTPHeaderFilter) *configv1.HeaderModifier {
	if f == nil {
		return nil
	}
	m := &configv1.HeaderModifier{Remove: append([]string(nil), f.Remove...)}
	for _, h := range f.Set {
		m.Set = append(m.Set, &configv1.HeaderValue{Name: string(h.Name), Value: h.Value})
	}
	for _, h := range f.Add {
		m.Add = append(m.Add, &configv1.HeaderValue{Name: string(h.Name), Value: h.Value})
	}
	return m
}

// pathModifier translates a redirect's or rewrite's path; prefix says it replaces the
// matched prefix.
func pathModifier(p *gatewayv1.HTTPPathModifier) (*configv1.PathModifier, bool, string) {
	if p == nil {
		return nil, false, ""
	}
	switch p.Type {
	case gatewayv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath == nil {
			return nil, false, "ReplaceFullPath without replaceFullPath"
		}
		return &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL, Value: *p.ReplaceFullPath}, false, ""
	case gatewayv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch == nil {
			return nil, false, "ReplacePrefixMatch without replacePrefixMatch"
		}
		return &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_PREFIX, Value: *p.ReplacePrefixMatch}, true, ""
	}
	return nil, false, fmt.Sprintf("path modifier type %q is not supported", p.Type)
}

// ruleFilters is what compileRule keeps of a rule's filters beside its route template: the
// references it resolves with the rule's backendRefs, and whether a path replaces the
// matched prefix (which needs PathPrefix matches).
type ruleFilters struct {
	prefixRewrite bool
	mirrors       []mirrorRef
	authRef       *gatewayv1.HTTPExternalAuthFilter
	authCfg       *configv1.ExternalAuth // Backend unset until authRef resolves
	authField     string
}

// mirrorRef is a RequestMirror filter's backendRef, resolved with the rule's backendRefs.
type mirrorRef struct {
	fi    int
	ref   gatewayv1.BackendObjectReference
	share *configv1.Mirror
}

// compileFilters applies a rule's filters to its route template tmpl and returns what is
// resolved with the rule's backendRefs, or why the rule is dropped ("" when it is not).
func compileFilters(tmpl *configv1.Route, filters []gatewayv1.HTTPRouteFilter, field string) (ruleFilters, string) {
	var rf ruleFilters
	for fi, f := range filters {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterExternalAuth:
			a, why := externalAuthFilter(f.ExternalAuth)
			if why != "" {
				return rf, fmt.Sprintf("filters[%d]: externalAuth: %s", fi, why)
			}
			rf.authCfg, rf.authRef = a, f.ExternalAuth
			rf.authField = fmt.Sprintf("%s.filters[%d].externalAuth.backendRef", field, fi)
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			tmpl.RequestHeaders = headerModifier(f.RequestHeaderModifier)
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			tmpl.ResponseHeaders = headerModifier(f.ResponseHeaderModifier)
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			red, prefix, why := requestRedirect(f.RequestRedirect, fi)
			if why != "" {
				return rf, why
			}
			rf.prefixRewrite = rf.prefixRewrite || prefix
			tmpl.Redirect = red
		case gatewayv1.HTTPRouteFilterURLRewrite:
			rw, prefix, why := urlRewrite(f.URLRewrite, fi)
			if why != "" {
				return rf, why
			}
			rf.prefixRewrite = rf.prefixRewrite || prefix
			tmpl.Rewrite = rw
		case gatewayv1.HTTPRouteFilterRequestMirror:
			m := f.RequestMirror
			if m == nil {
				return rf, fmt.Sprintf("filters[%d] has no requestMirror", fi)
			}
			share, why := mirrorShare(m, fi)
			if why != "" {
				return rf, why
			}
			rf.mirrors = append(rf.mirrors, mirrorRef{fi, m.BackendRef, share})
		case gatewayv1.HTTPRouteFilterCORS:
			if f.CORS == nil {
				return rf, fmt.Sprintf("filters[%d] has no cors", fi)
			}
			tmpl.Cors = corsFilter(f.CORS)
		default:
			return rf, fmt.Sprintf("filters[%d]: filter type %q is not supported", fi, f.Type)
		}
	}
	return rf, ""
}

// requestRedirect translates filter fi's RequestRedirect and says whether its path replaces
// the matched prefix, or why the rule is dropped ("" when it is not).
func requestRedirect(r *gatewayv1.HTTPRequestRedirectFilter, fi int) (*configv1.Redirect, bool, string) {
	if r == nil {
		return nil, false, fmt.Sprintf("filters[%d] has no requestRedirect", fi)
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
		return nil, false, fmt.Sprintf("filters[%d]: %s", fi, err)
	}
	red.Path = pm
	return red, prefix, ""
}

// urlRewrite translates filter fi's URLRewrite and says whether its path replaces the
// matched prefix, or why the rule is dropped ("" when it is not).
func urlRewrite(r *gatewayv1.HTTPURLRewriteFilter, fi int) (*configv1.Rewrite, bool, string) {
	if r == nil {
		return nil, false, fmt.Sprintf("filters[%d] has no urlRewrite", fi)
	}
	rw := &configv1.Rewrite{}
	if r.Hostname != nil {
		rw.Hostname = string(*r.Hostname)
	}
	pm, prefix, err := pathModifier(r.Path)
	if err != "" {
		return nil, false, fmt.Sprintf("filters[%d]: %s", fi, err)
	}
	rw.Path = pm
	return rw, prefix, ""
}

// mirrorShare is the share of the requests filter fi's RequestMirror mirrors (its backendRef
// is resolved with the rule's), or why the rule is dropped ("" when it is not).
func mirrorShare(m *gatewayv1.HTTPRequestMirrorFilter, fi int) (*configv1.Mirror, string) {
	// Every request without a share; a percent p is p/100.
	share := &configv1.Mirror{Numerator: 100, Denominator: 100}
	switch {
	case m.Percent != nil && m.Fraction != nil:
		return nil, fmt.Sprintf("filters[%d]: requestMirror has both percent and fraction", fi)
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
		return nil, fmt.Sprintf("filters[%d]: %v", fi, err)
	}
	return share, ""
}

// corsFilter translates a CORS filter.
func corsFilter(c *gatewayv1.HTTPCORSFilter) *configv1.Cors {
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
	return cors
}

// backendRefFilters translates backendRef bi's filters, or says why the rule is dropped (""
// when it is not). A backendRef's filters apply only when that backend is picked, after the
// rule's.
func backendRefFilters(br gatewayv1.HTTPBackendRef, bi int) (*configv1.HeaderModifier, string) {
	var reqHeaders *configv1.HeaderModifier
	for fi, f := range br.Filters {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			reqHeaders = headerModifier(f.RequestHeaderModifier)
		default:
			return nil, fmt.Sprintf("backendRefs[%d].filters[%d]: filter type %q is not supported on a backendRef", bi, fi, f.Type)
		}
	}
	if err := contract.CheckRoute(&configv1.Route{RequestHeaders: reqHeaders}); err != nil {
		return nil, fmt.Sprintf("backendRefs[%d].filters: %v", bi, err)
	}
	return reqHeaders, ""
}
