package translate

// Listeners: one listener of a Gateway or of a ListenerSet translated (protocol, port,
// hostname, certificate, allowed routes) with its conditions and certificate claims, after
// the listeners before it on the same Gateway, whose port and hostname it may conflict with.

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

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

// hostPort is a listener's port and hostname: two listeners with the same conflict.
type hostPort struct {
	host string
	port int32
}

// listenerCtx is what translating one listener needs of its owner (a Gateway or a
// ListenerSet) and of the listeners translated before it on the same Gateway.
type listenerCtx struct {
	out   *gatewayOut
	ns    string // the owner's namespace: its certificateRefs' and allowedRoutes Same's
	kind  string // "Gateway" or "ListenerSet", for ReferenceGrants
	owner *configv1.ObjectRef
	gen   int64
	add   func(field string, sev configv1.FindingSeverity, reason, cause string)
	// addrRefused is why the Gateway has no address; nil when it has one.
	addrRefused *addressGrant
	field       string // "spec.listeners"
	age         time.Time
	name        string
	// set marks a ListenerSet's listener: a conflict refuses it (Accepted=False).
	set bool
	// taken are the port and hostname of every listener served so far, and protocols the
	// protocol of each port so far, across the Gateway and its ListenerSets.
	taken     map[hostPort]string
	protocols map[int32]gatewayv1.ProtocolType
}

// qualified names a listener in a conflict's message: a ListenerSet's with its set.
func (lc *listenerCtx) qualified(name gatewayv1.SectionName) string {
	if lc.set {
		return fmt.Sprintf("%s of ListenerSet %s/%s", name, lc.ns, lc.name)
	}
	return string(name)
}

// translateListener translates listener i of lc's owner.
func (t *Translator) translateListener(lc *listenerCtx, i int, l gatewayv1.Listener) *listenerOut {
	field := fmt.Sprintf("%s[%d]", lc.field, i)
	lo := &listenerOut{name: string(l.Name), port: l.Port, ns: lc.ns}
	if l.Hostname != nil {
		lo.hostname = strings.ToLower(string(*l.Hostname))
	}
	var accepted, resolved *watchv1.Condition
	refuse := func(reason, msg string) {
		if accepted == nil {
			accepted = cond(gatewayv1.ListenerConditionAccepted, condFalse, reason, msg, lc.gen)
			lc.add(field, sevError, reason, fmt.Sprintf("listener %q: %s", l.Name, msg))
		}
	}
	unresolved := func(reason, msg string) {
		if resolved == nil {
			resolved = cond(gatewayv1.ListenerConditionResolvedRefs, condFalse, reason, msg, lc.gen)
			lc.add(field, sevError, reason, fmt.Sprintf("listener %q: %s", l.Name, msg))
		}
	}
	// A ListenerSet's listener that conflicts with one before it is refused outright, its
	// conflict as every condition's reason (the Gateway API's rule for ListenerSets); a
	// Gateway's own keeps Accepted and says Conflicted.
	if lc.set {
		if p, ok := lc.protocols[l.Port]; ok && p != l.Protocol {
			return lc.conflicted(lo, field, l, string(gatewayv1.ListenerReasonProtocolConflict), fmt.Sprintf("port %d is %s on a listener before it", l.Port, p))
		}
		if first, ok := lc.taken[hostPort{lo.hostname, l.Port}]; ok {
			return lc.conflicted(lo, field, l, string(gatewayv1.ListenerReasonHostnameConflict), fmt.Sprintf("listener %s has the same port and hostname and comes first", first))
		}
	}
	if _, ok := lc.protocols[l.Port]; !ok {
		lc.protocols[l.Port] = l.Protocol
	}
	t.listenerScheme(lc, lo, l, refuse)
	httpRoutes := listenerKinds(lo, l, unresolved)
	listenerNamespaces(lo, l, refuse)
	if lo.scheme == configv1.RouteScheme_ROUTE_SCHEME_HTTPS && accepted == nil {
		t.listenerTLS(lc, lo, l, field, refuse, unresolved)
	}
	lc.listenerConditions(lo, l, field, accepted, resolved, httpRoutes)
	lc.claimCertificate(lo, i, field, l.Name)
	return lo
}

// listenerScheme sets the scheme of lo by l's protocol, and the proxy listener it is served
// on, refusing a protocol or a port the proxies do not serve.
func (t *Translator) listenerScheme(lc *listenerCtx, lo *listenerOut, l gatewayv1.Listener, refuse func(reason, msg string)) {
	switch l.Protocol {
	case gatewayv1.HTTPProtocolType:
		lo.scheme = configv1.RouteScheme_ROUTE_SCHEME_HTTP
	case gatewayv1.HTTPSProtocolType:
		lo.scheme = configv1.RouteScheme_ROUTE_SCHEME_HTTPS
	default:
		refuse(string(gatewayv1.ListenerReasonUnsupportedProtocol), fmt.Sprintf("protocol %q is not supported (only HTTP and HTTPS)", l.Protocol))
	}
	if lo.scheme != configv1.RouteScheme_ROUTE_SCHEME_UNSPECIFIED {
		https := lo.scheme == configv1.RouteScheme_ROUTE_SCHEME_HTTPS
		if !t.portServed(l.Port, https) {
			refuse(string(gatewayv1.ListenerReasonPortUnavailable), fmt.Sprintf("port %d is not available: the proxies serve %s listeners on %s only", l.Port, l.Protocol, t.servedPorts(https)))
		}
		lo.listener = contract.ListenerName(lc.out.address, l.Port, t.gatewayPort(lo.scheme))
	}
}

