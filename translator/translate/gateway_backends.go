package translate

// HTTPRoute backendRefs: each resolved to a backend name (a Service port, or a backend of a
// BackendTLSPolicy's own), or refused with a ResolvedRefs reason.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// routeBackend resolves a backendRef to a backend name ("" when refused: the reference is
// reported through unresolved and gets no traffic). With policies, a BackendTLSPolicy that
// governs the Service port makes the backend its own (policyBackend); one that cannot be used
// makes it "" without a route condition: the policy's status says why, and the share is
// answered 500, as the Gateway API asks.
func (t *Translator) routeBackend(out *routeOut, br gatewayv1.BackendRef, field string, unresolved func(field, reason, msg string), policies bool) string {
	rt := out.rt
	group, kind := "", "Service"
	if br.Group != nil {
		group = string(*br.Group)
	}
	if br.Kind != nil {
		kind = string(*br.Kind)
	}
	if group != "" || kind != "Service" {
		unresolved(field, string(gatewayv1.RouteReasonInvalidKind), fmt.Sprintf("backendRef %s/%s %s is not a Service", group, kind, br.Name))
		return ""
	}
	ns := rt.Namespace
	if br.Namespace != nil {
		ns = string(*br.Namespace)
	}
	sk := nsName{ns, string(br.Name)}
	out.services = append(out.services, sk)
	if ns != rt.Namespace {
		out.grantNs = append(out.grantNs, ns)
		if !t.granted(rt.Namespace, "HTTPRoute", ns, "Service", sk.name) {
			unresolved(field, string(gatewayv1.RouteReasonRefNotPermitted), fmt.Sprintf("Service %s/%s is in another namespace and no ReferenceGrant there allows it", ns, sk.name))
			return ""
		}
	}
	svc, ok := t.services[sk]
	if !ok {
		unresolved(field, string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s/%s not found", ns, sk.name))
		return ""
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		unresolved(field, string(gatewayv1.RouteReasonInvalidKind), fmt.Sprintf("Service %s/%s is of type ExternalName, which is not supported", ns, sk.name))
		return ""
	}
	if br.Port == nil {
		unresolved(field+".port", string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("backendRef to Service %s/%s has no port", ns, sk.name))
		return ""
	}
	port := svc.port(*br.Port)
	if port == nil {
		unresolved(field+".port", string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s/%s has no port %d", ns, sk.name, *br.Port))
		return ""
	}
	name := backendName(ns, sk.name, *br.Port)
	var bt *configv1.BackendTLS
	if policies {
		pname, pbt, ok := t.policyBackend(sk, *port)
		if !ok {
			return ""
		}
		if pname != "" {
			name, bt = pname, pbt
		}
	}
	out.refs = append(out.refs, backendRef{name: name, field: field, tls: bt})
	return name
}

// ruleBackends adds a rule's backendRefs and mirrors to its route template tmpl, for a rule
// that sends its requests on (it does not redirect), and returns why the rule is dropped
// ("" when it is not). authFailed: the rule's authentication service does not resolve.
func (t *Translator) ruleBackends(out *routeOut, tmpl *configv1.Route, refs []gatewayv1.HTTPBackendRef, mirrors []mirrorRef, field string, authFailed bool, unresolved func(field, reason, msg string)) string {
	for bi, br := range refs {
		bfield := fmt.Sprintf("%s.backendRefs[%d]", field, bi)
		reqHeaders, why := backendRefFilters(br, bi)
		if why != "" {
			return why
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
	for _, m := range mirrors {
		mfield := fmt.Sprintf("%s.filters[%d].requestMirror.backendRef", field, m.fi)
		if name := t.routeBackend(out, gatewayv1.BackendRef{BackendObjectReference: m.ref}, mfield, unresolved, false); name != "" {
			tmpl.Mirrors = append(tmpl.Mirrors, &configv1.Mirror{Backend: name, Numerator: m.share.Numerator, Denominator: m.share.Denominator})
		}
	}
	if err := contract.CheckRoute(tmpl); err != nil {
		return fmt.Sprintf("filters: %v", err)
	}
	return ""
}
