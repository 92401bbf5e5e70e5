package translate

// Hosts: the claims on a host, an Ingress's (claim) and a Gateway API object's (gwClaim),
// resolved together into one virtual host (resolveHost), with the findings of the claims
// that lose and the backends and certificate the virtual host refers to.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

type routeKey struct {
	host string
	typ  configv1.PathMatchType
	path string
}

// claim is one route or certificate an Ingress asks for on a host.
type claim struct {
	defaultBackend bool // claims of defaultBackend come after every rule
	seq            int
	route          *configv1.Route // nil for a certificate claim
	key            routeKey
	field          string
	hostField      string // where the host is named: spec.rules[i].host, spec.tls[i].hosts, spec.defaultBackend
	cert           string
	path           string         // the Ingress's own path, as written
	pathType       string         // and its pathType, as written (a canary joins the same)
	variants       *routeVariants // the route as other Ingresses of its host may make it (nginxVariant); nil when it is final
}

// hostClaims are an Ingress's claims by host, hosts in the order first claimed. Nearly every
// Ingress names one host or two, and a map per Ingress cost more than its claims (about 380
// bytes each, 34 MB at 100k Ingresses); an index by host is built only for many hosts.
type hostClaims struct {
	hosts []string
	by    [][]claim      // by[i]: the claims on hosts[i]
	index map[string]int // host -> i, once there are more than hostClaimsScan hosts
}

// hostClaimsScan is how many hosts are looked up by scanning before an index is built.
const hostClaimsScan = 8

func (hc *hostClaims) find(host string) int {
	if hc.index != nil {
		if i, ok := hc.index[host]; ok {
			return i
		}
		return -1
	}
	for i, h := range hc.hosts {
		if h == host {
			return i
		}
	}
	return -1
}

// of is the claims on host, nil when none.
func (hc *hostClaims) of(host string) []claim {
	if i := hc.find(host); i >= 0 {
		return hc.by[i]
	}
	return nil
}

// add appends c to host's claims.
func (hc *hostClaims) add(host string, c claim) {
	if i := hc.find(host); i >= 0 {
		hc.by[i] = append(hc.by[i], c)
		return
	}
	hc.hosts = append(hc.hosts, host)
	hc.by = append(hc.by, []claim{c})
	switch {
	case hc.index != nil:
		hc.index[host] = len(hc.hosts) - 1
	case len(hc.hosts) > hostClaimsScan:
		hc.index = make(map[string]int, len(hc.hosts))
		for i, h := range hc.hosts {
			hc.index[h] = i
		}
	}
}

type hostUse struct {
	backends []string
	cert     string
}

// gwClaim is one route or certificate a Gateway or an HTTPRoute asks for on a host.
type gwClaim struct {
	route *configv1.Route // nil for a certificate claim
	cert  string
	prec  routePrec
	owner *configv1.ObjectRef
	field string
	// listenerHost is the hostname of the listener a route claim attached through: the route
	// is served on the host only while that listener governs it (isolation.go).
	listenerHost string
}

func (c gwClaim) ownerKey() string {
	return c.owner.GetKind() + "/" + c.owner.GetNamespace() + "/" + c.owner.GetName()
}

func (c gwClaim) ownerName() string {
	return c.owner.GetKind() + " " + c.owner.GetNamespace() + "/" + c.owner.GetName()
}

func (c gwClaim) finding(cause string) *configv1.Finding {
	return &configv1.Finding{Object: c.owner, Field: c.field, Cause: cause, Severity: sevError, Reason: "ConflictLost"}
}