// listenerKinds sets the route kinds lo supports, and says whether HTTPRoutes may attach to
// it; kinds other than HTTPRoute leave ResolvedRefs false.
func listenerKinds(lo *listenerOut, l gatewayv1.Listener, unresolved func(reason, msg string)) bool {
	// Route kinds: HTTPRoute only.
	httpRoutes := true
	if l.AllowedRoutes != nil && len(l.AllowedRoutes.Kinds) > 0 {
		httpRoutes = false
		var bad []string
		for _, rk := range l.AllowedRoutes.Kinds {
			group := GatewayGroup
			if rk.Group != nil {
				group = string(*rk.Group)
			}
			if group == GatewayGroup && rk.Kind == "HTTPRoute" {
				httpRoutes = true
			} else {
				bad = append(bad, group+"/"+string(rk.Kind))
			}
		}
		if len(bad) > 0 {
			unresolved(string(gatewayv1.ListenerReasonInvalidRouteKinds), fmt.Sprintf("route kinds %s are not supported (only HTTPRoute)", strings.Join(bad, ", ")))
		}
	}
	if httpRoutes && lo.scheme != configv1.RouteScheme_ROUTE_SCHEME_UNSPECIFIED {
		lo.kinds = []*watchv1.RouteGroupKind{{Group: GatewayGroup, Kind: "HTTPRoute"}}
	}
	return httpRoutes
}

// listenerNamespaces sets the namespaces whose routes lo admits (allowedRoutes.namespaces).
func listenerNamespaces(lo *listenerOut, l gatewayv1.Listener, refuse func(reason, msg string)) {
	from := gatewayv1.NamespacesFromSame
	if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil && l.AllowedRoutes.Namespaces.From != nil {
		from = *l.AllowedRoutes.Namespaces.From
	}
	switch from {
	case gatewayv1.NamespacesFromSame:
	case gatewayv1.NamespacesFromAll:
		lo.allowAll = true
	case gatewayv1.NamespacesFromSelector:
		if sel, why := listenerSelector(l.AllowedRoutes); why != "" {
			refuse(string(gatewayv1.ListenerReasonUnsupportedValue), why)
		} else {
			lo.selector = sel
		}
	default:
		refuse(string(gatewayv1.ListenerReasonUnsupportedValue), fmt.Sprintf("allowedRoutes.namespaces.from %q is not supported", from))
	}
}

// listenerTLS resolves the certificate of an accepted HTTPS listener lo (its first
// certificateRef); only TLS termination is served.
func (t *Translator) listenerTLS(lc *listenerCtx, lo *listenerOut, l gatewayv1.Listener, field string, refuse, unresolved func(reason, msg string)) {
	switch {
	case l.TLS != nil && l.TLS.Mode != nil && *l.TLS.Mode == gatewayv1.TLSModePassthrough:
		refuse(string(gatewayv1.ListenerReasonUnsupportedValue), "tls.mode Passthrough is not supported (only Terminate)")
	case l.TLS == nil || len(l.TLS.CertificateRefs) == 0:
		unresolved(string(gatewayv1.ListenerReasonInvalidCertificateRef), "an HTTPS listener needs tls.certificateRefs")
	default:
		if len(l.TLS.CertificateRefs) > 1 {
			lc.add(field+".tls.certificateRefs", sevWarn, string(gatewayv1.ListenerReasonUnsupportedValue), fmt.Sprintf("listener %q: only the first certificateRef is used", l.Name))
		}
		t.listenerCertificate(lc, lo, l.TLS.CertificateRefs[0], unresolved)
	}
}

