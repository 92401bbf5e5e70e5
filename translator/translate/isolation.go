package translate

// Listener isolation (the Gateway API's GatewayHTTPListenerIsolation; docs/translation.md,
// "Listener isolation"): a request is served only by the routes of the most specific Gateway
// listener whose hostname matches its host, on the proxy listener it came in on. The virtual
// hosts are tried from the most specific (contract.HostCandidates), so two things make that
// hold:
//   - on a virtual host h, a Gateway route is kept only when it attached through the listener
//     that governs h on its proxy listener P (governing): a route of a listener without
//     hostname on host "a.example.com" is left out when a "*.example.com" listener is on P;
//   - a virtual host that is a listener's hostname on P ends with a stop route for P
//     (Route.stop, 404), so that what that listener governs never falls through to a less
//     specific virtual host's routes.
// Both depend on the hostnames of every served listener on P (lhosts), across Gateways and
// ListenerSets, kept as counts while Gateways are re-translated.

import (
	"fmt"
	"sort"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// proxyListener is where a route is served: Route.listener and Route.scheme.
type proxyListener struct {
	listener string
	scheme   configv1.RouteScheme
}

// lhKey is one listener hostname on one proxy listener.
type lhKey struct {
	p    proxyListener
	host string
}

// servedListeners are the listeners of out (its own, then its ListenerSets') whose routes
// are served.
func servedListeners(out *gatewayOut) []*listenerOut {
	if !out.ours {
		return nil
	}
	var ls []*listenerOut
	for _, lo := range out.listeners {
		if lo.served {
			ls = append(ls, lo)
		}
	}
	for _, so := range out.sets {
		for _, lo := range so.listeners {
			if lo.served {
				ls = append(ls, lo)
			}
		}
	}
	return ls
}

// countListenerHosts adds d (1 or -1) to the count of each served listener's hostname of
// out, remembering the count before this Build of each entry it touches
// (listenerHostsChanged compares them).
func (t *Translator) countListenerHosts(out *gatewayOut, d int) {
	g := &t.gw
	for _, lo := range servedListeners(out) {
		k := lhKey{proxyListener{lo.listener, lo.scheme}, lo.hostname}
		hs := g.lhosts[k.p]
		if hs == nil {
			hs = map[string]int{}
			g.lhosts[k.p] = hs
		}
		if _, ok := g.lhBefore[k]; !ok {
			g.lhBefore[k] = hs[k.host]
		}
		hs[k.host] += d
		if hs[k.host] == 0 {
			delete(hs, k.host)
			if len(hs) == 0 {
				delete(g.lhosts, k.p)
			}
		}
	}
}

// listenerHostsChanged marks the hosts to resolve again when a hostname came to be, or ceased
// to be, a served listener's on some proxy listener since the last Build: that hostname (its
// stop route), and every host with Gateway claims, whose governing listeners may have changed.
// Such changes (a listener added, removed, served or not, or renamed) are rare beside route
// and endpoint changes, so resolving every Gateway host then is cheaper than tracking which
// hosts each listener hostname covers.
func (t *Translator) listenerHostsChanged() {
	g := &t.gw
	changed := false
	for k, before := range g.lhBefore {
		if (before > 0) != (g.lhosts[k.p][k.host] > 0) {
			changed = true
			t.dirtyHosts.add(k.host)
		}
	}
	g.lhBefore = map[lhKey]int{}
	if !changed {
		return
	}
	for h := range g.hostUsers.keys() {
		t.dirtyHosts.add(h)
	}
}

// governing is the hostname of the listener that governs host h on proxy listener p: h
// itself when it is a listener's hostname there; else the wildcard there with the longest
// suffix covering h (a Gateway wildcard covers any number of labels); else "" when a listener
// without hostname is there. ok is false when no listener on p covers h.
func (t *Translator) governing(h string, p proxyListener) (gov string, ok bool) {
	hs := t.gw.lhosts[p]
	if hs[h] > 0 {
		return h, true
	}
	if h != "" {
		name := strings.TrimPrefix(h, "*.")
		for i := strings.IndexByte(name, '.'); i >= 0; {
			if w := "*" + name[i:]; hs[w] > 0 {
				return w, true
			}
			next := strings.IndexByte(name[i+1:], '.')
			if next < 0 {
				break
			}
			i += 1 + next
		}
	}
	if hs[""] > 0 {
		return "", true
	}
	return "", false
}

// isolated keeps, of the Gateway route claims on host h, those that attached through the
// listener governing h on their proxy listener.
func (t *Translator) isolated(h string, rs []gwClaim) []gwClaim {
	out := rs[:0]
	for _, c := range rs {
		if gov, ok := t.governing(h, proxyListener{c.route.GetListener(), c.route.GetScheme()}); ok && gov == c.listenerHost {
			out = append(out, c)
		}
	}
	return out
}

// stopRoutes are the stop routes that end virtual host h: one for each proxy listener where h
// is a served listener's hostname, in a fixed order (scheme, then listener). The catch-all
// "" needs none: nothing comes after it.
func (t *Translator) stopRoutes(h string) []*configv1.Route {
	if h == "" {
		return nil
	}
	var ps []proxyListener
	for p, hs := range t.gw.lhosts {
		if hs[h] > 0 {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].scheme != ps[j].scheme {
			return ps[i].scheme < ps[j].scheme
		}
		return ps[i].listener < ps[j].listener
	})
	out := make([]*configv1.Route, 0, len(ps))
	for _, p := range ps {
		name := fmt.Sprintf("listener-isolation/%s", schemeName(p.scheme))
		if p.listener != "" {
			name += "@" + p.listener
		}
		out = append(out, &configv1.Route{
			Name:     name,
			Path:     &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
			Scheme:   p.scheme,
			Listener: p.listener,
			AnyDepth: isWildcard(h),
			Stop:     true,
		})
	}
	return out
}
