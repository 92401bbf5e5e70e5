package contract

import (
	"testing"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// docs/design.md, "Gateway addresses and ports": the translator and the pusher name a
// listener the same way, and a route is served only on its own.
func TestListenerNames(t *testing.T) {
	for _, c := range []struct {
		address        string
		port, mainPort int32
		want           string
	}{
		{"", 80, 80, ""},
		{"", 8080, 80, "8080"},
		{"192.0.2.21", 80, 80, "192.0.2.21:80"},
		{"2001:db8::1", 443, 443, "[2001:db8::1]:443"},
	} {
		got := ListenerName(c.address, c.port, c.mainPort)
		if got != c.want {
			t.Errorf("ListenerName(%q, %d, %d) = %q, want %q", c.address, c.port, c.mainPort, got, c.want)
		}
		if got != "" {
			if err := CheckListenerName(got); err != nil {
				t.Errorf("CheckListenerName(%q): %v", got, err)
			}
		}
	}
	for _, bad := range []string{"0", "65536", "web", "192.0.2.21", "192.0.2.21:0", "gw.example.com:80"} {
		if CheckListenerName(bad) == nil {
			t.Errorf("CheckListenerName(%q) accepted it", bad)
		}
	}
	rt := &configv1.Route{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, Listener: "8080"}
	for _, c := range []struct {
		listener string
		want     bool
	}{{"8080", true}, {"", false}, {"192.0.2.21:8080", false}} {
		if got := RouteMatches(rt, Request{Scheme: "http", Listener: c.listener, Path: "/"}); got != c.want {
			t.Errorf("route of listener 8080, request on %q: match %v, want %v", c.listener, got, c.want)
		}
	}
	if err := CheckRoute(&configv1.Route{Path: rt.Path, Listener: "web"}); err == nil {
		t.Error("CheckRoute accepted listener \"web\"")
	}
}
