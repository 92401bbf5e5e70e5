package translate

// HTTPRoute filters: what a rule's filters ask of its routes (headers, redirects, rewrites,
// mirrors, CORS), translated into the route they are applied to.

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

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
