package translate

// A ListenerSet adds listeners to the Gateway it names, when that Gateway admits ListenerSets
// of its namespace (spec.allowedListeners; none by default). Its listeners are translated
// with the Gateway's, after the Gateway's own and in the sets' order (oldest first, then
// namespace/name), so that a conflict of port and hostname, or of port and protocol, is
// lost by the later listener. Routes attach to a ListenerSet's listeners only through a
// parentRef naming the ListenerSet, and to the Gateway's own listeners only through one
// naming the Gateway (docs/translation.md, "ListenerSet").

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

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

// setOut is what one ListenerSet contributes to its Gateway.
type setOut struct {
	ls         *gatewayv1.ListenerSet
	listeners  []*listenerOut
	conditions []*watchv1.Condition
	findings   []*configv1.Finding
	attached   bool // Accepted: counted in the Gateway's attachedListenerSets
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
			return lc.conflicted(lo, field, l, "ProtocolConflict", fmt.Sprintf("port %d is %s on a listener before it", l.Port, p))
		}
		if first, ok := lc.taken[hostPort{lo.hostname, l.Port}]; ok {
			return lc.conflicted(lo, field, l, "HostnameConflict", fmt.Sprintf("listener %s has the same port and hostname and comes first", first))
		}
	}
	if _, ok := lc.protocols[l.Port]; !ok {
		lc.protocols[l.Port] = l.Protocol
	}
	switch l.Protocol {
	case gatewayv1.HTTPProtocolType:
		lo.scheme = configv1.RouteScheme_ROUTE_SCHEME_HTTP
	case gatewayv1.HTTPSProtocolType:
		lo.scheme = configv1.RouteScheme_ROUTE_SCHEME_HTTPS
	default:
		refuse("UnsupportedProtocol", fmt.Sprintf("protocol %q is not supported (only HTTP and HTTPS)", l.Protocol))
	}
	if lo.scheme != configv1.RouteScheme_ROUTE_SCHEME_UNSPECIFIED {
		https := lo.scheme == configv1.RouteScheme_ROUTE_SCHEME_HTTPS
		if !t.portServed(l.Port, https) {
			refuse("PortUnavailable", fmt.Sprintf("port %d is not available: the proxies serve %s listeners on %s only", l.Port, l.Protocol, t.servedPorts(https)))
		}
		lo.listener = contract.ListenerName(lc.out.address, l.Port, t.gatewayPort(lo.scheme))
	}

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
			unresolved("InvalidRouteKinds", fmt.Sprintf("route kinds %s are not supported (only HTTPRoute)", strings.Join(bad, ", ")))
		}
	}
	if httpRoutes && lo.scheme != configv1.RouteScheme_ROUTE_SCHEME_UNSPECIFIED {
		lo.kinds = []*watchv1.RouteGroupKind{{Group: GatewayGroup, Kind: "HTTPRoute"}}
	}
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
			refuse("UnsupportedValue", why)
		} else {
			lo.selector = sel
		}
	default:
		refuse("UnsupportedValue", fmt.Sprintf("allowedRoutes.namespaces.from %q is not supported", from))
	}

	if lo.scheme == configv1.RouteScheme_ROUTE_SCHEME_HTTPS && accepted == nil {
		switch {
		case l.TLS != nil && l.TLS.Mode != nil && *l.TLS.Mode == gatewayv1.TLSModePassthrough:
			refuse("UnsupportedValue", "tls.mode Passthrough is not supported (only Terminate)")
		case l.TLS == nil || len(l.TLS.CertificateRefs) == 0:
			unresolved("InvalidCertificateRef", "an HTTPS listener needs tls.certificateRefs")
		default:
			if len(l.TLS.CertificateRefs) > 1 {
				lc.add(field+".tls.certificateRefs", sevWarn, "UnsupportedValue", fmt.Sprintf("listener %q: only the first certificateRef is used", l.Name))
			}
			t.listenerCertificate(lc, lo, l.TLS.CertificateRefs[0], unresolved)
		}
	}

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
			lc.add(field, sevError, "HostnameConflict", fmt.Sprintf("listener %q: same port and hostname as listener %q, which is served instead", l.Name, first))
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
				l.Name, lo.cert, lo.hostname, strings.Join(lo.certNames, ", ")))
		}
	}

	return lo
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

