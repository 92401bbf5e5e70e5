package translate

import (
	"fmt"
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
func (t *Translator) portServed(port int32, https bool) bool { return servesPort(t.opts, port, https) }

func servesPort(opts Options, port int32, https bool) bool {
	main := opts.GatewayHTTPPort
	switch {
	case https && opts.GatewayHTTPSPort != 0:
		main = opts.GatewayHTTPSPort
	case https:
		main = DefaultGatewayHTTPSPort
	case main == 0:
		main = DefaultGatewayHTTPPort
	}
	if port == main {
		return true
	}
	for _, p := range opts.GatewayPorts {
		if p.Port == port && p.HTTPS == https {
			return true
		}
	}
	return false
}

// addressGrant is a Gateway's place in the address pool: the address it is given, or why
// none (a condition's reason and message: Accepted's when unsupported, else Programmed's).
type addressGrant struct {
	address     string
	unsupported bool
	reason      string
	message     string
}

// addressRequest is what a Gateway's spec.addresses asks of the pool: an address, nothing in
// particular (no addresses, or only ones without a value: GatewayAddressEmpty), or something
// it cannot have.
func addressRequest(gw *gatewayv1.Gateway, pool map[string]int) (want string, refused *addressGrant) {
	var values []string
	for _, a := range gw.Spec.Addresses {
		if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
			return "", &addressGrant{unsupported: true, reason: string(gatewayv1.GatewayReasonUnsupportedAddress),
				message: fmt.Sprintf("address type %q is not supported (only IPAddress)", *a.Type)}
		}
		if a.Value != "" {
			values = append(values, a.Value)
		}
	}
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", &addressGrant{reason: string(gatewayv1.GatewayReasonAddressNotUsable), message: "a Gateway is given one address, and spec.addresses names " + strings.Join(values, ", ")}
	}
	ap, err := netip.ParseAddr(values[0])
	if err != nil {
		return "", &addressGrant{reason: string(gatewayv1.GatewayReasonAddressNotUsable), message: fmt.Sprintf("address %q is not an IP address", values[0])}
	}
	if _, ok := pool[ap.String()]; !ok {
		return "", &addressGrant{reason: string(gatewayv1.GatewayReasonAddressNotUsable), message: "address " + values[0] + " is not one of the proxies' (--gateway-address, --gateway-reserved-address)"}
	}
	return ap.String(), nil
}

// assignAddresses gives each Gateway of ours an address of Options.GatewayAddresses (or of
// Options.GatewayReservedAddresses, when it asks for one of those by name), the same answer
// for the same Gateways whatever the order they came in (docs/design.md, "Gateway addresses
// and ports"):
//
//  1. oldest first, a Gateway keeps the address its status shows while no older one kept it:
//     the one it asks for, or any address of the pool when it asks for none; clients were
//     given it, so neither a request by name nor a freed address moves it;
//  2. oldest first, a Gateway asking for an address by name takes it if it is free;
//  3. oldest first, the rest take the pool address their namespace/name hashes to, or the
//     next free one after it.
//
// A Gateway is given none when what it asks for is not supported, not in the pools or in
// use, or when the pool is exhausted.
func (t *Translator) assignAddresses() map[nsName]addressGrant {
	pool := t.opts.GatewayAddresses
	var ours []*gatewayv1.Gateway
	for _, gw := range t.gw.gateways {
		if t.ourClass(string(gw.Spec.GatewayClassName)) {
			ours = append(ours, gw)
		}
	}
	sort.Slice(ours, func(i, j int) bool { return older(ours[i], ours[j]) })
	// Every address a Gateway may hold, the pool's first (only those are handed out by hash).
	all := append(append([]string(nil), pool...), t.opts.GatewayReservedAddresses...)
	index := map[string]int{}
	for i, a := range all {
		index[a] = i
	}
	holder := make([]string, len(all)) // namespace/name of the Gateway holding each address
	out := make(map[nsName]addressGrant, len(ours))
	wants := make(map[nsName]string, len(ours))
	take := func(k nsName, a string) {
		holder[index[a]], out[k] = k.ns+"/"+k.name, addressGrant{address: a}
	}
	for _, gw := range ours {
		k := nsName{gw.Namespace, gw.Name}
		want, refused := addressRequest(gw, index)
		if refused != nil {
			out[k] = *refused
			continue
		}
		wants[k] = want
		if a, ok := shownAddress(gw, index); ok && holder[index[a]] == "" && (a == want || want == "" && index[a] < len(pool)) {
			take(k, a)
		}
	}
	var rest []nsName
	for _, gw := range ours {
		k := nsName{gw.Namespace, gw.Name}
		want, ok := wants[k]
		if _, done := out[k]; done || !ok {
			continue
		}
		switch {
		case want == "":
			rest = append(rest, k)
		case holder[index[want]] != "":
			out[k] = addressGrant{reason: string(gatewayv1.GatewayReasonAddressNotAssigned), message: "address " + want + " is in use by Gateway " + holder[index[want]]}
		default:
			take(k, want)
		}
	}
	for _, k := range rest {
		g := addressGrant{reason: string(gatewayv1.GatewayReasonAddressNotAssigned), message: "every address of the pool is taken (" + joinPool(pool) + ")"}
		if n := len(pool); n > 0 {
			h := fnv.New32a()
			h.Write([]byte(k.ns + "/" + k.name))
			start := int(h.Sum32() % uint32(n))
			for d := 0; d < n; d++ {
				if i := (start + d) % n; holder[i] == "" {
					take(k, pool[i])
					g = out[k]
					break
				}
			}
		}
		out[k] = g
	}
	return out
}

// shownAddress is the first pool address gw's status.addresses shows.
func shownAddress(gw *gatewayv1.Gateway, pool map[string]int) (string, bool) {
	for _, a := range gw.Status.Addresses {
		if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
			continue
		}
		if ap, err := netip.ParseAddr(a.Value); err == nil {
			if _, ok := pool[ap.String()]; ok {
				return ap.String(), true
			}
		}
	}
	return "", false
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
