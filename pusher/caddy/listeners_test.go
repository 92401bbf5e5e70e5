package caddy

import (
	"slices"
	"testing"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// docs/design.md, "Gateway addresses and ports": a route on a listener this proxy does not
// bind is served nowhere, so the pusher says so, once per listener; the main listeners and
// the bound ones are never reported.
func TestUnboundListenersAreReportedOnce(t *testing.T) {
	var got []string
	u := newUnbound(RenderOptions{Listeners: []Listener{{Name: "8080", Listen: ":18080"}}}, func(l string) { got = append(got, l) })
	host := func(listeners ...string) *configv1.VirtualHost {
		vh := &configv1.VirtualHost{Hostname: "a.example.com"}
		for _, l := range listeners {
			vh.Routes = append(vh.Routes, &configv1.Route{Name: "r", Listener: l})
		}
		return vh
	}
	u.check([]*configv1.VirtualHost{host("", "8080", "192.0.2.21:80"), host("192.0.2.21:80", "9090")})
	u.check([]*configv1.VirtualHost{host("9090", "192.0.2.21:80")})
	if want := []string{"192.0.2.21:80", "9090"}; !slices.Equal(got, want) {
		t.Fatalf("reported %v, want %v (each unbound listener once, in order)", got, want)
	}
	var none *unbound
	none.check([]*configv1.VirtualHost{host("9090")}) // a target without a report says nothing
}
