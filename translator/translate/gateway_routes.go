package translate

// HTTPRoutes: which Gateways and ListenerSets an HTTPRoute attaches to, and its routes and
// certificate claims on every host where it does, in the Gateway API's precedence. Its rules
// are compiled once (compileRule), then placed on each host.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// routeOut is what one HTTPRoute contributes.
type routeOut struct {
	rt       *gatewayv1.HTTPRoute
	ours     bool // names at least one Gateway of ours
	gateways []nsName
	sets     []nsName // ListenerSets named in parentRefs (found or not)
	parents  []*parentOut
	findings []*configv1.Finding
	services []nsName
	grantNs  []string
	claims   map[string][]gwClaim // host -> route and certificate claims
	refs     []backendRef
	byLabels bool // a Selector listener judged it by its namespace's labels
}

// parentOut is one parentRef of an HTTPRoute to a Gateway of ours.
type parentOut struct {
	index      int // in spec.parentRefs
	ref        gatewayv1.ParentReference
	gw         nsName
	set        *nsName  // the ListenerSet the parentRef names (its listeners), nil for the Gateway's
	attached   []string // listener names
	hosts      []string // the hosts the route claims through this parent, sorted
	conditions []*watchv1.Condition
}

// routePrec is a claim's place in the Gateway API's precedence.
type routePrec struct {
	pathRank       int // 0 Exact, 1 RegularExpression, 2 PathPrefix
	pathLen        int
	method         bool
	headers, query int
	kindRank       int // certificate claims: a Gateway's before an HTTPRoute's
	age            time.Time
	ns, name       string
	rule, match    int
	scheme         configv1.RouteScheme
	listener       string
}

// less orders matches as the Gateway API says (docs/translation.md): Exact paths, then
// regular expressions, then the longest prefix; then a method match, the most header
// matches, the most query matches; then the oldest route, namespace/name, and rule order.
// Regular expressions are placed as Ingress regex paths are, before prefixes (the spec
// leaves them to the implementation).
func (a routePrec) less(b routePrec) bool {
	switch {
	case a.pathRank != b.pathRank:
		return a.pathRank < b.pathRank
	case a.pathLen != b.pathLen:
		return a.pathLen > b.pathLen
	case a.method != b.method:
		return a.method
	case a.headers != b.headers:
		return a.headers > b.headers
	case a.query != b.query:
		return a.query > b.query
	case a.kindRank != b.kindRank:
		return a.kindRank < b.kindRank
	case !a.age.Equal(b.age):
		return a.age.Before(b.age)
	case a.ns != b.ns:
		return a.ns < b.ns
	case a.name != b.name:
		return a.name < b.name
	case a.rule != b.rule:
		return a.rule < b.rule
	case a.match != b.match:
		return a.match < b.match
	case a.scheme != b.scheme:
		return a.scheme < b.scheme
	}
	return a.listener < b.listener
}

func (t *Translator) retranslateRoute(k nsName) {
	g := &t.gw
	key := httpRouteKey(k)
	if old, ok := g.routeOut[k]; ok {
		t.unindexRoute(k, old)
	}
	delete(g.routeOut, k)
	t.dirtyFindings.add(key)
	g.statusDirty.add(key)
	rt, ok := g.routes[k]
	if !ok {
		return
	}
	out := t.quarantineRoute(t.translateRoute(rt))
	g.routeOut[k] = out
	for _, gk := range out.gateways {
		g.routeUsers.add(gk, k)
		g.statusDirty.add(gatewayKey(gk)) // its attachedRoutes
	}
	for _, sk := range out.sets {
		g.setRoutes.add(sk, k)
		g.statusDirty.add(listenerSetKey(sk)) // its attachedRoutes
	}
	for _, s := range out.services {
		g.svcUsers.add(s, k)
	}
	t.routeServicesChanged(out.services)
	for _, ns := range out.grantNs {
		g.grantRoutes.add(ns, k)
	}
	if out.byLabels {
		g.nsRoutes.add(k.ns, k)
	}
	for h := range out.claims {
		g.hostUsers.add(h, key)
		t.dirtyHosts.add(h)
	}
	for _, r := range out.refs {
		t.setBackendTLS(r.name, r.tls)
		if !t.backendUsers.has(r.name) {
			t.rebuildBackend(r.name)
		}
		t.backendUsers.add(r.name, key)
	}
}

