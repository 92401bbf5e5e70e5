package contract

import (
	"sort"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// SortLoadBalancer puts a status's load-balancer entries in their canonical order (by IP,
// then hostname), so that what a translator reports and what an Ingress shows compare.
func SortLoadBalancer(lbs []*watchv1.LoadBalancerIngress) {
	sort.Slice(lbs, func(i, j int) bool {
		if lbs[i].GetIp() != lbs[j].GetIp() {
			return lbs[i].GetIp() < lbs[j].GetIp()
		}
		return lbs[i].GetHostname() < lbs[j].GetHostname()
	})
}

// SameLoadBalancer reports whether two sorted load-balancer lists name the same addresses.
func SameLoadBalancer(a, b []*watchv1.LoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].GetIp() != b[i].GetIp() || a[i].GetHostname() != b[i].GetHostname() {
			return false
		}
	}
	return true
}

// The types of a typed address on the status stream (the Gateway API's AddressType values).
const (
	AddressTypeIP       = "IPAddress"
	AddressTypeHostname = "Hostname"
)

// TypedAddresses is the proxy's addresses in the status stream's one shape (ObjectStatus):
// an entry with an IP is an IPAddress, one with a hostname a Hostname; the order is kept.
func TypedAddresses(lbs []*watchv1.LoadBalancerIngress) []*watchv1.GatewayAddress {
	out := make([]*watchv1.GatewayAddress, 0, len(lbs))
	for _, a := range lbs {
		if a.GetIp() != "" {
			out = append(out, &watchv1.GatewayAddress{Type: AddressTypeIP, Value: a.GetIp()})
		} else {
			out = append(out, &watchv1.GatewayAddress{Type: AddressTypeHostname, Value: a.GetHostname()})
		}
	}
	return out
}

// LoadBalancerOf is the inverse of TypedAddresses: typed addresses as an Ingress's
// status.loadBalancer.ingress shows them (a Hostname is a hostname, anything else, the empty
// type included, an IP), in canonical order (SortLoadBalancer); nil for none.
func LoadBalancerOf(addrs []*watchv1.GatewayAddress) []*watchv1.LoadBalancerIngress {
	if len(addrs) == 0 {
		return nil
	}
	out := make([]*watchv1.LoadBalancerIngress, 0, len(addrs))
	for _, a := range addrs {
		if a.GetType() == AddressTypeHostname {
			out = append(out, &watchv1.LoadBalancerIngress{Hostname: a.GetValue()})
		} else {
			out = append(out, &watchv1.LoadBalancerIngress{Ip: a.GetValue()})
		}
	}
	SortLoadBalancer(out)
	return out
}
