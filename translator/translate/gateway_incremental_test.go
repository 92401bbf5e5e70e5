package translate

import (
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// The Gateway API's part of the universe: small pools again, so that Gateways, routes and
// grants collide (shared hosts, routes naming Gateways that come and go or change class,
// grants that appear under cross-namespace references, listeners that conflict).
var (
	uGwClasses   = []string{"gw-ours", "gw-other", "gw-missing"}
	uGateways    = []string{"gw0", "gw1"}
	uListeners   = []string{"l0", "l1", "l2", "nope"}
	uGwHosts     = []string{"", "foo.example.com", "*.wild.example.com", "x.wild.example.com", "*.example.com"}
	uRouteHosts  = []string{"foo.example.com", "x.wild.example.com", "bar.example.com", "*.wild.example.com"}
	uRoutePaths  = []string{"/", "/api", "/api/", "/v[0-9]+"}
	uRouteNames  = []string{"r0", "r1", "r2", "r3"}
	uGrantNames  = []string{"grant0", "grant1"}
	uControllers = []string{DefaultGatewayControllerName, "example.com/other"}
	// Selectors of a Selector listener: none (refused), every namespace, one team, and one
	// that does not parse (refused).
	uSelectors = []*metav1.LabelSelector{nil, {}, {MatchLabels: map[string]string{"team": "a"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}}
)

// gatewayObject returns a random Gateway API object: k picks the kind.
func (u *universe) gatewayObject(k int) any {
	switch k % 4 {
	case 0:
		c := &gatewayv1.GatewayClass{ObjectMeta: u.meta("", u.pick(uGwClasses))}
		c.Spec.ControllerName = gatewayv1.GatewayController(u.pick(uControllers))
		return c
	case 1:
		return u.gateway()
	case 2:
		return u.httpRoute()
	}
	switch u.r.IntN(4) {
	case 0:
		return u.listenerSet()
	case 1:
		return u.backendTLSPolicy()
	case 2:
		return u.caConfigMap()
	}
	return u.grant()
}

// uPolicies and uCAs are the BackendTLSPolicies' and their ConfigMaps' names.
var (
	uPolicies = []string{"p0", "p1"}
	uCAs      = []string{"ca0", "ca1"}
)

// backendTLSPolicy returns a policy on a Service of the pool (the whole Service or one port),
// trusting ConfigMaps of the pool or the system's certificates.
func (u *universe) backendTLSPolicy() *gatewayv1.BackendTLSPolicy {
	p := &gatewayv1.BackendTLSPolicy{ObjectMeta: u.meta(u.pick(uNamespaces), u.pick(uPolicies))}
	p.Generation = int64(1 + u.r.IntN(3))
	ref := gatewayv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: gatewayv1.ObjectName(u.pick(uServices))}}
	if u.r.IntN(2) == 0 {
		ref.SectionName = ptr.To(gatewayv1.SectionName(u.pick([]string{"http", "grpc"})))
	}
	p.Spec.TargetRefs = []gatewayv1.LocalPolicyTargetReferenceWithSectionName{ref}
	p.Spec.Validation.Hostname = "backend.internal"
	if u.r.IntN(4) == 0 {
		p.Spec.Validation.WellKnownCACertificates = ptr.To(gatewayv1.WellKnownCACertificatesSystem)
	} else {
		for range 1 + u.r.IntN(2) {
			p.Spec.Validation.CACertificateRefs = append(p.Spec.Validation.CACertificateRefs, gatewayv1.LocalObjectReference{Kind: "ConfigMap", Name: gatewayv1.ObjectName(u.pick(uCAs))})
		}
	}
	return p
}

// caConfigMap returns a ConfigMap of the pool whose ca.crt is a certificate, or not one.
func (u *universe) caConfigMap() *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: u.meta(u.pick(uNamespaces), u.pick(uCAs)), Data: map[string]string{"ca.crt": string(u.certs[0])}}
	if u.r.IntN(4) == 0 {
		cm.Data["ca.crt"] = "not a certificate"
	}
	return cm
}

// uListenerSets are the ListenerSets' names: a route may name one that is not there.
var uListenerSets = []string{"ls0", "ls1"}

