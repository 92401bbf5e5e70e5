package translate

// The Gateway API (sigs.k8s.io/gateway-api v1, standard channel): GatewayClass, Gateway,
// HTTPRoute and ReferenceGrant, translated into the same virtual hosts, backends and
// certificates as Ingresses. The units of work, beside the Ingress ones:
//   - a Gateway (this file): its listeners (protocol, port, hostname, certificate, allowed
//     routes; gateway_listeners.go) and their certificate claims, from its class, the
//     Secrets it names and the ReferenceGrants of the namespaces it refers into;
//   - an HTTPRoute (gateway_routes.go): its routes and certificate claims on every host where
//     it attaches to a listener, from the Gateways it names, the Services it names and the
//     ReferenceGrants of the namespaces it refers into; its rules are compiled apart
//     (gateway_rules.go, with gateway_filters.go and gateway_backends.go).
//
// A host served by both APIs is one virtual host: the HTTPRoutes' routes come first (in the
// Gateway API's precedence), then the Ingresses' (in theirs); a listener's certificate wins
// over an Ingress's, which gets a ConflictLost finding. That holds within one namespace: an
// Ingress and an HTTPRoute of different namespaces never share a host (crossapi.go).

import (
	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// GatewayGroup is the Gateway API's group.
const GatewayGroup = gatewayv1.GroupName

// Defaults of the Gateway API options.
const (
	DefaultGatewayControllerName = "sluice.io/gateway-controller"
	DefaultGatewayHTTPPort       = 80
	DefaultGatewayHTTPSPort      = 443
)

const (
	condTrue  = "True"
	condFalse = "False"
)

// gatewayState is the Gateway API part of a Translator.
type gatewayState struct {
	classes  map[string]*gatewayv1.GatewayClass
	gateways map[nsName]*gatewayv1.Gateway
	routes   map[nsName]*gatewayv1.HTTPRoute
	grants   map[string]map[string]contract.Grant // namespace -> name -> grant
	// listenerSets are translated with the Gateway they name (listenerset.go).
	listenerSets map[nsName]*gatewayv1.ListenerSet
	// namespaces are the labels of the Namespaces watched (a Selector listener reads them).
	namespaces map[string]map[string]string
	// pol are the BackendTLSPolicies and their ConfigMaps (backendtlspolicy.go).
	pol policyState

	// What depends on what.
	classUsers  index[string, nsName]        // GatewayClass -> Gateways naming it
	routeUsers  index[nsName, nsName]        // Gateway -> HTTPRoutes naming it in parentRefs (found or not)
	svcUsers    index[nsName, nsName]        // Service -> HTTPRoutes naming it (found or not)
	secretUsers index[nsName, nsName]        // Secret -> Gateways naming it (found or not)
	grantGws    index[string, nsName]        // namespace -> Gateways referring into it
	grantRoutes index[string, nsName]        // namespace -> HTTPRoutes referring into it
	nsRoutes    index[string, nsName]        // namespace -> its HTTPRoutes a Selector listener judged by its labels
	hostUsers   index[string, string]        // host -> findings keys of the Gateways and HTTPRoutes claiming it
	hostLost    map[string]map[string]string // host -> HTTPRoutes refused there (crossAPIRefused) -> who keeps it
	setsOf      index[nsName, nsName]        // Gateway -> ListenerSets naming it as parent (found or not)
	setRoutes   index[nsName, nsName]        // ListenerSet -> HTTPRoutes naming it in parentRefs (found or not)
	// lhosts count the served listeners' hostnames on each proxy listener, and lhBefore
	// holds, for the entries changed since the last Build, their count then (isolation.go).
	lhosts   map[proxyListener]map[string]int
	lhBefore map[lhKey]int

	// What was built.
	gwOut    map[nsName]*gatewayOut
	routeOut map[nsName]*routeOut

	// Work since the last Build.
	dirtyGateways, dirtyRoutes set[nsName]
	// addresses is the address pool's assignment (assignAddresses), when there is a pool.
	addresses   map[nsName]addressGrant
	statusDirty set[string] // status keys (findings keys) of GatewayClasses, Gateways, HTTPRoutes
}

func newGatewayState() gatewayState {
	return gatewayState{
		classes: map[string]*gatewayv1.GatewayClass{}, gateways: map[nsName]*gatewayv1.Gateway{},
		routes: map[nsName]*gatewayv1.HTTPRoute{}, grants: map[string]map[string]contract.Grant{}, namespaces: map[string]map[string]string{},
		classUsers: newIndex[string, nsName](), routeUsers: newIndex[nsName, nsName](), svcUsers: newIndex[nsName, nsName](),
		secretUsers: newIndex[nsName, nsName](), grantGws: newIndex[string, nsName](), grantRoutes: newIndex[string, nsName](), nsRoutes: newIndex[string, nsName](),
		hostUsers: newIndex[string, string](), hostLost: map[string]map[string]string{},
		listenerSets: map[nsName]*gatewayv1.ListenerSet{}, setsOf: newIndex[nsName, nsName](), setRoutes: newIndex[nsName, nsName](),
		lhosts: map[proxyListener]map[string]int{}, lhBefore: map[lhKey]int{},
		gwOut: map[nsName]*gatewayOut{}, routeOut: map[nsName]*routeOut{}, pol: newPolicyState(),
		dirtyGateways: set[nsName]{}, dirtyRoutes: set[nsName]{}, statusDirty: set[string]{},
	}
}

// gatewayOut is what one Gateway contributes.
type gatewayOut struct {
	gw         *gatewayv1.Gateway
	class      string
	ours       bool
	listeners  []*listenerOut
	conditions []*watchv1.Condition
	findings   []*configv1.Finding
	secrets    []nsName
	grantNs    []string
	claims     map[string][]gwClaim // host -> certificate claims
	// address is the Gateway's own address from the pool; "" when it shares the proxies'.
	address string
	// sets are the ListenerSets naming it, attached or not.
	sets map[nsName]*setOut
	// setsByLabels says its allowedListeners judges ListenerSets by their namespace's labels.
	setsByLabels bool
}

func gatewayKey(k nsName) string   { return "Gateway/" + k.ns + "/" + k.name }
func httpRouteKey(k nsName) string { return "HTTPRoute/" + k.ns + "/" + k.name }
func classKey(name string) string  { return "GatewayClass//" + name }

func gwRef(kind string, ns, name, uid string) *configv1.ObjectRef {
	return &configv1.ObjectRef{Group: GatewayGroup, Kind: kind, Namespace: ns, Name: name, Uid: uid}
}

func (t *Translator) gatewayControllerName() string {
	if t.opts.GatewayControllerName != "" {
		return t.opts.GatewayControllerName
	}
	return DefaultGatewayControllerName
}

func (t *Translator) gatewayPort(s configv1.RouteScheme) int32 {
	if s == configv1.RouteScheme_ROUTE_SCHEME_HTTPS {
		if t.opts.GatewayHTTPSPort != 0 {
			return t.opts.GatewayHTTPSPort
		}
		return DefaultGatewayHTTPSPort
	}
	if t.opts.GatewayHTTPPort != 0 {
		return t.opts.GatewayHTTPPort
	}
	return DefaultGatewayHTTPPort
}

// setGateway records a change of a Gateway API object; other kinds are ignored.
func (t *Translator) setGateway(obj any) {
	g := &t.gw
	switch o := obj.(type) {
	case *gatewayv1.GatewayClass:
		g.classes[o.Name] = o
		t.gatewayClassChanged(o.Name)
	case *gatewayv1.Gateway:
		k := nsName{o.Namespace, o.Name}
		g.gateways[k] = o
		g.dirtyGateways.add(k)
	case *gatewayv1.HTTPRoute:
		k := nsName{o.Namespace, o.Name}
		g.routes[k] = o
		g.dirtyRoutes.add(k)
	case *gatewayv1.ListenerSet:
		t.setListenerSet(nsName{o.Namespace, o.Name}, o)
	case *gatewayv1.BackendTLSPolicy:
		t.setPolicy(nsName{o.Namespace, o.Name}, o)
	case *corev1.ConfigMap:
		t.setConfigMap(nsName{o.Namespace, o.Name}, o)
	case *gatewayv1.ReferenceGrant:
		if g.grants[o.Namespace] == nil {
			g.grants[o.Namespace] = map[string]contract.Grant{}
		}
		g.grants[o.Namespace][o.Name] = grantOf(o)
		t.grantChanged(o.Namespace)
	case *gatewayv1beta1.ReferenceGrant:
		t.setGateway((*gatewayv1.ReferenceGrant)(o)) // the same schema in both versions
	case *corev1.Namespace:
		t.setNamespace(o.Name, o)
	}
}

func (t *Translator) removeGateway(obj any) {
	g := &t.gw
	switch o := obj.(type) {
	case *gatewayv1.GatewayClass:
		delete(g.classes, o.Name)
		t.gatewayClassChanged(o.Name)
	case *gatewayv1.Gateway:
		k := nsName{o.Namespace, o.Name}
		delete(g.gateways, k)
		g.dirtyGateways.add(k)
	case *gatewayv1.HTTPRoute:
		k := nsName{o.Namespace, o.Name}
		delete(g.routes, k)
		g.dirtyRoutes.add(k)
	case *gatewayv1.ListenerSet:
		t.setListenerSet(nsName{o.Namespace, o.Name}, nil)
	case *gatewayv1.BackendTLSPolicy:
		t.setPolicy(nsName{o.Namespace, o.Name}, nil)
	case *corev1.ConfigMap:
		t.setConfigMap(nsName{o.Namespace, o.Name}, nil)
	case *gatewayv1.ReferenceGrant:
		delete(g.grants[o.Namespace], o.Name)
		if len(g.grants[o.Namespace]) == 0 {
			delete(g.grants, o.Namespace)
		}
		t.grantChanged(o.Namespace)
	case *gatewayv1beta1.ReferenceGrant:
		t.removeGateway((*gatewayv1.ReferenceGrant)(o))
	case *corev1.Namespace:
		t.setNamespace(o.Name, nil)
	}
}

func (t *Translator) gatewayClassChanged(name string) {
	for k := range t.gw.classUsers.all(name) {
		t.gw.dirtyGateways.add(k)
	}
	t.gw.statusDirty.add(classKey(name))
}

// grantChanged re-translates every Gateway and HTTPRoute that refers into namespace ns: a
// coarse dependency (not per grant), but one namespace's objects only.
func (t *Translator) grantChanged(ns string) {
	for k := range t.gw.grantGws.all(ns) {
		t.gw.dirtyGateways.add(k)
	}
	for k := range t.gw.grantRoutes.all(ns) {
		t.gw.dirtyRoutes.add(k)
	}
}

// granted says whether a ReferenceGrant in toNs lets a fromKind of fromNs refer to the core
// object toKind/toName.
func (t *Translator) granted(fromNs, fromKind, toNs, toKind, toName string) bool {
	for _, g := range t.gw.grants[toNs] {
		if g.Allows(fromNs, fromKind, toKind, toName) {
			return true
		}
	}
	return false
}

// grantOf is a ReferenceGrant's spec as the contract reads it: the watcher serves a Secret
// across namespaces under the same rule (contract.Grant.Allows).
func grantOf(g *gatewayv1.ReferenceGrant) contract.Grant {
	var out contract.Grant
	for _, f := range g.Spec.From {
		out.From = append(out.From, contract.GrantFrom{Group: string(f.Group), Kind: string(f.Kind), Namespace: string(f.Namespace)})
	}
	for _, to := range g.Spec.To {
		c := contract.GrantTo{Group: string(to.Group), Kind: string(to.Kind)}
		if to.Name != nil {
			c.Name = string(*to.Name)
		}
		out.To = append(out.To, c)
	}
	return out
}

// ours reports whether the GatewayClass name is served by this translator.
func (t *Translator) ourClass(name string) bool {
	c, ok := t.gw.classes[name]
	return ok && string(c.Spec.ControllerName) == t.gatewayControllerName()
}

func (t *Translator) retranslateGateway(k nsName) {
	g := &t.gw
	if old, ok := g.gwOut[k]; ok {
		t.unindexGateway(k, old)
		t.setsChanged(old)
	}
	delete(g.gwOut, k)
	key := gatewayKey(k)
	t.dirtyFindings.add(key)
	g.statusDirty.add(key)
	for rt := range g.routeUsers.all(k) {
		g.dirtyRoutes.add(rt)
	}
	gw, ok := g.gateways[k]
	if !ok {
		return
	}
	out := t.translateGateway(gw)
	g.gwOut[k] = out
	t.setsChanged(out)
	g.classUsers.add(out.class, k)
	for _, s := range out.secrets {
		g.secretUsers.add(s, k)
	}
	for _, ns := range out.grantNs {
		g.grantGws.add(ns, k)
	}
	for h := range out.claims {
		g.hostUsers.add(h, key)
		t.dirtyHosts.add(h)
	}
	t.countListenerHosts(out, 1)
}

func (t *Translator) unindexGateway(k nsName, out *gatewayOut) {
	g := &t.gw
	g.classUsers.remove(out.class, k)
	for _, s := range out.secrets {
		g.secretUsers.remove(s, k)
	}
	for _, ns := range out.grantNs {
		g.grantGws.remove(ns, k)
	}
	for h := range out.claims {
		g.hostUsers.remove(h, gatewayKey(k))
		t.dirtyHosts.add(h)
	}
	t.countListenerHosts(out, -1)
}

// cond is a condition; its type and reason may be the Gateway API's typed constants.
func cond[T, R ~string](typ T, status string, reason R, msg string, gen int64) *watchv1.Condition {
	return &watchv1.Condition{Type: string(typ), Status: status, Reason: string(reason), Message: msg, ObservedGeneration: gen}
}

// translateGateway is the part of the translation that depends on one Gateway (and on its
// class, the Secrets it names and the grants of the namespaces it refers into).
func (t *Translator) translateGateway(gw *gatewayv1.Gateway) *gatewayOut {
	out := &gatewayOut{gw: gw, class: string(gw.Spec.GatewayClassName), claims: map[string][]gwClaim{}, sets: map[nsName]*setOut{}}
	if !t.ourClass(out.class) {
		return out
	}
	out.ours = true
	gen := gw.Generation
	owner := gwRef("Gateway", gw.Namespace, gw.Name, string(gw.UID))
	add := func(field string, sev configv1.FindingSeverity, reason, cause string) {
		out.findings = append(out.findings, &configv1.Finding{Object: owner, Field: field, Cause: cause, Severity: sev, Reason: reason})
	}
	var addrRefused *addressGrant
	switch {
	case len(t.opts.GatewayAddresses) > 0:
		g := t.gw.addresses[nsName{gw.Namespace, gw.Name}]
		if g.address == "" {
			addrRefused = &g
			add("spec.addresses", sevError, g.reason, "the Gateway has no address, so none of its listeners is served: "+g.message)
		}
		out.address = g.address
	case len(gw.Spec.Addresses) > 0:
		add("spec.addresses", sevWarn, string(gatewayv1.GatewayReasonUnsupportedAddress), "requested addresses are not supported without a pool of Gateway addresses; status.addresses shows the proxy's published addresses")
	}
	lc := &listenerCtx{out: out, ns: gw.Namespace, kind: "Gateway", owner: owner, gen: gen, add: add, addrRefused: addrRefused,
		field: "spec.listeners", age: gw.CreationTimestamp.Time, name: gw.Name, taken: map[hostPort]string{}, protocols: map[int32]gatewayv1.ProtocolType{}}
	for i, l := range gw.Spec.Listeners {
		out.listeners = append(out.listeners, t.translateListener(lc, i, l))
	}
	accepted, programmed := 0, 0
	for _, lo := range out.listeners {
		if lo.conditions[0].Status == condTrue {
			accepted++
		}
		if lo.served {
			programmed++
		}
	}
	switch {
	case addrRefused != nil && addrRefused.unsupported:
		out.conditions = append(out.conditions, cond(gatewayv1.GatewayConditionAccepted, condFalse, addrRefused.reason, addrRefused.message, gen))
	case accepted == len(out.listeners):
		out.conditions = append(out.conditions, cond(gatewayv1.GatewayConditionAccepted, condTrue, gatewayv1.GatewayReasonAccepted, "gateway accepted", gen))
	case accepted > 0:
		out.conditions = append(out.conditions, cond(gatewayv1.GatewayConditionAccepted, condTrue, gatewayv1.GatewayReasonListenersNotValid, "some listeners are not valid: see their conditions", gen))
	default:
		out.conditions = append(out.conditions, cond(gatewayv1.GatewayConditionAccepted, condFalse, gatewayv1.GatewayReasonListenersNotValid, "no listener is valid: see their conditions", gen))
	}
	switch {
	case addrRefused != nil && addrRefused.unsupported:
		out.conditions = append(out.conditions, cond(gatewayv1.GatewayConditionProgrammed, condFalse, gatewayv1.GatewayReasonInvalid, "the Gateway is not accepted", gen))
	case addrRefused != nil:
		out.conditions = append(out.conditions, cond(gatewayv1.GatewayConditionProgrammed, condFalse, addrRefused.reason, addrRefused.message, gen))
	case programmed > 0:
		out.conditions = append(out.conditions, cond(gatewayv1.GatewayConditionProgrammed, condTrue, gatewayv1.GatewayReasonProgrammed, "gateway programmed", gen))
	default:
		out.conditions = append(out.conditions, cond(gatewayv1.GatewayConditionProgrammed, condFalse, gatewayv1.GatewayReasonInvalid, "no listener is programmed", gen))
	}
	// Listeners of the ListenerSets it admits come after its own, oldest set first.
	t.translateListenerSets(out, lc)
	return out
}