func (t *Translator) unindexRoute(k nsName, out *routeOut) {
	g := &t.gw
	key := httpRouteKey(k)
	for _, gk := range out.gateways {
		g.routeUsers.remove(gk, k)
		g.statusDirty.add(gatewayKey(gk))
	}
	for _, sk := range out.sets {
		g.setRoutes.remove(sk, k)
		g.statusDirty.add(listenerSetKey(sk))
	}
	for _, s := range out.services {
		g.svcUsers.remove(s, k)
	}
	t.routeServicesChanged(out.services)
	for _, ns := range out.grantNs {
		g.grantRoutes.remove(ns, k)
	}
	if out.byLabels {
		g.nsRoutes.remove(k.ns, k)
	}
	for h := range out.claims {
		g.hostUsers.remove(h, key)
		t.dirtyHosts.add(h)
	}
	for _, r := range out.refs {
		t.backendUsers.remove(r.name, key)
		if !t.backendUsers.has(r.name) {
			t.dropBackend(r.name)
		}
	}
}

// translateRoute is the part of the translation that depends on one HTTPRoute (and on the
// Gateways, Services and grants it names).
func (t *Translator) translateRoute(rt *gatewayv1.HTTPRoute) *routeOut {
	out := &routeOut{rt: rt, claims: map[string][]gwClaim{}}
	t.routeParents(out)
	if len(out.parents) == 0 {
		return out
	}
	out.ours = true
	gen := rt.Generation
	owner := gwRef("HTTPRoute", rt.Namespace, rt.Name, string(rt.UID))
	add := func(field string, sev configv1.FindingSeverity, reason, cause string) {
		out.findings = append(out.findings, &configv1.Finding{Object: owner, Field: field, Cause: cause, Severity: sev, Reason: reason})
	}

	// ResolvedRefs is the route's, the same for every parent: the first refused reference.
	var resolved *watchv1.Condition
	unresolved := func(field, reason, msg string) {
		add(field, sevError, reason, msg)
		if resolved == nil {
			resolved = cond(gatewayv1.RouteConditionResolvedRefs, condFalse, reason, msg, gen)
		}
	}
	rules := make([]compiledRule, len(rt.Spec.Rules))
	var dropped []string
	for ri := range rt.Spec.Rules {
		rules[ri] = t.compileRule(out, ri, owner, unresolved)
		if rules[ri].dropped != "" {
			field := fmt.Sprintf("spec.rules[%d]", ri)
			add(field, sevError, rules[ri].reason, rules[ri].dropped+"; the rule is not served")
			dropped = append(dropped, fmt.Sprintf("rules[%d] (%s)", ri, rules[ri].dropped))
		}
	}
	if resolved == nil {
		resolved = cond(gatewayv1.RouteConditionResolvedRefs, condTrue, gatewayv1.RouteReasonResolvedRefs, "references resolved", gen)
	}

	seen := map[string]bool{} // host, scheme, rule, match: one claim each
	hosts := make([]string, 0, len(rt.Spec.Hostnames))
	for _, h := range rt.Spec.Hostnames {
		hosts = append(hosts, strings.ToLower(string(h)))
	}
	rc := routeCtx{out: out, gen: gen, add: add, rules: rules, dropped: dropped, hosts: hosts, seen: seen}
	for _, p := range out.parents {
		t.attachParent(&rc, p, owner, resolved)
	}
	return out
}

// routeParents records the Gateways and ListenerSets out's route names in its parentRefs
// (found or not), and its parents among them: those of a Gateway of ours.
func (t *Translator) routeParents(out *routeOut) {
	g := &t.gw
	rt := out.rt
	for i, pr := range rt.Spec.ParentRefs {
		ns := rt.Namespace
		if pr.Namespace != nil {
			ns = string(*pr.Namespace)
		}
		if isListenerSetParent(pr) {
			// A ListenerSet's listeners are its Gateway's: the route depends on both.
			sk := nsName{ns, string(pr.Name)}
			out.sets = append(out.sets, sk)
			ls := g.listenerSets[sk]
			if ls == nil {
				continue
			}
			gk, ok := listenerSetParent(ls)
			if !ok {
				continue
			}
			out.gateways = append(out.gateways, gk)
			if o := g.gwOut[gk]; o != nil && o.ours {
				out.parents = append(out.parents, &parentOut{index: i, ref: pr, gw: gk, set: &sk})
			}
			continue
		}
		if !isGatewayParent(pr) {
			continue
		}
		gk := nsName{ns, string(pr.Name)}
		out.gateways = append(out.gateways, gk)
		if o := g.gwOut[gk]; o != nil && o.ours {
			out.parents = append(out.parents, &parentOut{index: i, ref: pr, gw: gk})
		}
	}
}

