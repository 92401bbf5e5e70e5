package contract

import (
	"testing"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// docs/protocol.md, "The status stream": an Ingress's addresses travel typed (an IP is an
// IPAddress, a hostname a Hostname) and come back as status.loadBalancer entries in
// canonical order; an untyped address is an IP, as the Gateway API defaults it.
func TestTypedAddressesComeBackAsTheLoadBalancer(t *testing.T) {
	lb := []*watchv1.LoadBalancerIngress{{Hostname: "lb.example.com"}, {Ip: "203.0.113.7"}}
	typed := TypedAddresses(lb)
	if len(typed) != 2 || typed[0].GetType() != AddressTypeHostname || typed[0].GetValue() != "lb.example.com" ||
		typed[1].GetType() != AddressTypeIP || typed[1].GetValue() != "203.0.113.7" {
		t.Fatalf("typed %v", typed)
	}
	back := LoadBalancerOf(typed)
	want := []*watchv1.LoadBalancerIngress{{Hostname: "lb.example.com"}, {Ip: "203.0.113.7"}}
	SortLoadBalancer(want)
	if !SameLoadBalancer(back, want) {
		t.Fatalf("back %v, want %v", back, want)
	}
	if got := LoadBalancerOf([]*watchv1.GatewayAddress{{Value: "192.0.2.1"}}); len(got) != 1 || got[0].GetIp() != "192.0.2.1" {
		t.Fatalf("an untyped address came back as %v", got)
	}
	if LoadBalancerOf(nil) != nil {
		t.Fatal("no address came back as a list")
	}
}
