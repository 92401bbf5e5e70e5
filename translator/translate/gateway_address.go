package translate

import (
	"hash/fnv"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// GatewayPort is a further Gateway listener port the proxies serve, and its protocol.
type GatewayPort struct {
	Port  int32
	HTTPS bool
}

// portServed says whether the proxies serve Gateway listeners of scheme https (or not) on
// port: the scheme's main port or one of Options.GatewayPorts of that protocol.
func (t *Translator) portServed(port int32, https bool) bool {
	if https && port == t.gatewayPort(configv1.RouteScheme_ROUTE_SCHEME_HTTPS) || !https && port == t.gatewayPort(configv1.RouteScheme_ROUTE_SCHEME_HTTP) {
		return true
	}
	for _, p := range t.opts.GatewayPorts {
		if p.Port == port && p.HTTPS == https {
			return true
		}
	}
	return false
}

// addressGrant is a Gateway's place in the address pool: the address it is given, or why
// none (a Programmed condition's reason and message).
type addressGrant struct {
	address string
	reason  string
	message string
}

// assignAddresses gives each Gateway of ours an address of Options.GatewayAddresses, the same
// answer for the same Gateways whatever the order they came in (docs/design.md, "Gateway
// addresses and ports"). Oldest first, a Gateway whose spec.addresses names pool addresses
// takes the first one still free; then, oldest first, every other Gateway takes the pool
// address its namespace/name hashes to, or the next free one after it. So a Gateway keeps
// its address while Gateways come and go, unless it had to step past a taken one. A
// Gateway is given none when what it asks for is not in the pool or taken, or when the pool
// is exhausted.
func (t *Translator) assignAddresses() map[nsName]addressGrant {
	pool := t.opts.GatewayAddresses
	var ours []*gatewayv1.Gateway
	for _, gw := range t.gw.gateways {
		if t.ourClass(string(gw.Spec.GatewayClassName)) {
			ours = append(ours, gw)
		}
	}
	sort.Slice(ours, func(i, j int) bool {
		a, b := ours[i], ours[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	index := map[string]int{}
	for i, a := range pool {
		index[a] = i
	}
	taken := make([]bool, len(pool))
	out := make(map[nsName]addressGrant, len(ours))
	for _, gw := range ours {
		if len(gw.Spec.Addresses) == 0 {
			continue
		}
		g := addressGrant{reason: "AddressNotUsable", message: "no address of spec.addresses is one of the proxies' (" + joinPool(pool) + ")"}
		for _, a := range gw.Spec.Addresses {
			if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
				continue
			}
			ap, err := netip.ParseAddr(a.Value)
			if err != nil {
				continue
			}
			i, ok := index[ap.String()]
			if !ok {
				continue
			}
			if taken[i] {
				g = addressGrant{reason: "AddressNotAssigned", message: "address " + a.Value + " is taken by an older Gateway"}
				continue
			}
			taken[i], g = true, addressGrant{address: pool[i]}
			break
		}
		out[nsName{gw.Namespace, gw.Name}] = g
	}
	for _, gw := range ours {
		if len(gw.Spec.Addresses) > 0 {
			continue
		}
		k := nsName{gw.Namespace, gw.Name}
		g := addressGrant{reason: "AddressNotAssigned", message: "every address of the pool is taken (" + joinPool(pool) + ")"}
		if n := len(pool); n > 0 {
			h := fnv.New32a()
			h.Write([]byte(k.ns + "/" + k.name))
			start := int(h.Sum32() % uint32(n))
			for d := 0; d < n; d++ {
				if i := (start + d) % n; !taken[i] {
					taken[i], g = true, addressGrant{address: pool[i]}
					break
				}
			}
		}
		out[k] = g
	}
	return out
}

func joinPool(pool []string) string { return strings.Join(pool, ", ") }

// reassignAddresses recomputes the pool's assignment when a Gateway changed, and marks
// dirty every Gateway whose address changed: its routes are named by it.
func (t *Translator) reassignAddresses() {
	if len(t.opts.GatewayAddresses) == 0 || len(t.gw.dirtyGateways) == 0 {
		return
	}
	next := t.assignAddresses()
	for k, g := range next {
		if t.gw.addresses[k] != g {
			t.gw.dirtyGateways.add(k)
		}
	}
	for k := range t.gw.addresses {
		if _, ok := next[k]; !ok {
			t.gw.dirtyGateways.add(k)
		}
	}
	t.gw.addresses = next
}

// servedPorts names the ports ("port 80", "ports 80, 8080") the proxies serve listeners of scheme https (or not) on, for
// a finding.
func (t *Translator) servedPorts(https bool) string {
	scheme := configv1.RouteScheme_ROUTE_SCHEME_HTTP
	if https {
		scheme = configv1.RouteScheme_ROUTE_SCHEME_HTTPS
	}
	ports := []int{int(t.gatewayPort(scheme))}
	for _, p := range t.opts.GatewayPorts {
		if p.HTTPS == https {
			ports = append(ports, int(p.Port))
		}
	}
	sort.Ints(ports)
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	if len(s) == 1 {
		return "port " + s[0]
	}
	return "ports " + strings.Join(s, ", ")
}
