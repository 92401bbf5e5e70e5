package caddy

import (
	"sync"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// unbound tells, once per name, of a listener the configs' routes name that this proxy does
// not bind (RenderOptions.Listeners): the translator and every pusher of a fleet must be
// given the same listeners (docs/design.md, "Gateway addresses and ports"), and a route on a
// listener no server binds is served nowhere. Only the hosts a version changes are looked at,
// so its cost is that of the change.
type unbound struct {
	report func(listener string)
	mu     sync.Mutex
	bound  map[string]bool // names bound, and names already reported
}

func newUnbound(o RenderOptions, report func(string)) *unbound {
	u := &unbound{report: report, bound: map[string]bool{"": true}}
	for _, l := range o.Listeners {
		u.bound[l.Name] = true
	}
	return u
}

// check reports each listener the routes of vhs name that is neither bound nor reported.
func (u *unbound) check(vhs []*configv1.VirtualHost) {
	if u == nil || u.report == nil {
		return
	}
	var fresh []string
	u.mu.Lock()
	for _, vh := range vhs {
		for _, rt := range vh.GetRoutes() {
			if l := rt.GetListener(); !u.bound[l] {
				u.bound[l] = true
				fresh = append(fresh, l)
			}
		}
	}
	u.mu.Unlock()
	for _, l := range fresh {
		u.report(l)
	}
}