// resolveHost resolves every claim on host h in precedence order. Gateway API claims
// (HTTPRoute rules, listener certificates) come first: their routes are tried before the
// Ingresses' routes of the same host, in the Gateway API's own precedence, and their
// certificate wins. Ingress claims follow: per route key the first claim wins (rules before
// defaultBackends, then the oldest Ingress, then the Ingress's own order), and so does the
// first certificate. Before both, an Ingress and an HTTPRoute of different namespaces do not
// share the host: the older one keeps it and the other's claims on it are left out
// (crossAPIRefused). The losers get findings.
func (t *Translator) resolveHost(h string) {
	refused := t.crossAPIRefused(h)
	claims := t.ingressClaimsOn(h, refused)

	findings := map[string][]*configv1.Finding{}
	lose := func(key string, f *configv1.Finding) {
		findings[key] = append(findings[key], f)
	}
	var cert hostCert
	t.refuseCrossAPI(h, refused, lose)

	// The Gateway API's claims, in their precedence order.
	gwRoutes, gwCerts := t.gatewayClaims(h, refused)
	for _, c := range gwCerts {
		switch {
		case cert.name == "":
			cert.name, cert.from = c.cert, c.ownerName()
		case cert.name != c.cert:
			lose(c.ownerKey(), c.finding(fmt.Sprintf("host %q already has certificate %s from %s, which takes precedence; this certificate is not used for it",
				h, cert.name, cert.from)))
		}
	}

	// ingress-nginx makes every path of a host a regular expression when one Ingress of the
	// host asks for it (use-regex, rewrite-target); a canary's own annotations do not count.
	regexHost := false
	for _, c := range claims {
		regexHost = regexHost || c.route != nil && c.lo.nginx.regex && c.lo.nginx.canary == nil
	}
	mains := map[writtenPath]int{} // an Ingress path as written -> its winner in served
	served, canaries := resolveIngressClaims(h, claims, regexHost, &cert, mains, lose)
	joined := map[int][]*configv1.Route{}
	joinCanaries(h, canaries, served, mains, joined, lose)
	t.setHostFindings(h, findings)

	// The default certificate is the catch-all's when nothing else gave it one; it does not
	// make the catch-all's Ingress routes redirect to HTTPS (ingress-nginx's neither).
	hasCert := cert.name != ""
	if h == "" && cert.name == "" {
		cert.name = t.defaultCertificate()
	}

	routes := t.ingressRoutes(served, joined, hasCert, regexHost)
	routes = append(gwRoutes, routes...)
	// A Gateway listener's hostname ends with its stop routes, after the Ingresses' too, so
	// that no less specific host serves what that listener governs (isolation.go).
	routes = append(routes, t.stopRoutes(h)...)

	use := hostUseOf(routes, cert.name)
	t.countHostUse(h, use)
	if len(routes) == 0 && cert.name == "" {
		delete(t.hostUses, h)
		t.out.Remove(contract.VirtualHosts, h)
		return
	}
	t.hostUses[h] = use
	// A host with a certificate but no route still serves TLS (and 404s).
	t.out.Put(contract.VirtualHosts, h, &configv1.VirtualHost{Hostname: h, Certificate: cert.name, Routes: routes})
}

// ownedClaim is an Ingress's claim on a host, with the Ingress's translation.
type ownedClaim struct {
	claim
	lo *ingressOut
}

// writtenPath is an Ingress path as written: a canary joins the main Ingress's route of the
// same path and pathType.
type writtenPath struct{ path, pathType string }

// hostCert is the certificate a host gets (the first claimed in precedence order) and the
// object it comes from, for the findings of the claims it makes lose.
type hostCert struct{ name, from string }

// ingressClaimsOn are the claims on host h of the Ingresses not refused there, in
// precedence order: rules before defaultBackends, then the oldest Ingress, then the
// Ingress's own order.
func (t *Translator) ingressClaimsOn(h string, refused map[string]hostClaimant) []ownedClaim {
	var claims []ownedClaim
	for k := range t.hostUsers.all(h) {
		if _, ok := refused[ingressKey(k)]; ok {
			continue
		}
		lo := t.local[k]
		for _, c := range lo.claims.of(h) {
			claims = append(claims, ownedClaim{c, lo})
		}
	}
	sort.Slice(claims, func(i, j int) bool {
		a, b := claims[i], claims[j]
		if a.defaultBackend != b.defaultBackend {
			return !a.defaultBackend
		}
		if a.lo != b.lo {
			return older(a.lo.meta, b.lo.meta)
		}
		return a.seq < b.seq
	})
	return claims
}

