package translate

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// externalAuthFilter is a rule's ExternalAuth filter (experimental channel) as routes carry
// it, its Backend left to resolve, or why the rule cannot be served with it: the HTTP
// protocol is served (the Gateway API's semantics, EXTERNAL_AUTH_STYLE_GATEWAY_API); GRPC
// (Envoy's ext_authz) and forwarding the body are not.
func externalAuthFilter(f *gatewayv1.HTTPExternalAuthFilter) (*configv1.ExternalAuth, string) {
	switch {
	case f == nil:
		return nil, "the filter has no externalAuth"
	case f.ExternalAuthProtocol != gatewayv1.HTTPRouteExternalAuthHTTPProtocol:
		return nil, fmt.Sprintf("protocol %s is not supported (HTTP is)", f.ExternalAuthProtocol)
	case f.ForwardBody != nil && f.ForwardBody.MaxSize > 0:
		return nil, "forwardBody is not supported: the request's body is never sent"
	}
	a := &configv1.ExternalAuth{Style: configv1.ExternalAuthStyle_EXTERNAL_AUTH_STYLE_GATEWAY_API, Path: "/"}
	if c := f.HTTPAuthConfig; c != nil {
		if c.Path != "" {
			a.Path = "/" + trimLeadingSlashes(c.Path)
		}
		a.RequestHeaders = append(a.RequestHeaders, c.AllowedRequestHeaders...)
		a.ResponseHeaders = append(a.ResponseHeaders, c.AllowedResponseHeaders...)
	}
	// The backend is checked with the rest once resolved; here the rest alone.
	check := proto.Clone(a).(*configv1.ExternalAuth)
	check.Backend = "pending"
	if err := contract.CheckExternalAuth(check); err != nil {
		return nil, err.Error()
	}
	return a, ""
}

func trimLeadingSlashes(p string) string {
	for len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	return p
}
