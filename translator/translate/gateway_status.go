package translate

import (
	"iter"
	"sort"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// GatewayStatuses returns what every Gateway API object the translator serves should show
// (GatewayClasses of Options.GatewayControllerName, their Gateways, and the HTTPRoutes that
// name one of those), sorted by kind, namespace and name. Like Translate, it is pure.
func GatewayStatuses(in Input, opts Options) []*watchv1.ObjectStatus {
	t := New(opts)
	for _, o := range in.objects() {
		t.Set(o)
	}
	t.Build()
	lb, manage := t.PublishedAddresses()
	addrs := contract.TypedAddresses(lb)
	keys := t.GatewayStatusKeys()
	out := make([]*watchv1.ObjectStatus, 0, len(keys))
	for _, k := range keys {
		out = append(out, t.GatewayStatus(k, addrs, manage))
	}
	return out
}

var kindRank = map[string]int{"Ingress": 0, "GatewayClass": 1, "Gateway": 2, "ListenerSet": 3, "HTTPRoute": 4, "BackendTLSPolicy": 5}

// LessObjectKey orders the keys of the status stream: Ingresses, then GatewayClasses,
// Gateways, ListenerSets, HTTPRoutes and BackendTLSPolicies, each by namespace and name.
func LessObjectKey(a, b *watchv1.ObjectKey) bool {
	if a.GetKind() != b.GetKind() {
		return kindRank[a.GetKind()] < kindRank[b.GetKind()]
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

// SortStatuses puts statuses of either API in their canonical order, by key (LessObjectKey).
func SortStatuses(s []*watchv1.ObjectStatus) {
	sort.Slice(s, func(i, j int) bool { return LessObjectKey(s[i].GetKey(), s[j].GetKey()) })
}

func objectKeyOf(key string) *watchv1.ObjectKey {
	kind, rest, _ := strings.Cut(key, "/")
	ns, name, _ := strings.Cut(rest, "/")
	return &watchv1.ObjectKey{Kind: kind, Namespace: ns, Name: name}
}

// StatusKeys returns the keys of every object served, of either API, sorted (LessObjectKey).
func (t *Translator) StatusKeys() []*watchv1.ObjectKey {
	return append(t.ServedKeys(), t.GatewayStatusKeys()...)
}

// ObjectStatus is the desired status of the object key names, of either API, nil when it is
// not served; addrs and manage are the published addresses (contract.TypedAddresses: one
// list every status shares, never modified) and whether they are known.
func (t *Translator) ObjectStatus(key *watchv1.ObjectKey, addrs []*watchv1.GatewayAddress, manage bool) *watchv1.ObjectStatus {
	if key.GetKind() == "Ingress" {
		return t.Status(key, addrs, manage)
	}
	return t.GatewayStatus(key, addrs, manage)
}

// GatewayStatusKeys returns the keys of every Gateway API object served, sorted.
func (t *Translator) GatewayStatusKeys() []*watchv1.ObjectKey {
	var out []*watchv1.ObjectKey
	for name := range t.gw.classes {
		if t.ourClass(name) {
			out = append(out, &watchv1.ObjectKey{Kind: "GatewayClass", Name: name})
		}
	}
	for k, o := range t.gw.gwOut {
		if o.ours {
			out = append(out, &watchv1.ObjectKey{Kind: "Gateway", Namespace: k.ns, Name: k.name})
			for sk := range o.sets {
				out = append(out, &watchv1.ObjectKey{Kind: "ListenerSet", Namespace: sk.ns, Name: sk.name})
			}
		}
	}
	for k, o := range t.gw.routeOut {
		if o.ours {
			out = append(out, &watchv1.ObjectKey{Kind: "HTTPRoute", Namespace: k.ns, Name: k.name})
		}
	}
	for k := range t.gw.pol.policies {
		if _, ancestors := t.policyStatus(k); len(ancestors) > 0 {
			out = append(out, &watchv1.ObjectKey{Kind: "BackendTLSPolicy", Namespace: k.ns, Name: k.name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return LessObjectKey(out[i], out[j]) })
	return out
}

// TakeGatewayStatusChanges returns the Gateway API objects whose status may have changed
// since the last call, sorted.
func (t *Translator) TakeGatewayStatusChanges() []*watchv1.ObjectKey {
	out := make([]*watchv1.ObjectKey, 0, len(t.gw.statusDirty))
	for k := range t.gw.statusDirty {
		out = append(out, objectKeyOf(k))
	}
	t.gw.statusDirty = set[string]{}
	sort.Slice(out, func(i, j int) bool { return LessObjectKey(out[i], out[j]) })
	return out
}

// SupportedFeatures are the Gateway API features Sluice declares on its GatewayClasses
// (status.supportedFeatures) whatever its settings, in ascending order: exactly those whose
// conformance tests all pass, as internal/harness/conformance checks by running the suite
// with what a GatewayClass declares. Features lists what a translator declares with its
// settings.
var SupportedFeatures = []string{
	"Gateway", "GatewayHTTPListenerIsolation", "HTTPRoute",
	"HTTPRoute303RedirectStatusCode", "HTTPRoute307RedirectStatusCode", "HTTPRoute308RedirectStatusCode",
	"HTTPRouteBackendProtocolH2C", "HTTPRouteBackendProtocolWebSocket", "HTTPRouteBackendRequestHeaderModification",
	"HTTPRouteBackendTimeout", "HTTPRouteCORS", "HTTPRouteHostRewrite", "HTTPRouteMethodMatching", "HTTPRouteNamedRouteRule",
	"HTTPRouteDestinationPortMatching",
	"HTTPRoutePathRedirect", "HTTPRoutePathRewrite", "HTTPRoutePortRedirect", "HTTPRouteQueryParamMatching",
	"HTTPRouteRequestMirror", "HTTPRouteRequestMultipleMirrors", "HTTPRouteRequestPercentageMirror",
	"HTTPRouteRequestTimeout", "HTTPRouteResponseHeaderModification", "HTTPRouteSchemeRedirect",
	"ListenerSet", "ReferenceGrant", "BackendTLSPolicy", "BackendTLSPolicySANValidation",
}

// Features are the Gateway API features a translator with opts declares, sorted: the
// SupportedFeatures, and those its settings make true (docs/design.md, "Gateway addresses and
// ports"): GatewayPort8080 when it serves HTTP listeners on 8080, HTTPRouteParentRefPort when
// it serves HTTP listeners on more than one port, GatewayStaticAddresses and
// GatewayAddressEmpty when Gateways get addresses of their own.
func Features(opts Options) []string {
	out := append([]string(nil), SupportedFeatures...)
	if servesPort(opts, 8080, false) {
		out = append(out, "GatewayPort8080")
	}
	for _, p := range opts.GatewayPorts {
		if !p.HTTPS {
			out = append(out, "HTTPRouteParentRefPort")
			break
		}
	}
	if len(opts.GatewayAddresses) > 0 {
		out = append(out, "GatewayAddressEmpty", "GatewayStaticAddresses")
	}
	sort.Strings(out)
	return out
}

// GatewayStatus is the desired status of one Gateway API object, nil when it is not served;
// lb and manage are the published addresses and whether they are known.
func (t *Translator) GatewayStatus(key *watchv1.ObjectKey, addrs []*watchv1.GatewayAddress, manage bool) *watchv1.ObjectStatus {
	k := nsName{key.GetNamespace(), key.GetName()}
	st := &watchv1.ObjectStatus{Key: &watchv1.ObjectKey{Kind: key.GetKind(), Namespace: key.GetNamespace(), Name: key.GetName()},
		ControllerName: t.gatewayControllerName()}
	var served bool
	switch key.GetKind() {
	case "GatewayClass":
		served = t.gatewayClassStatus(st, key.GetName())
	case "Gateway":
		served = t.gatewayStatus(st, k, addrs, manage)
	case "ListenerSet":
		served = t.listenerSetStatus(st, k)
	case "HTTPRoute":
		served = t.httpRouteStatus(st, k)
	case "BackendTLSPolicy":
		p, ancestors := t.policyStatus(k)
		if served = len(ancestors) > 0; served {
			st.Uid, st.Parents = string(p.UID), ancestors
		}
	}
	if !served {
		return nil
	}
	if g, ok := t.out.Get(contract.Findings, contract.KeyOfObject(&configv1.ObjectRef{Kind: key.GetKind(), Namespace: key.GetNamespace(), Name: key.GetName()})).(*configv1.ObjectFindings); ok {
		for _, f := range g.GetFindings() {
			if f.GetObject().GetKind() == key.GetKind() {
				st.Findings = append(st.Findings, statusFinding(f))
			}
		}
	}
	return st
}

// gatewayClassStatus fills st with GatewayClass name's status; false when it is not ours.
func (t *Translator) gatewayClassStatus(st *watchv1.ObjectStatus, name string) bool {
	c, ok := t.gw.classes[name]
	if !ok || !t.ourClass(name) {
		return false
	}
	st.Uid = string(c.UID)
	st.Conditions = []*watchv1.Condition{cond(gatewayv1.GatewayClassConditionStatusAccepted, condTrue, gatewayv1.GatewayClassReasonAccepted, "accepted by "+t.gatewayControllerName(), c.Generation)}
	st.SupportedFeatures = Features(t.opts)
	return true
}

// gatewayStatus fills st with Gateway k's status (lb and manage: the published addresses and
// whether they are known); false when it is not ours.
func (t *Translator) gatewayStatus(st *watchv1.ObjectStatus, k nsName, addrs []*watchv1.GatewayAddress, manage bool) bool {
	o := t.gw.gwOut[k]
	if o == nil || !o.ours {
		return false
	}
	st.Uid = string(o.gw.UID)
	st.Conditions = o.conditions
	attached := t.attachedRoutes(t.gw.routeUsers.all(k), func(p *parentOut) bool { return p.gw == k && p.set == nil })
	for _, lo := range o.listeners {
		st.Listeners = append(st.Listeners, &watchv1.ListenerStatus{Name: lo.name, AttachedRoutes: attached[lo.name],
			SupportedKinds: lo.kinds, Conditions: lo.conditions})
	}
	for _, so := range o.sets {
		if so.attached {
			st.AttachedListenerSets++
		}
	}
	st.ManageAddresses = manage
	if len(t.opts.GatewayAddresses) > 0 {
		// A Gateway of the pool shows its own address, or none while it has none.
		st.ManageAddresses = true
		if o.address != "" {
			st.Addresses = []*watchv1.GatewayAddress{{Type: string(gatewayv1.IPAddressType), Value: o.address}}
		}
	} else if manage {
		st.Addresses = addrs
	}
	return true
}

// listenerSetStatus fills st with ListenerSet k's status; false when it names no Gateway of
// ours.
func (t *Translator) listenerSetStatus(st *watchv1.ObjectStatus, k nsName) bool {
	so := t.listenerSetOut(k)
	if so == nil {
		return false
	}
	st.Uid = string(so.ls.UID)
	st.Conditions = so.conditions
	attached := t.attachedRoutes(t.gw.setRoutes.all(k), func(p *parentOut) bool { return p.set != nil && *p.set == k })
	for _, lo := range so.listeners {
		st.Listeners = append(st.Listeners, &watchv1.ListenerStatus{Name: lo.name, AttachedRoutes: attached[lo.name],
			SupportedKinds: lo.kinds, Conditions: lo.conditions})
	}
	return true
}

// httpRouteStatus fills st with HTTPRoute k's status, a parent status per parentRef to a
// Gateway of ours; false when it names none.
func (t *Translator) httpRouteStatus(st *watchv1.ObjectStatus, k nsName) bool {
	o := t.gw.routeOut[k]
	if o == nil || !o.ours {
		return false
	}
	st.Uid = string(o.rt.UID)
	for _, p := range o.parents {
		st.Parents = append(st.Parents, &watchv1.RouteParentStatus{ParentRef: parentReference(p.ref), Conditions: t.crossAPIConditions(httpRouteKey(k), p, o.rt.Generation)})
	}
	return true
}

// parentReference is a parentRef as written: unset stays unset.
func parentReference(pr gatewayv1.ParentReference) *watchv1.ParentReference {
	ref := &watchv1.ParentReference{Name: string(pr.Name)}
	if pr.Group != nil {
		ref.Group = string(*pr.Group)
	}
	if pr.Kind != nil {
		ref.Kind = string(*pr.Kind)
	}
	if pr.Namespace != nil {
		ref.Namespace = string(*pr.Namespace)
	}
	if pr.SectionName != nil {
		ref.SectionName = string(*pr.SectionName)
	}
	if pr.Port != nil {
		ref.Port = *pr.Port
	}
	return ref
}

// attachedRoutes counts, per listener name, the routes among routes attached to it through a
// parent that of says is the object's (a Gateway's own listeners, or a ListenerSet's).
func (t *Translator) attachedRoutes(routes iter.Seq[nsName], of func(*parentOut) bool) map[string]int32 {
	attached := map[string]int32{}
	for rk := range routes {
		ro := t.gw.routeOut[rk]
		if ro == nil {
			continue
		}
		names := map[string]bool{}
		for _, p := range ro.parents {
			if of(p) {
				for _, n := range p.attached {
					names[n] = true
				}
			}
		}
		for n := range names {
			attached[n]++
		}
	}
	return attached
}