// resolveIngressClaims resolves the Ingresses' claims on host h, in precedence order, after
// the Gateway API's certificate claims: per route key the first claim wins, and so does the
// first certificate. It returns the winning routes (served, each path as written recorded
// in mains) and the canaries' claims, which join them after.
func resolveIngressClaims(h string, claims []ownedClaim, regexHost bool, cert *hostCert, mains map[writtenPath]int, lose func(key string, f *configv1.Finding)) (served, canaries []ownedClaim) {
	winners := map[routeKey]ownedClaim{}
	for _, c := range claims {
		ing := c.lo.meta
		if c.lo.nginx.canary != nil {
			canaries = append(canaries, c) // they join the main Ingress's routes (canary.go)
			continue
		}
		if c.route != nil {
			r, err := hostRoute(c.claim, regexHost)
			if err != "" {
				lose(ingressKey(nsName{ing.Namespace, ing.Name}), findingOf(ing, c.field, sevError, "InvalidPath", err))
				continue
			}
			c.route, c.key = r, routeKey{c.key.host, r.GetPath().GetType(), r.GetPath().GetValue()}
		}
		if c.route == nil {
			switch {
			case cert.name == "":
				cert.name, cert.from = c.cert, "Ingress "+ing.Namespace+"/"+ing.Name
			case cert.name != c.cert:
				lose(ingressKey(nsName{ing.Namespace, ing.Name}), findingOf(ing, c.field, sevError, "ConflictLost", fmt.Sprintf("host %q already has certificate %s from %s, which takes precedence",
					h, cert.name, cert.from)))
			}
			continue
		}
		cur, ok := winners[c.key]
		switch {
		case !ok:
			winners[c.key] = c
			if !c.defaultBackend && c.pathType != "" {
				mains[writtenPath{c.path, c.pathType}] = len(served)
			}
			served = append(served, c)
		case cur.lo == c.lo:
			lose(ingressKey(nsName{ing.Namespace, ing.Name}), findingOf(ing, c.field, sevWarn, "DuplicatePath", fmt.Sprintf("duplicate of %s in the same Ingress; the first one is served", cur.route.Name)))
		default:
			host := h
			if host == "" {
				host = "(any host)"
			}
			why := "which is older"
			if c.defaultBackend && !cur.defaultBackend {
				// Rules come before default backends whatever their age.
				why = "whose rule takes precedence over a default backend"
			}
			lose(ingressKey(nsName{ing.Namespace, ing.Name}), findingOf(ing, c.field, sevError, "ConflictLost", fmt.Sprintf("conflict: host %s, %s path %q is already served by Ingress %s/%s, %s; this path is not served",
				host, pathTypeName(c.key.typ), c.key.path, cur.lo.meta.Namespace, cur.lo.meta.Name, why)))
		}
	}
	return served, canaries
}

// joinCanaries joins each canary to its main Ingress's route: the oldest canary of a path,
// one per path as in ingress-nginx. joined gets, by the main route's index in served, the
// routes that replace it.
func joinCanaries(h string, canaries, served []ownedClaim, mains map[writtenPath]int, joined map[int][]*configv1.Route, lose func(key string, f *configv1.Finding)) {
	joinedBy := map[int]ownedClaim{}
	for _, c := range canaries {
		ing := c.lo.meta
		key := ingressKey(nsName{ing.Namespace, ing.Name})
		host := h
		if host == "" {
			host = "(any host)"
		}
		i, ok := mains[writtenPath{c.path, c.pathType}]
		if c.defaultBackend {
			lose(key, findingOf(ing, c.field, sevWarn, "CanaryNotServed", "a canary Ingress's defaultBackend is not served: a canary joins the paths of its host's main Ingress"))
			continue
		}
		if !ok {
			lose(key, findingOf(ing, c.field, sevError, "CanaryNotServed", fmt.Sprintf("no Ingress serves host %s, %s path %q: a canary joins the main Ingress of the same host, path and pathType; this path is not served",
				host, c.pathType, c.path)))
			continue
		}
		main := served[i]
		if by, ok := joinedBy[i]; ok {
			lose(key, findingOf(ing, c.field, sevError, "ConflictLost", fmt.Sprintf("host %s, %s path %q already has canary Ingress %s/%s, which is older (one canary per path, as in ingress-nginx); this canary is not served",
				host, c.pathType, c.path, by.lo.meta.Namespace, by.lo.meta.Name)))
			continue
		}
		cb := canaryBackend(c.route)
		if why := canaryMismatch(main.route, cb); why != "" || cb == "" {
			if why == "" {
				why = "its backend is not resolved (its other findings say why)"
			}
			lose(key, findingOf(ing, c.field, sevError, "CanaryNotServed", fmt.Sprintf("canary of Ingress %s/%s's path %q: %s; the main Ingress takes every request",
				main.lo.meta.Namespace, main.lo.meta.Name, c.path, why)))
			continue
		}
		joinedBy[i] = c
		joined[i] = c.lo.nginx.canary.routes(main.route, c.route, cb)
	}
}

// setHostFindings records the conflict findings of host h: the objects that lost before or
// lose now get theirs rebuilt.
func (t *Translator) setHostFindings(h string, findings map[string][]*configv1.Finding) {
	for k := range t.hostFindings[h] {
		t.dirtyFindings.add(k)
	}
	for k := range findings {
		t.dirtyFindings.add(k)
	}
	if len(findings) > 0 {
		t.hostFindings[h] = findings
	} else {
		delete(t.hostFindings, h)
	}
}

