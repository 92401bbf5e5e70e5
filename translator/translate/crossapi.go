package translate

// Hosts across the two APIs. An Ingress and an HTTPRoute of different namespaces never share
// a host: the older claim keeps it and the newer one is refused for that host, whichever API
// each comes from, so that a route of one tenant allowed on a shared Gateway cannot take over
// a host (and its certificate) another tenant's Ingress serves, nor the other way round.
// Within one namespace the two APIs merge; HTTPRoutes among themselves follow the Gateway
// API's rules and Ingresses among themselves theirs. A Gateway's listener certificate for its
// own hostname is the Gateway owner's claim and not subject to this rule.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// hostClaimant is one object with at least one claim (route or certificate) on a host.
type hostClaimant struct {
	key      string // findings key
	route    bool   // an HTTPRoute; else an Ingress
	age      time.Time
	ns, name string
}

func (c hostClaimant) String() string {
	if c.route {
		return "HTTPRoute " + c.ns + "/" + c.name
	}
	return "Ingress " + c.ns + "/" + c.name
}

// before orders claimants by age: the oldest creationTimestamp, then namespace, then name
// (as Ingresses are ordered among themselves), then Ingresses before HTTPRoutes.
func (a hostClaimant) before(b hostClaimant) bool {
	switch {
	case !a.age.Equal(b.age):
		return a.age.Before(b.age)
	case a.ns != b.ns:
		return a.ns < b.ns
	case a.name != b.name:
		return a.name < b.name
	}
	return !a.route && b.route
}

// crossAPIRefused returns the objects refused on host h by the rule between the two APIs,
// by findings key, each with the claimant that keeps the host from it. Claimants are taken
// oldest first; one is refused when an older claimant of the other API and of another
// namespace was kept. A refused claimant refuses nobody.
func (t *Translator) crossAPIRefused(h string) map[string]hostClaimant {
	ings, routes := t.hostUsers.count(h), 0
	for key := range t.gw.hostUsers.all(h) {
		if strings.HasPrefix(key, "HTTPRoute/") {
			routes++
		}
	}
	if ings == 0 || routes == 0 {
		return nil
	}
	cs := make([]hostClaimant, 0, ings+routes)
	for k := range t.hostUsers.all(h) {
		ing := t.local[k].meta
		cs = append(cs, hostClaimant{key: ingressKey(k), age: ing.CreationTimestamp.Time, ns: k.ns, name: k.name})
	}
	for key := range t.gw.hostUsers.all(h) {
		kind, rest, _ := strings.Cut(key, "/")
		if kind != "HTTPRoute" {
			continue
		}
		ns, name, _ := strings.Cut(rest, "/")
		rt := t.gw.routeOut[nsName{ns, name}].rt
		cs = append(cs, hostClaimant{key: key, route: true, age: rt.CreationTimestamp.Time, ns: ns, name: name})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].before(cs[j]) })

	// kept[api]: the oldest kept claimant of each namespace, oldest first. Looking for a kept
	// claimant of another namespace stops at the second entry at the latest.
	var kept [2][]hostClaimant
	var refused map[string]hostClaimant
	for _, c := range cs {
		api := 0
		if c.route {
			api = 1
		}
		var winner *hostClaimant
		for i := range kept[1-api] {
			if kept[1-api][i].ns != c.ns {
				winner = &kept[1-api][i]
				break
			}
		}
		if winner != nil {
			if refused == nil {
				refused = map[string]hostClaimant{}
			}
			refused[c.key] = *winner
			continue
		}
		seen := false
		for _, k := range kept[api] {
			if k.ns == c.ns {
				seen = true
				break
			}
		}
		if !seen {
			kept[api] = append(kept[api], c)
		}
	}
	return refused
}

// crossAPICause is the cause of loser's refusal on host h in favour of winner.
func crossAPICause(h string, loser, winner hostClaimant, what string) string {
	host := fmt.Sprintf("host %q", h)
	if h == "" {
		host = "the catch-all host (any host)"
	}
	why := "which is older"
	if winner.age.Equal(loser.age) {
		why = "created at the same time and first by namespace"
	}
	return fmt.Sprintf("%s is already served by %s of another namespace, %s (an Ingress and an HTTPRoute of different namespaces never share a host); %s",
		host, winner, why, what)
}

