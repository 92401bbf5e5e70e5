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
