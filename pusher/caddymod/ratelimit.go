package caddymod

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// now is the rate limiters' clock; tests set it.
var now = time.Now

// maxClients bounds the client addresses one zone tracks (nginx's zone size): when it is full
// and no client has drained, a new client's request is refused, as nginx refuses when its
// zone cannot hold another.
const maxClients = 1 << 16

// zone is the counters of one Route.rate_limit zone with its values: every route that names
// them holds it, and it lives while one does (zones).
type zone struct {
	limit  *configv1.RateLimit
	exempt *contract.AddressFilter // its Deny list is the exempt prefixes

	mu      sync.Mutex
	clients map[netip.Addr]*clientCount
}

type clientCount struct {
	perSecond, perMinute contract.Bucket
	inFlight             uint32
}

// zones finds the zone of a RateLimit: routes compiled at any time (a later config, another
// virtual host) share the counters of their zone and values. Entries are weak: a zone no
// compiled route holds is collected, and its entry removed.
var zones = struct {
	sync.Mutex
	m map[string]weak.Pointer[zone]
}{m: map[string]weak.Pointer[zone]{}}

func zoneOf(l *configv1.RateLimit) *zone {
	if l == nil {
		return nil
	}
	key := fmt.Sprintf("%q %d %d %d %d %s", l.GetZone(), l.GetRequestsPerSecond(), l.GetRequestsPerMinute(), l.GetBurstMultiplier(), l.GetConnections(), strings.Join(l.GetExempt(), ","))
	zones.Lock()
	defer zones.Unlock()
	if z := zones.m[key].Value(); z != nil {
		return z
	}
	exempt, _ := contract.CompileAddressFilter(&configv1.AddressFilter{Deny: l.GetExempt()}) // CheckRoute parsed it
	z := &zone{limit: l, exempt: exempt, clients: map[netip.Addr]*clientCount{}}
	wp := weak.Make(z)
	zones.m[key] = wp
	runtime.AddCleanup(z, func(key string) {
		zones.Lock()
		defer zones.Unlock()
		if zones.m[key] == wp {
			delete(zones.m, key)
		}
	}, key)
	return z
}

// admit takes one request of client into the zone: false when it is over a rate or the
// connections (the request is then answered 503); otherwise done must be called when the
// request ends.
func (z *zone) admit(client netip.Addr) (ok bool, done func()) {
	if z == nil || len(z.limit.GetExempt()) > 0 && !z.exempt.Admits(client) {
		return true, func() {}
	}
	t := now()
	l := z.limit
	z.mu.Lock()
	defer z.mu.Unlock()
	c := z.clients[client]
	if c == nil {
		if len(z.clients) >= maxClients {
			z.sweep(t)
		}
		if len(z.clients) >= maxClients {
			return false, nil
		}
		c = &clientCount{}
		z.clients[client] = c
	}
	if n := l.GetConnections(); n > 0 && c.inFlight >= n {
		return false, nil
	}
	// Both rates must admit the request; one that refuses leaves the other's count as it was.
	ps, pm := c.perSecond, c.perMinute
	if r := l.GetRequestsPerSecond(); r > 0 && !ps.Take(t, float64(r), r*l.GetBurstMultiplier()) {
		return false, nil
	}
	if r := l.GetRequestsPerMinute(); r > 0 && !pm.Take(t, float64(r)/60, r*l.GetBurstMultiplier()) {
		return false, nil
	}
	c.perSecond, c.perMinute = ps, pm
	c.inFlight++
	return true, func() {
		z.mu.Lock()
		defer z.mu.Unlock()
		c.inFlight--
	}
}

// sweep forgets the clients with nothing in flight whose rates have drained.
func (z *zone) sweep(t time.Time) {
	l := z.limit
	for a, c := range z.clients {
		if c.inFlight == 0 && c.perSecond.Idle(t, float64(l.GetRequestsPerSecond())) && c.perMinute.Idle(t, float64(l.GetRequestsPerMinute())/60) {
			delete(z.clients, a)
		}
	}
}
