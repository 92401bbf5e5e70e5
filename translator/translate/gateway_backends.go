package translate

// HTTPRoute backendRefs: each resolved to a backend name (a Service port, or a backend of a
// BackendTLSPolicy's own), or refused with a ResolvedRefs reason.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

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
		unresolved(field, "InvalidKind", fmt.Sprintf("backendRef %s/%s %s is not a Service", group, kind, br.Name))
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
			unresolved(field, "RefNotPermitted", fmt.Sprintf("Service %s/%s is in another namespace and no ReferenceGrant there allows it", ns, sk.name))
			return ""
		}
	}
	svc, ok := t.services[sk]
	if !ok {
		unresolved(field, "BackendNotFound", fmt.Sprintf("Service %s/%s not found", ns, sk.name))
		return ""
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		unresolved(field, "InvalidKind", fmt.Sprintf("Service %s/%s is of type ExternalName, which is not supported", ns, sk.name))
		return ""
	}
	if br.Port == nil {
		unresolved(field+".port", "BackendNotFound", fmt.Sprintf("backendRef to Service %s/%s has no port", ns, sk.name))
		return ""
	}
	port := svc.port(*br.Port)
	if port == nil {
		unresolved(field+".port", "BackendNotFound", fmt.Sprintf("Service %s/%s has no port %d", ns, sk.name, *br.Port))
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