// routeCtx is what placing an HTTPRoute's compiled rules on the listeners of each of its
// parents needs: the route's own, the same for every parent. The owner and ResolvedRefs,
// which the claims and conditions keep, are passed beside it: a field that the output keeps
// would move everything the context points to (the seen map, the rules) to the heap.
type routeCtx struct {
	out     *routeOut
	gen     int64
	add     func(field string, sev configv1.FindingSeverity, reason, cause string)
	rules   []compiledRule
	dropped []string        // "rules[i] (why)" of each rule not served
	hosts   []string        // spec.hostnames, lower case
	seen    map[string]bool // host, scheme, rule, match: one claim each
}

// attachParent attaches the route to the listeners of parent p that allow it, claims its
// routes and certificates on the hosts it gets there, and sets p's conditions.
func (t *Translator) attachParent(rc *routeCtx, p *parentOut, owner *configv1.ObjectRef, resolved *watchv1.Condition) {
	rt := rc.out.rt
	listeners, parentName := t.parentListeners(p)
	var candidates, allowed []*listenerOut
	for _, lo := range listeners {
		if (p.ref.SectionName == nil || string(*p.ref.SectionName) == lo.name) && (p.ref.Port == nil || *p.ref.Port == lo.port) {
			candidates = append(candidates, lo)
		}
	}
	for _, lo := range candidates {
		if lo.attachable && t.admits(rc.out, lo) {
			allowed = append(allowed, lo)
		}
	}
	var claimed []string // hosts of the served listeners this parent attaches to
	for _, lo := range allowed {
		inter := intersectHosts(lo.hostname, rc.hosts)
		if len(inter) == 0 {
			continue
		}
		p.attached = append(p.attached, lo.name)
		if !lo.served {
			continue
		}
		claimed = append(claimed, inter...)
		for _, h := range inter {
			rc.claimHost(p, lo, h, owner)
		}
	}
	sort.Strings(claimed)
	for i, h := range claimed {
		if (i == 0 || h != claimed[i-1]) && len(rc.out.claims[h]) > 0 {
			p.hosts = append(p.hosts, h)
		}
	}
	gen := rc.gen
	var accepted *watchv1.Condition
	switch {
	case len(candidates) == 0:
		accepted = cond(gatewayv1.RouteConditionAccepted, condFalse, gatewayv1.RouteReasonNoMatchingParent, fmt.Sprintf("%s has no listener matching the sectionName and port", parentName), gen)
	case len(allowed) == 0:
		accepted = cond(gatewayv1.RouteConditionAccepted, condFalse, gatewayv1.RouteReasonNotAllowedByListeners, fmt.Sprintf("no listener of %s allows this route (namespace, kind, or listener not valid)", parentName), gen)
	case len(p.attached) == 0:
		accepted = cond(gatewayv1.RouteConditionAccepted, condFalse, gatewayv1.RouteReasonNoMatchingListenerHostname, fmt.Sprintf("no listener of %s has a hostname matching the route's hostnames", parentName), gen)
	case len(rt.Spec.Rules) > 0 && len(rc.dropped) == len(rt.Spec.Rules):
		accepted = cond(gatewayv1.RouteConditionAccepted, condFalse, gatewayv1.RouteReasonUnsupportedValue, "no rule can be served: "+strings.Join(rc.dropped, "; "), gen)
	default:
		accepted = cond(gatewayv1.RouteConditionAccepted, condTrue, gatewayv1.RouteReasonAccepted, "route accepted", gen)
	}
	if accepted.Status == condFalse {
		rc.add(fmt.Sprintf("spec.parentRefs[%d]", p.index), sevError, accepted.Reason, accepted.Message)
	}
	p.conditions = []*watchv1.Condition{accepted, resolved}
	if accepted.Status == condTrue && len(rc.dropped) > 0 {
		p.conditions = append(p.conditions, cond(gatewayv1.RouteConditionPartiallyInvalid, condTrue, gatewayv1.RouteReasonUnsupportedValue, "Dropped Rule(s): "+strings.Join(rc.dropped, "; "), gen))
	}
}

// parentListeners are the listeners of parent p (its Gateway's own, or its ListenerSet's),
// and p's name in conditions.
func (t *Translator) parentListeners(p *parentOut) ([]*listenerOut, string) {
	gout := t.gw.gwOut[p.gw]
	if p.set == nil {
		return gout.listeners, fmt.Sprintf("Gateway %s/%s", p.gw.ns, p.gw.name)
	}
	var listeners []*listenerOut
	if so := gout.sets[*p.set]; so != nil {
		listeners = so.listeners
	}
	return listeners, fmt.Sprintf("ListenerSet %s/%s", p.set.ns, p.set.name)
}