// listenerSet returns a ListenerSet naming a Gateway of the pool, with listeners that may
// conflict with the Gateway's and with each other's.
func (u *universe) listenerSet() *gatewayv1.ListenerSet {
	ls := &gatewayv1.ListenerSet{ObjectMeta: u.meta(u.pick(uNamespaces), u.pick(uListenerSets))}
	ls.Generation = int64(1 + u.r.IntN(3))
	ls.Spec.ParentRef = gatewayv1.ParentGatewayReference{Name: gatewayv1.ObjectName(u.pick(uGateways))}
	if u.r.IntN(2) == 0 {
		ls.Spec.ParentRef.Namespace = ptr.To(gatewayv1.Namespace(u.pick(uNamespaces)))
	}
	g := u.gateway() // its listeners' shapes
	for _, l := range g.Spec.Listeners {
		ls.Spec.Listeners = append(ls.Spec.Listeners, gatewayv1.ListenerEntry(l))
	}
	return ls
}

func (u *universe) gateway() *gatewayv1.Gateway {
	g := &gatewayv1.Gateway{ObjectMeta: u.meta(u.pick(uNamespaces), u.pick(uGateways))}
	g.Generation = int64(1 + u.r.IntN(3))
	g.Spec.GatewayClassName = gatewayv1.ObjectName(u.pick(uGwClasses))
	for i := range 1 + u.r.IntN(3) {
		l := gatewayv1.Listener{Name: gatewayv1.SectionName(uListeners[i])}
		switch u.r.IntN(6) {
		case 0:
			l.Protocol, l.Port = gatewayv1.TCPProtocolType, 80
		case 1, 2:
			l.Protocol, l.Port = gatewayv1.HTTPSProtocolType, 443
		default:
			l.Protocol, l.Port = gatewayv1.HTTPProtocolType, 80
		}
		if u.r.IntN(8) == 0 {
			l.Port = 8080
		}
		if h := u.pick(uGwHosts); h != "" {
			l.Hostname = ptr.To(gatewayv1.Hostname(h))
		}
		if l.Protocol == gatewayv1.HTTPSProtocolType && u.r.IntN(8) > 0 {
			ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(u.pick(uSecrets))}
			if u.r.IntN(3) == 0 {
				ref.Namespace = ptr.To(gatewayv1.Namespace(u.pick(uNamespaces)))
			}
			l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{ref}}
		}
		switch u.r.IntN(6) {
		case 0:
			l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromSelector),
				Selector: uSelectors[u.r.IntN(len(uSelectors))]}}
		case 1:
			l.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "GRPCRoute"}}}
		case 2, 3:
			l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromAll)}}
		}
		g.Spec.Listeners = append(g.Spec.Listeners, l)
	}
	// Admits ListenerSets of no, its own, every or the selected namespaces.
	switch u.r.IntN(4) {
	case 1:
		g.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptr.To(gatewayv1.NamespacesFromSame)}}
	case 2:
		g.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptr.To(gatewayv1.NamespacesFromAll)}}
	case 3:
		g.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptr.To(gatewayv1.NamespacesFromSelector),
			Selector: uSelectors[u.r.IntN(len(uSelectors))]}}
	}
	// Asks for an address of the pool (the seeds that have one), the reserved one, or for
	// one outside both; shows one in its status (as if given it before).
	if u.r.IntN(5) == 0 {
		g.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Value: u.pick([]string{"192.0.2.21", "192.0.2.99", "192.0.2.98", ""})}}
	}
	if u.r.IntN(4) == 0 {
		g.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: u.pick([]string{"192.0.2.21", "192.0.2.22", "192.0.2.99"})}}
	}
	return g
}

// namespace returns a Namespace of the pool with labels a Selector listener may match.
func (u *universe) namespace() *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: u.meta("", u.pick(uNamespaces))}
	if team := u.pick([]string{"", "a", "b"}); team != "" {
		ns.Labels = map[string]string{"team": team}
	}
	return ns
}

