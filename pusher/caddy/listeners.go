package caddy

import (
	"fmt"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/internal/contract"
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

// ParseListener reads a --proxy-listener value, SCHEME:NAME=ADDRESS (Listener.Flag's form):
// SCHEME http or https, NAME a listener name the translator gives routes
// (contract.CheckListenerName). ADDRESS is returned as given; the caller checks it.
func ParseListener(v string) (Listener, error) {
	scheme, rest, ok := strings.Cut(v, ":")
	name, listen, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || (scheme != "http" && scheme != "https") {
		return Listener{}, fmt.Errorf("must be http:NAME=ADDRESS or https:NAME=ADDRESS")
	}
	if err := contract.CheckListenerName(name); err != nil {
		return Listener{}, err
	}
	return Listener{Name: name, HTTPS: scheme == "https", Listen: listen}, nil
}

// Flag is l as a --proxy-listener value (ParseListener reads it back).
func (l Listener) Flag() string {
	scheme := "http"
	if l.HTTPS {
		scheme = "https"
	}
	return scheme + ":" + l.Name + "=" + l.Listen
}