// listenerSetsOf are the ListenerSets naming Gateway k as their parent, in precedence order:
// oldest first, then namespace/name.
func (t *Translator) listenerSetsOf(k nsName) []*gatewayv1.ListenerSet {
	var out []*gatewayv1.ListenerSet
	for sk := range t.gw.setsOf.all(k) {
		if ls := t.gw.listenerSets[sk]; ls != nil {
			out = append(out, ls)
		}
	}
	sort.Slice(out, func(i, j int) bool { return older(out[i], out[j]) })
	return out
}

// listenerSetParent is the Gateway a ListenerSet names; ok false when it names another kind.
func listenerSetParent(ls *gatewayv1.ListenerSet) (nsName, bool) {
	p := ls.Spec.ParentRef
	if (p.Group != nil && string(*p.Group) != GatewayGroup) || (p.Kind != nil && string(*p.Kind) != "Gateway") {
		return nsName{}, false
	}
	ns := ls.Namespace
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	return nsName{ns, string(p.Name)}, true
}

// admitsListenerSets says whether gw admits ListenerSets of namespace ns
// (spec.allowedListeners), and why not.
func (t *Translator) admitsListenerSets(gw *gatewayv1.Gateway, ns string) (bool, string) {
	from := gatewayv1.FromNamespaces("None")
	var sel *metav1.LabelSelector
	if a := gw.Spec.AllowedListeners; a != nil && a.Namespaces != nil {
		if a.Namespaces.From != nil {
			from = *a.Namespaces.From
		}
		sel = a.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true, ""
	case gatewayv1.NamespacesFromSame:
		if ns == gw.Namespace {
			return true, ""
		}
		return false, fmt.Sprintf("Gateway %s/%s admits ListenerSets of its own namespace only", gw.Namespace, gw.Name)
	case gatewayv1.NamespacesFromSelector:
		if sel == nil {
			return false, fmt.Sprintf("Gateway %s/%s admits ListenerSets by a selector it does not give", gw.Namespace, gw.Name)
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false, fmt.Sprintf("Gateway %s/%s: allowedListeners.namespaces.selector is invalid: %v", gw.Namespace, gw.Name, err)
		}
		if l, ok := t.gw.namespaces[ns]; ok && s.Matches(labels.Set(l)) {
			return true, ""
		}
		return false, fmt.Sprintf("Gateway %s/%s admits ListenerSets of the namespaces its selector matches, and %s is not one", gw.Namespace, gw.Name, ns)
	}
	return false, fmt.Sprintf("Gateway %s/%s admits no ListenerSets (spec.allowedListeners)", gw.Namespace, gw.Name)
}

