package gate

import (
	"container/list"
	"strconv"
	"time"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// The deletion guard's bookkeeping. It judges a hold by the deletion it holds: which of the
// served routes (those of the applied config) the chain's newest version removes, and since
// when each removal has stood. A change that leaves those removals as they are (endpoint
// churn: backends upserted, an unrelated host edited) neither restarts the hold nor extends
// it; a route removed anew starts its own hold; a route that comes back leaves the deletion.
// Its cost is the change: a delta re-examines only the hosts it touches, a complete state is
// diffed once, and an applied config takes over only the hosts changed since the last one.

// routeSet is the route keys of one virtual host.
type routeSet map[string]struct{}

// served is what the data plane serves: the routes of the applied config, by host. It
// outlives streams, as the applied config does.
type served struct {
	hosts map[string]routeSet
	n     int
}

// removals are the served routes the chain's newest version removes. They belong to one
// stream's chain: a new stream starts them again.
type removals struct {
	byHost map[string]map[string]*list.Element
	// order holds the removals (*removal) oldest first: a removal is added when first seen
	// and the clock only moves on, so the newest removal still standing is the last.
	order *list.List
	// dirty are the hosts the chain changed since the applied config; all: every host (a
	// complete state came).
	dirty map[string]struct{}
	all   bool
}

type removal struct {
	host, route string
	since       time.Time
}

// count is how many served routes the chain's newest version removes.
func (r *removals) count() int {
	if r.order == nil {
		return 0
	}
	return r.order.Len()
}

// newest is when the newest removal still standing was first seen.
func (r *removals) newest() time.Time { return r.order.Back().Value.(*removal).since }

func (r *removals) init() {
	if r.order == nil {
		r.byHost, r.order, r.dirty = map[string]map[string]*list.Element{}, list.New(), map[string]struct{}{}
	}
}

// guarded says whether the deletion guard is on: only then is anything tracked.
func (a *admission) guarded() bool { return a.cfg.GuardMaxDeleteRatio > 0 }

// routesOf returns the route keys of vh (nil for none).
func (a *admission) routesOf(vh *configv1.VirtualHost) routeSet {
	if vh == nil {
		return nil
	}
	out := make(routeSet, len(vh.GetRoutes()))
	for _, rt := range vh.GetRoutes() {
		a.work++
		out[strconv.Itoa(int(rt.GetPath().GetType()))+" "+rt.GetPath().GetValue()] = struct{}{}
	}
	return out
}

// chainHost is the virtual host the chain's newest version holds for host, nil for none.
func (a *admission) chainHost(host string) *configv1.VirtualHost {
	vh, _ := a.st.chain.State.Get(contract.VirtualHosts, host).(*configv1.VirtualHost)
	return vh
}

// trackHost brings the removals of host up to date with the chain.
func (a *admission) trackHost(host string) {
	r := &a.st.removed
	r.init()
	r.dirty[host] = struct{}{}
	have := a.served.hosts[host]
	if len(have) == 0 {
		return
	}
	next := a.routesOf(a.chainHost(host))
	gone := r.byHost[host]
	for route := range have {
		a.work++
		_, kept := next[route]
		el, was := gone[route]
		switch {
		case kept && was:
			r.order.Remove(el)
			delete(gone, route)
		case !kept && !was:
			if gone == nil {
				gone = map[string]*list.Element{}
				r.byHost[host] = gone
			}
			gone[route] = r.order.PushBack(&removal{host: host, route: route, since: a.cfg.Now()})
		}
	}
	if len(gone) == 0 {
		delete(r.byHost, host)
	}
}

// trackDelta takes a delta the chain applied: only the hosts it touches can change what
// it removes.
func (a *admission) trackDelta(d *configv1.ConfigDelta) {
	if !a.guarded() {
		return
	}
	for _, vh := range d.GetVirtualHosts() {
		a.trackHost(vh.GetHostname())
	}
	for _, h := range d.GetRemovedVirtualHosts() {
		a.trackHost(h)
	}
}

// trackAll takes a complete state the chain was replaced with: every served host is
// compared once. A removal that still stands keeps the time it was first seen.
func (a *admission) trackAll() {
	if !a.guarded() {
		return
	}
	for host := range a.served.hosts {
		a.trackHost(host)
	}
	a.st.removed.all = true
}

// settle is told that the data plane now serves the chain's newest version: the served
// routes take over the hosts the chain changed, and nothing is removed any more.
func (a *admission) settle() {
	if !a.guarded() || a.st.chain.State == nil {
		return
	}
	r := &a.st.removed
	if r.all || a.served.hosts == nil {
		a.served = served{hosts: map[string]routeSet{}}
		for _, vh := range a.st.chain.State.Resources().GetVirtualHosts() {
			a.setServed(vh.GetHostname(), a.routesOf(vh))
		}
	} else {
		for host := range r.dirty {
			a.setServed(host, a.routesOf(a.chainHost(host)))
		}
	}
	a.st.removed = removals{}
}

func (a *admission) setServed(host string, routes routeSet) {
	a.served.n -= len(a.served.hosts[host])
	if len(routes) == 0 {
		delete(a.served.hosts, host)
		return
	}
	a.served.hosts[host] = routes
	a.served.n += len(routes)
}