// ingressRoutes are the routes of the Ingresses' winning claims on a host (served, with the
// canaries joined to them), each redirecting to HTTPS as its Ingress asks now that the
// host's certificate is known, in their order on the host.
func (t *Translator) ingressRoutes(served []ownedClaim, joined map[int][]*configv1.Route, hasCert, regexHost bool) []*configv1.Route {
	var routes []*configv1.Route
	for i, c := range served {
		redirects := t.redirectsToHTTPS(c.claim, *c.lo.nginx, c.route, hasCert)
		if rs, ok := joined[i]; ok {
			// Every route of the path is served on HTTPS only; the path's plain HTTP
			// redirects, whatever its headers.
			for _, r := range rs {
				if redirects {
					r, _ = splitForHTTPS(r)
				}
				routes = append(routes, r)
			}
			if redirects {
				_, redirect := splitForHTTPS(c.route)
				routes = append(routes, redirect)
			}
			continue
		}
		if !redirects {
			routes = append(routes, c.route)
			continue
		}
		https, redirect := sslSplit(c.claim, c.route, regexHost)
		routes = append(routes, https, redirect)
	}

	// Within each source its own order; the Gateway API's routes first. Of routes of one
	// path, those with more header matches first (a canary's before its main route's).
	sort.SliceStable(routes, func(i, j int) bool {
		a, b := routes[i], routes[j]
		if moreSpecific(a.Path, b.Path) || moreSpecific(b.Path, a.Path) {
			return moreSpecific(a.Path, b.Path)
		}
		return len(contract.HeaderMatches(a)) > len(contract.HeaderMatches(b))
	})
	return routes
}

// hostUseOf is what a virtual host with routes and certificate cert refers to: backends and
// certificates are in the output while a virtual host uses them.
func hostUseOf(routes []*configv1.Route, cert string) hostUse {
	var use hostUse
	use.cert = cert
	for _, r := range routes {
		for _, b := range r.GetBackends() {
			use.backends = append(use.backends, b.GetBackend())
		}
		for _, m := range r.GetMirrors() {
			use.backends = append(use.backends, m.GetBackend())
		}
		if a := r.GetExternalAuth(); a != nil {
			use.backends = append(use.backends, a.GetBackend())
		}
	}
	return use
}

// countHostUse moves the counts of the backends and certificate host h uses from what it
// used to use: one that comes into use or goes out of it is re-examined for the output.
func (t *Translator) countHostUse(h string, use hostUse) {
	old := t.hostUses[h]
	for _, b := range old.backends {
		if t.backendRefs[b]--; t.backendRefs[b] == 0 {
			delete(t.backendRefs, b)
			t.dirtyBackends.add(b)
		}
	}
	if old.cert != "" {
		if t.certRefs[old.cert]--; t.certRefs[old.cert] == 0 {
			delete(t.certRefs, old.cert)
			t.dirtyCerts.add(old.cert)
		}
	}
	for _, b := range use.backends {
		if t.backendRefs[b]++; t.backendRefs[b] == 1 {
			t.dirtyBackends.add(b)
		}
	}
	if use.cert != "" {
		if t.certRefs[use.cert]++; t.certRefs[use.cert] == 1 {
			t.dirtyCerts.add(use.cert)
		}
	}
}

// gatewayClaims returns the Gateway API's routes on host h in precedence order, and its
// certificate claims in theirs (Gateways before HTTPRoutes, oldest first), leaving out the
// HTTPRoutes refused there and the routes of listeners that do not govern h (isolation.go).
func (t *Translator) gatewayClaims(h string, refused map[string]hostClaimant) ([]*configv1.Route, []gwClaim) {
	var rs, cs []gwClaim
	for key := range t.gw.hostUsers.all(h) {
		if _, ok := refused[key]; ok {
			continue
		}
		var claims []gwClaim
		kind, rest, _ := strings.Cut(key, "/")
		ns, name, _ := strings.Cut(rest, "/")
		switch kind {
		case "Gateway":
			claims = t.gw.gwOut[nsName{ns, name}].claims[h]
		case "HTTPRoute":
			claims = t.gw.routeOut[nsName{ns, name}].claims[h]
		}
		for _, c := range claims {
			if c.route != nil {
				rs = append(rs, c)
			} else {
				cs = append(cs, c)
			}
		}
	}
	rs = t.isolated(h, rs)
	sort.Slice(rs, func(i, j int) bool { return rs[i].prec.less(rs[j].prec) })
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.prec.kindRank != b.prec.kindRank {
			return a.prec.kindRank < b.prec.kindRank
		}
		if !a.prec.age.Equal(b.prec.age) {
			return a.prec.age.Before(b.prec.age)
		}
		if a.prec.ns != b.prec.ns {
			return a.prec.ns < b.prec.ns
		}
		if a.prec.name != b.prec.name {
			return a.prec.name < b.prec.name
		}
		if a.prec.rule != b.prec.rule {
			return a.prec.rule < b.prec.rule
		}
		return a.cert < b.cert
	})
	routes := make([]*configv1.Route, 0, len(rs))
	for _, c := range rs {
		routes = append(routes, c.route)
	}
	return routes, cs
}