// listenerConditions sets lo's conditions (accepted and resolved are nil when nothing made
// them false), whether routes may attach to it and whether it is served, and records its
// port and hostname as taken when it is accepted.
func (lc *listenerCtx) listenerConditions(lo *listenerOut, l gatewayv1.Listener, field string, accepted, resolved *watchv1.Condition, httpRoutes bool) {
	if accepted == nil {
		accepted = cond(gatewayv1.ListenerConditionAccepted, condTrue, gatewayv1.ListenerReasonAccepted, "listener accepted", lc.gen)
	}
	if resolved == nil {
		resolved = cond(gatewayv1.ListenerConditionResolvedRefs, condTrue, gatewayv1.ListenerReasonResolvedRefs, "references resolved", lc.gen)
	}
	conflicted := cond(gatewayv1.ListenerConditionConflicted, condFalse, gatewayv1.ListenerReasonNoConflicts, "no conflicts", lc.gen)
	if accepted.Status == condTrue {
		hp := hostPort{lo.hostname, l.Port}
		if first, ok := lc.taken[hp]; ok {
			conflicted = cond(gatewayv1.ListenerConditionConflicted, condTrue, gatewayv1.ListenerReasonHostnameConflict, fmt.Sprintf("listener %q has the same port and hostname and comes first", first), lc.gen)
			lc.add(field, sevError, string(gatewayv1.ListenerReasonHostnameConflict), fmt.Sprintf("listener %q: same port and hostname as listener %q, which is served instead", l.Name, first))
		} else {
			lc.taken[hp] = lc.qualified(l.Name)
		}
	}
	lo.attachable = accepted.Status == condTrue && conflicted.Status == condFalse && httpRoutes
	lo.served = lo.attachable && resolved.Status == condTrue && lc.addrRefused == nil
	programmed := cond(gatewayv1.ListenerConditionProgrammed, condTrue, gatewayv1.ListenerReasonProgrammed, "listener programmed", lc.gen)
	switch {
	case lc.addrRefused != nil && lo.attachable && resolved.Status == condTrue:
		programmed = cond(gatewayv1.ListenerConditionProgrammed, condFalse, gatewayv1.ListenerReasonPending, "listener not programmed: the Gateway has no address", lc.gen)
	case !lo.served:
		programmed = cond(gatewayv1.ListenerConditionProgrammed, condFalse, gatewayv1.ListenerReasonInvalid, "listener not programmed: see its other conditions", lc.gen)
	}
	lo.conditions = []*watchv1.Condition{accepted, programmed, resolved, conflicted}
}

// claimCertificate claims the certificate of listener i (lo), when it is served, on its
// hostname (every name when it has none), where the certificate covers it.
func (lc *listenerCtx) claimCertificate(lo *listenerOut, i int, field string, name gatewayv1.SectionName) {
	// A listener without hostname serves every name: its certificate is the catch-all
	// host's, for handshakes whose name no more specific claim covers (the oldest
	// Gateway's when several claim it; gatewayClaims orders them).
	if lo.served && lo.cert != "" && lo.hostname == "" {
		lc.out.claims[""] = append(lc.out.claims[""], gwClaim{cert: lo.cert, owner: lc.owner, field: field + ".tls.certificateRefs[0]",
			prec: routePrec{kindRank: 0, age: lc.age, ns: lc.ns, name: lc.name, rule: i}})
	}
	if lo.served && lo.cert != "" && lo.hostname != "" {
		if covers(lo.certNames, lo.hostname) {
			lc.out.claims[lo.hostname] = append(lc.out.claims[lo.hostname], gwClaim{cert: lo.cert, owner: lc.owner, field: field + ".tls.certificateRefs[0]",
				prec: routePrec{kindRank: 0, age: lc.age, ns: lc.ns, name: lc.name, rule: i}})
		} else {
			lc.add(field+".tls.certificateRefs[0]", sevError, "CertificateHostMismatch", fmt.Sprintf("listener %q: certificate %s does not cover hostname %q (it covers %s); the hostname is not served over HTTPS",
				name, lo.cert, lo.hostname, strings.Join(lo.certNames, ", ")))
		}
	}
}

// conflicted is a ListenerSet's listener refused for a conflict: not accepted, not
// programmed, Conflicted, all with the conflict's reason.
func (lc *listenerCtx) conflicted(lo *listenerOut, field string, l gatewayv1.Listener, reason, msg string) *listenerOut {
	lc.add(field, sevError, reason, fmt.Sprintf("listener %q: %s; it is not served", l.Name, msg))
	lo.conditions = []*watchv1.Condition{
		cond(gatewayv1.ListenerConditionAccepted, condFalse, reason, msg, lc.gen),
		cond(gatewayv1.ListenerConditionProgrammed, condFalse, reason, msg, lc.gen),
		cond(gatewayv1.ListenerConditionResolvedRefs, condTrue, gatewayv1.ListenerReasonResolvedRefs, "references resolved", lc.gen),
		cond(gatewayv1.ListenerConditionConflicted, condTrue, reason, msg, lc.gen),
	}
	return lo
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
		unresolved(string(gatewayv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s/%s %s is not a Secret", group, kind, ref.Name))
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
			unresolved(string(gatewayv1.ListenerReasonRefNotPermitted), fmt.Sprintf("Secret %s/%s is in another namespace and no ReferenceGrant there allows it", ns, sk.name))
			return
		}
	}
	c := t.certificate(sk)
	if c.cert == nil {
		unresolved(string(gatewayv1.ListenerReasonInvalidCertificateRef), c.why)
		return
	}
	lo.cert, lo.certNames = c.cert.GetName(), c.cert.GetDnsNames()
}