// admits says whether attachable listener lo admits out's route by its namespace.
func (t *Translator) admits(out *routeOut, lo *listenerOut) bool {
	rt := out.rt
	admitted := lo.allowAll || lo.ns == rt.Namespace && lo.selector == nil
	if lo.selector != nil {
		out.byLabels = true
		admitted = t.selectedBy(lo, rt.Namespace)
	}
	return admitted
}

// claimHost claims host h for the route through listener lo of parent p: the listener's
// certificate, and a route per match of every rule served.
func (rc *routeCtx) claimHost(p *parentOut, lo *listenerOut, h string, owner *configv1.ObjectRef) {
	out, rt := rc.out, rc.out.rt
	if lo.cert != "" && h != "" {
		key := h + "|cert|" + lo.cert
		if !rc.seen[key] {
			rc.seen[key] = true
			if covers(lo.certNames, h) {
				out.claims[h] = append(out.claims[h], gwClaim{cert: lo.cert, owner: owner, field: fmt.Sprintf("spec.parentRefs[%d]", p.index),
					prec: routePrec{kindRank: 1, age: rt.CreationTimestamp.Time, ns: rt.Namespace, name: rt.Name}})
			} else {
				rc.add("spec.hostnames", sevError, "CertificateHostMismatch", fmt.Sprintf("certificate %s of Gateway %s/%s listener %q does not cover host %q; the host is not served over HTTPS",
					lo.cert, p.gw.ns, p.gw.name, lo.name, h))
			}
		}
	}
	for ri, r := range rc.rules {
		if r.dropped != "" {
			continue
		}
		for mi, tmpl := range r.routes {
			// One claim per listener hostname too: of two listeners on one proxy
			// listener giving the route the same host, the one governing it
			// serves it (isolation.go).
			key := fmt.Sprintf("%s|%d|%s|%s|%d|%d", h, lo.scheme, lo.listener, lo.hostname, ri, mi)
			if rc.seen[key] {
				continue
			}
			rc.seen[key] = true
			route := proto.Clone(tmpl).(*configv1.Route)
			route.Scheme = lo.scheme
			route.Listener = lo.listener
			// The Gateway API's wildcard hostnames match any number of labels.
			route.AnyDepth = isWildcard(h)
			route.Name = fmt.Sprintf("httproute/%s/%s/rules[%d]/matches[%d]/%s", rt.Namespace, rt.Name, ri, mi, schemeName(lo.scheme))
			if lo.listener != "" {
				route.Name += "@" + lo.listener
			}
			prec := r.precs[mi]
			prec.scheme, prec.listener = lo.scheme, lo.listener
			out.claims[h] = append(out.claims[h], gwClaim{route: route, owner: owner, prec: prec, listenerHost: lo.hostname})
		}
	}
}

func isGatewayParent(pr gatewayv1.ParentReference) bool {
	group, kind := GatewayGroup, "Gateway"
	if pr.Group != nil {
		group = string(*pr.Group)
	}
	if pr.Kind != nil {
		kind = string(*pr.Kind)
	}
	return group == GatewayGroup && kind == "Gateway"
}

func schemeName(s configv1.RouteScheme) string {
	switch s {
	case configv1.RouteScheme_ROUTE_SCHEME_HTTP:
		return "http"
	case configv1.RouteScheme_ROUTE_SCHEME_HTTPS:
		return "https"
	}
	return "any"
}

// intersectHosts is the Gateway API's hostname intersection of a listener's hostname ("" for
// any) with a route's hostnames (none for any): the hosts the route is served on there,
// sorted. A wildcard ("*.example.com") matches one or more labels in front of its suffix.
func intersectHosts(listener string, route []string) []string {
	if len(route) == 0 {
		return []string{listener}
	}
	var out []string
	for _, r := range route {
		switch {
		case listener == "" || r == listener:
			out = append(out, r)
		case isWildcard(listener) && !isWildcard(r) && wildcardMatches(listener, r):
			out = append(out, r)
		case isWildcard(r) && !isWildcard(listener) && wildcardMatches(r, listener):
			out = append(out, listener)
		case isWildcard(r) && isWildcard(listener):
			if strings.HasSuffix(r[1:], listener[1:]) {
				out = append(out, r)
			} else if strings.HasSuffix(listener[1:], r[1:]) {
				out = append(out, listener)
			}
		}
	}
	sort.Strings(out)
	uniq := out[:0]
	for i, h := range out {
		if i == 0 || h != out[i-1] {
			uniq = append(uniq, h)
		}
	}
	return uniq
}

func isWildcard(h string) bool { return strings.HasPrefix(h, "*.") }

func wildcardMatches(wildcard, host string) bool {
	suffix := wildcard[1:] // ".example.com"
	return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
}