func (u *universe) httpRoute() *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: u.meta(u.pick(uNamespaces), u.pick(uRouteNames))}
	r.Generation = int64(1 + u.r.IntN(3))
	for range 1 + u.r.IntN(2) {
		p := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(u.pick(uGateways))}
		if u.r.IntN(3) == 0 {
			p = gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group(GatewayGroup)), Kind: ptr.To(gatewayv1.Kind("ListenerSet")), Name: gatewayv1.ObjectName(u.pick(uListenerSets))}
		}
		if u.r.IntN(3) == 0 {
			p.Namespace = ptr.To(gatewayv1.Namespace(u.pick(uNamespaces)))
		}
		switch u.r.IntN(5) {
		case 0:
			p.SectionName = ptr.To(gatewayv1.SectionName(u.pick(uListeners)))
		case 1:
			p.Port = ptr.To(gatewayv1.PortNumber([]int32{80, 443, 9}[u.r.IntN(3)]))
		}
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, p)
	}
	for range u.r.IntN(3) {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(u.pick(uRouteHosts)))
	}
	types := []gatewayv1.PathMatchType{gatewayv1.PathMatchPathPrefix, gatewayv1.PathMatchExact, gatewayv1.PathMatchRegularExpression}
	for range 1 + u.r.IntN(2) {
		var rule gatewayv1.HTTPRouteRule
		for range u.r.IntN(3) {
			m := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: &types[u.r.IntN(len(types))], Value: ptr.To(u.pick(uRoutePaths))}}
			if u.r.IntN(3) == 0 {
				m.Headers = []gatewayv1.HTTPHeaderMatch{{Name: "X-A", Value: []string{"1", "[("}[u.r.IntN(2)],
					Type: ptr.To([]gatewayv1.HeaderMatchType{gatewayv1.HeaderMatchExact, gatewayv1.HeaderMatchRegularExpression}[u.r.IntN(2)])}}
			}
			if u.r.IntN(4) == 0 {
				m.Method = ptr.To(gatewayv1.HTTPMethodGet)
			}
			rule.Matches = append(rule.Matches, m)
		}
		switch u.r.IntN(8) {
		case 0:
			rule.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestMirror,
				RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: gatewayv1.BackendObjectReference{Name: "web"}}}}
		case 1:
			rule.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https")}}}
		case 2:
			rule.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
				RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-B", Value: "2"}}}}}
		}
		for range u.r.IntN(3) {
			b := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(u.pick(uServices)), Port: ptr.To(gatewayv1.PortNumber([]int32{80, 81, 9}[u.r.IntN(3)]))}}}
			if u.r.IntN(3) == 0 {
				b.Namespace = ptr.To(gatewayv1.Namespace(u.pick(uNamespaces)))
			}
			if u.r.IntN(3) == 0 {
				b.Weight = ptr.To(int32(u.r.IntN(3)))
			}
			rule.BackendRefs = append(rule.BackendRefs, b)
		}
		r.Spec.Rules = append(r.Spec.Rules, rule)
	}
	return r
}

func (u *universe) grant() *gatewayv1.ReferenceGrant {
	g := &gatewayv1.ReferenceGrant{ObjectMeta: u.meta(u.pick(uNamespaces), u.pick(uGrantNames))}
	g.Spec.From = []gatewayv1.ReferenceGrantFrom{{Group: GatewayGroup, Kind: gatewayv1.Kind([]string{"HTTPRoute", "Gateway"}[u.r.IntN(2)]),
		Namespace: gatewayv1.Namespace(u.pick(uNamespaces))}}
	to := gatewayv1.ReferenceGrantTo{Kind: gatewayv1.Kind([]string{"Service", "Secret"}[u.r.IntN(2)])}
	if u.r.IntN(2) == 0 {
		to.Name = ptr.To(gatewayv1.ObjectName(u.pick(append(append([]string{}, uServices...), uSecrets...))))
	}
	g.Spec.To = []gatewayv1.ReferenceGrantTo{to}
	return g
}

// checkGatewayStatuses checks, at step, that the statuses a receiver of the incremental
// translator's status changes (TakeGatewayStatusChanges, then GatewayStatus of each) holds
// equal the statuses of a full translation of the same objects.
func checkGatewayStatuses(t *testing.T, step int, inc *Translator, full []*watchv1.ObjectStatus, held map[string]*watchv1.ObjectStatus) {
	t.Helper()
	lb, manage := inc.PublishedAddresses()
	for _, k := range inc.TakeGatewayStatusChanges() {
		id := k.GetKind() + "/" + k.GetNamespace() + "/" + k.GetName()
		if st := inc.GatewayStatus(k, contract.TypedAddresses(lb), manage); st != nil {
			held[id] = st
		} else {
			delete(held, id)
		}
	}
	if len(held) != len(full) {
		t.Fatalf("step %d: the receiver of the status changes holds %d Gateway API statuses, a full translation has %d", step, len(held), len(full))
	}
	for _, want := range full {
		k := want.GetKey()
		got := held[k.GetKind()+"/"+k.GetNamespace()+"/"+k.GetName()]
		if !proto.Equal(got, want) {
			t.Fatalf("step %d: status of %s %s/%s: the receiver holds\n%v\na full translation gives\n%v", step, k.GetKind(), k.GetNamespace(), k.GetName(), got, want)
		}
	}
}