// refuseCrossAPI gives every object refused on host h its findings, and records the refused
// HTTPRoutes for their conditions.
func (t *Translator) refuseCrossAPI(h string, refused map[string]hostClaimant, lose func(key string, f *configv1.Finding)) {
	lost := map[string]string{}
	for key, w := range refused {
		kind, rest, _ := strings.Cut(key, "/")
		ns, name, _ := strings.Cut(rest, "/")
		k := nsName{ns, name}
		var loser hostClaimant
		switch kind {
		case "Ingress":
			loser = hostClaimant{age: t.local[k].meta.CreationTimestamp.Time}
		case "HTTPRoute":
			loser = hostClaimant{age: t.gw.routeOut[k].rt.CreationTimestamp.Time}
		}
		switch kind {
		case "Ingress":
			lo := t.local[k]
			done := map[string]bool{}
			for _, c := range lo.claims.of(h) {
				if done[c.hostField] {
					continue
				}
				done[c.hostField] = true
				lose(key, findingOf(lo.meta, c.hostField, sevError, "ConflictLost",
					crossAPICause(h, loser, w, "this Ingress's routes and certificate are not served for it")))
			}
		case "HTTPRoute":
			o := t.gw.routeOut[k]
			field := "spec.hostnames"
			if len(o.rt.Spec.Hostnames) == 0 {
				for _, p := range o.parents {
					if containsString(p.hosts, h) {
						field = fmt.Sprintf("spec.parentRefs[%d]", p.index)
						break
					}
				}
			}
			lose(key, gwRouteFinding(o, field, crossAPICause(h, loser, w, "this route is not served for it")))
			lost[key] = w.String()
		}
	}
	if len(lost) > 0 {
		t.gw.hostLost[h] = lost
	} else {
		delete(t.gw.hostLost, h)
	}
}

func gwRouteFinding(o *routeOut, field, cause string) *configv1.Finding {
	return &configv1.Finding{Object: gwRef("HTTPRoute", o.rt.Namespace, o.rt.Name, string(o.rt.UID)), Field: field, Cause: cause,
		Severity: sevError, Reason: "ConflictLost"}
}

func containsString(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// crossAPIConditions are the conditions of parent p of the HTTPRoute key once the hosts it
// lost to Ingresses of other namespaces are counted: none left, Accepted=False ConflictLost;
// some left, PartiallyInvalid=True naming the hosts whose rules are dropped. The Gateway API
// has no reason for a host taken by another API; its Route conditions allow other reasons.
func (t *Translator) crossAPIConditions(key string, p *parentOut, gen int64) []*watchv1.Condition {
	var lost, by []string
	for _, h := range p.hosts {
		if w, ok := t.gw.hostLost[h][key]; ok {
			if h == "" {
				lost = append(lost, "(any host)")
			} else {
				lost = append(lost, h)
			}
			by = append(by, w)
		}
	}
	if len(lost) == 0 || len(p.conditions) == 0 || p.conditions[0].GetStatus() != condTrue {
		return p.conditions
	}
	parts := make([]string, len(lost))
	for i := range lost {
		parts[i] = lost[i] + " (served by " + by[i] + ")"
	}
	what := strings.Join(parts, ", ")
	const rule = "an Ingress and an HTTPRoute of different namespaces never share a host; the older claim keeps it"
	out := make([]*watchv1.Condition, 0, len(p.conditions)+1)
	if len(lost) == len(p.hosts) {
		out = append(out, cond(gatewayv1.RouteConditionAccepted, condFalse, "ConflictLost", "every host of the route is already served by an object of another namespace that takes precedence: "+what+"; "+rule, gen))
		for _, c := range p.conditions[1:] {
			if c.GetType() != string(gatewayv1.RouteConditionPartiallyInvalid) { // never set on a route that is not accepted
				out = append(out, c)
			}
		}
		return out
	}
	msg := "Dropped Rule(s) on host(s) " + what + ": " + rule
	found := false
	for _, c := range p.conditions {
		if c.GetType() == string(gatewayv1.RouteConditionPartiallyInvalid) {
			c = cond(gatewayv1.RouteConditionPartiallyInvalid, condTrue, c.GetReason(), c.GetMessage()+"; "+msg, gen)
			found = true
		}
		out = append(out, c)
	}
	if !found {
		out = append(out, cond(gatewayv1.RouteConditionPartiallyInvalid, condTrue, "ConflictLost", msg, gen))
	}
	return out
}
