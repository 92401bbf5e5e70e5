package translate

// The Gateway API (sigs.k8s.io/gateway-api v1, standard channel): GatewayClass, Gateway,
// HTTPRoute and ReferenceGrant, translated into the same virtual hosts, backends and
// certificates as Ingresses. The units of work, beside the Ingress ones:
//   - a Gateway: its listeners (protocol, port, hostname, certificate, allowed routes) and
//     their certificate claims, from its class, the Secrets it names and the ReferenceGrants
//     of the namespaces it refers into;
//   - an HTTPRoute: its routes and certificate claims on every host where it attaches to a
//     listener, from the Gateways it names, the Services it names and the ReferenceGrants of
//     the namespaces it refers into.
//
// A host served by both APIs is one virtual host: the HTTPRoutes' routes come first (in the
// Gateway API's precedence), then the Ingresses' (in theirs); a listener's certificate wins
// over an Ingress's, which gets a ConflictLost finding. That holds within one namespace: an
// Ingress and an HTTPRoute of different namespaces never share a host (crossapi.go).

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// listenerOut is one listener as translated.
type listenerOut struct {
	name       string
	port       int32
	hostname   string // lower case; "" matches every host
	scheme     configv1.RouteScheme
	listener   string // Route.listener of the routes served here
	ns         string // its owner's namespace: allowedRoutes Same admits routes of it
	attachable bool   // routes of an allowed namespace may attach
	served     bool   // programmed: routes attached to it are served
	allowAll   bool   // allowedRoutes.namespaces.from All
	cert       string
	certNames  []string
	kinds      []*watchv1.RouteGroupKind
	conditions []*watchv1.Condition
	// selector is allowedRoutes.namespaces.from Selector's: the namespaces admitted.
	selector labels.Selector
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
		add("spec.addresses", sevWarn, "UnsupportedAddress", "requested addresses are not supported without a pool of Gateway addresses; status.addresses shows the proxy's published addresses")
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

// listenerCertificate resolves an HTTPS listener's certificate reference.
func (t *Translator) listenerCertificate(lc *listenerCtx, lo *listenerOut, ref gatewayv1.SecretObjectReference, unresolved func(reason, msg string)) {
	out := lc.out
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if group != "" || kind != "Secret" {
		unresolved("InvalidCertificateRef", fmt.Sprintf("certificateRef %s/%s %s is not a Secret", group, kind, ref.Name))
		return
	}
	ns := lc.ns
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	sk := nsName{ns, string(ref.Name)}
	out.secrets = append(out.secrets, sk)
	if ns != lc.ns {
		out.grantNs = append(out.grantNs, ns)
		if !t.granted(lc.ns, lc.kind, ns, "Secret", sk.name) {
			unresolved("RefNotPermitted", fmt.Sprintf("Secret %s/%s is in another namespace and no ReferenceGrant there allows it", ns, sk.name))
			return
		}
	}
	c := t.certificate(sk)
	if c.cert == nil {
		unresolved("InvalidCertificateRef", c.why)
		return
	}
	lo.cert, lo.certNames = c.cert.GetName(), c.cert.GetDnsNames()
}

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