// translateListenerSets translates the ListenerSets naming out's Gateway, after its own
// listeners (lc) and conditions.
func (t *Translator) translateListenerSets(out *gatewayOut, lc *listenerCtx) {
	gw := out.gw
	gwAccepted := len(out.conditions) > 0 && out.conditions[0].Status == condTrue
	// A namespace's labels decide which sets it admits: their change re-translates it.
	if a := gw.Spec.AllowedListeners; a != nil && a.Namespaces != nil && a.Namespaces.From != nil && *a.Namespaces.From == gatewayv1.NamespacesFromSelector {
		out.setsByLabels = true
	}
	for _, ls := range t.listenerSetsOf(nsName{gw.Namespace, gw.Name}) {
		k := nsName{ls.Namespace, ls.Name}
		so := &setOut{ls: ls}
		out.sets[k] = so
		gen := ls.Generation
		owner := gwRef("ListenerSet", ls.Namespace, ls.Name, string(ls.UID))
		add := func(field string, sev configv1.FindingSeverity, reason, cause string) {
			so.findings = append(so.findings, &configv1.Finding{Object: owner, Field: field, Cause: cause, Severity: sev, Reason: reason})
		}
		ok, why := t.admitsListenerSets(gw, ls.Namespace)
		if !ok {
			add("spec.parentRef", sevError, "NotAllowed", why)
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condFalse, gatewayv1.ListenerSetReasonNotAllowed, why, gen), cond(gatewayv1.ListenerSetConditionProgrammed, condFalse, gatewayv1.ListenerSetReasonNotAllowed, why, gen)}
			continue
		}
		if !gwAccepted {
			msg := fmt.Sprintf("Gateway %s/%s is not accepted", gw.Namespace, gw.Name)
			add("spec.parentRef", sevError, "ParentNotAccepted", msg)
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condFalse, gatewayv1.ListenerSetReasonParentNotAccepted, msg, gen), cond(gatewayv1.ListenerSetConditionProgrammed, condFalse, gatewayv1.ListenerSetReasonParentNotAccepted, msg, gen)}
			continue
		}
		slc := *lc
		slc.ns, slc.kind, slc.owner, slc.gen, slc.add, slc.age, slc.name, slc.set = ls.Namespace, "ListenerSet", owner, gen, add, ls.CreationTimestamp.Time, ls.Name, true
		served := 0
		for i, e := range ls.Spec.Listeners {
			lo := t.translateListener(&slc, i, gatewayv1.Listener(e))
			so.listeners = append(so.listeners, lo)
			if lo.served {
				served++
			}
		}
		switch {
		case served == 0:
			msg := "no listener is valid: see their conditions"
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condFalse, gatewayv1.ListenerSetReasonListenersNotValid, msg, gen), cond(gatewayv1.ListenerSetConditionProgrammed, condFalse, gatewayv1.ListenerSetReasonListenersNotValid, msg, gen)}
		case served < len(so.listeners):
			so.attached = true
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condTrue, gatewayv1.ListenerSetReasonListenersNotValid, "some listeners are not valid: see their conditions", gen), cond(gatewayv1.ListenerSetConditionProgrammed, condTrue, gatewayv1.ListenerSetReasonProgrammed, "listener set programmed", gen)}
		default:
			so.attached = true
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condTrue, gatewayv1.ListenerSetReasonAccepted, "listener set accepted", gen), cond(gatewayv1.ListenerSetConditionProgrammed, condTrue, gatewayv1.ListenerSetReasonProgrammed, "listener set programmed", gen)}
		}
	}
}

// setListenerSet records a ListenerSet (nil removes it): the Gateways it named and names are
// re-translated (its listeners and status are theirs), and the routes naming it.
func (t *Translator) setListenerSet(k nsName, ls *gatewayv1.ListenerSet) {
	g := &t.gw
	if old := g.listenerSets[k]; old != nil {
		if p, ok := listenerSetParent(old); ok {
			g.setsOf.remove(p, k)
			g.dirtyGateways.add(p)
		}
	}
	if ls == nil {
		delete(g.listenerSets, k)
	} else {
		g.listenerSets[k] = ls
		if p, ok := listenerSetParent(ls); ok {
			g.setsOf.add(p, k)
			g.dirtyGateways.add(p)
		}
	}
	for r := range g.setRoutes.all(k) {
		g.dirtyRoutes.add(r)
	}
	key := listenerSetKey(k)
	t.dirtyFindings.add(key)
	g.statusDirty.add(key)
}

func listenerSetKey(k nsName) string { return "ListenerSet/" + k.ns + "/" + k.name }

// setsChanged marks the findings and statuses of out's ListenerSets to be built again.
func (t *Translator) setsChanged(out *gatewayOut) {
	for k := range out.sets {
		key := listenerSetKey(k)
		t.dirtyFindings.add(key)
		t.gw.statusDirty.add(key)
	}
}

// listenerSetOut is what ListenerSet k contributes to the Gateway of ours it names; nil when
// it names none.
func (t *Translator) listenerSetOut(k nsName) *setOut {
	ls := t.gw.listenerSets[k]
	if ls == nil {
		return nil
	}
	p, ok := listenerSetParent(ls)
	if !ok {
		return nil
	}
	if o := t.gw.gwOut[p]; o != nil && o.ours {
		return o.sets[k]
	}
	return nil
}

func isListenerSetParent(pr gatewayv1.ParentReference) bool {
	return pr.Group != nil && string(*pr.Group) == GatewayGroup && pr.Kind != nil && string(*pr.Kind) == "ListenerSet"
}
