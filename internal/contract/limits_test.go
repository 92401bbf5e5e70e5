package contract

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Route.client_addresses: a deny prefix refuses whatever the allow list says; with an allow
// list only its prefixes are admitted; an IPv4-mapped IPv6 address is its IPv4 one; a client
// whose address is unknown is admitted only where there is no allow list.
func TestAddressFilterAdmitsAsTheProtocolSays(t *testing.T) {
	for _, tc := range []struct {
		allow, deny []string
		addr        string // "" for an unknown address
		want        bool
	}{
		{nil, nil, "192.0.2.1", true},
		{[]string{"10.0.0.0/8"}, nil, "10.1.2.3", true},
		{[]string{"10.0.0.0/8"}, nil, "11.0.0.1", false},
		{[]string{"10.0.0.0/8"}, nil, "::ffff:10.0.0.1", true},
		{[]string{"10.1.2.3/8"}, nil, "10.200.0.1", true}, // host bits ignored
		{[]string{"0.0.0.0/0"}, nil, "2001:db8::1", false},
		{[]string{"0.0.0.0/0", "::/0"}, nil, "2001:db8::1", true},
		{[]string{"0.0.0.0/0"}, []string{"127.0.0.1/32"}, "127.0.0.1", false},
		{nil, []string{"203.0.113.0/24"}, "203.0.113.9", false},
		{nil, []string{"203.0.113.0/24"}, "198.51.100.1", true},
		{nil, []string{"203.0.113.0/24"}, "", true},
		{[]string{"10.0.0.0/8"}, nil, "", false},
	} {
		f, err := CompileAddressFilter(&configv1.AddressFilter{Allow: tc.allow, Deny: tc.deny})
		if err != nil {
			t.Fatal(err)
		}
		var a netip.Addr
		if tc.addr != "" {
			a = netip.MustParseAddr(tc.addr)
		}
		if got := f.Admits(a); got != tc.want {
			t.Errorf("allow %v deny %v admits %q: %v, want %v", tc.allow, tc.deny, tc.addr, got, tc.want)
		}
	}
	var none *AddressFilter
	if !none.Admits(netip.Addr{}) {
		t.Error("an unset filter refused a client")
	}
}

// A route's limits are checked before anything else of it: 403 for a client it does not
// admit (even for a body too large, or where it redirects), then 413 for a body over its
// limit (its Content-Length; an unknown length is not refused up front).
func TestRouteLimitsComeFirst(t *testing.T) {
	rt := &configv1.Route{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
		ClientAddresses: &configv1.AddressFilter{Allow: []string{"10.0.0.0/8"}}, MaxRequestBodyBytes: 10,
		Redirect: &configv1.Redirect{Scheme: "https", StatusCode: 301}}
	res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{rt}}}}
	req := func(client string, body int64) Request {
		return Request{Scheme: "http", Host: "a.example.com", Method: http.MethodPost, Path: "/x", Header: http.Header{}, Client: netip.MustParseAddr(client), BodySize: body}
	}
	for _, tc := range []struct {
		req  Request
		want int
	}{
		{req("192.0.2.1", 100), http.StatusForbidden},
		{req("10.0.0.1", 11), http.StatusRequestEntityTooLarge},
		{req("10.0.0.1", 10), http.StatusMovedPermanently},
		{req("10.0.0.1", -1), http.StatusMovedPermanently},
	} {
		if got := OutcomeOf(res, tc.req).Status; got != tc.want {
			t.Errorf("client %s body %d: %d, want %d", tc.req.Client, tc.req.BodySize, got, tc.want)
		}
	}
}

// A route whose limits a data plane could not enforce is refused whole: a prefix that is no
// CIDR, too many prefixes, limits on a stop route.
func TestCheckRouteRefusesBadLimits(t *testing.T) {
	base := func() *configv1.Route {
		return &configv1.Route{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}}
	}
	many := make([]string, MaxAddressPrefixes+1)
	for i := range many {
		many[i] = "10.0.0.0/8"
	}
	for name, rt := range map[string]*configv1.Route{
		"not a prefix": func() *configv1.Route {
			r := base()
			r.ClientAddresses = &configv1.AddressFilter{Deny: []string{"10.0.0.1"}}
			return r
		}(),
		"too many": func() *configv1.Route {
			r := base()
			r.ClientAddresses = &configv1.AddressFilter{Allow: many}
			return r
		}(),
		"stop with a body limit": func() *configv1.Route { r := base(); r.Stop, r.MaxRequestBodyBytes = true, 1; return r }(),
	} {
		if err := CheckRoute(rt); err == nil {
			t.Errorf("%s: CheckRoute accepted it", name)
		}
	}
	ok := base()
	ok.ClientAddresses, ok.MaxRequestBodyBytes = &configv1.AddressFilter{Allow: []string{"10.0.0.0/8", "2001:db8::/32"}}, 1
	if err := CheckRoute(ok); err != nil {
		t.Errorf("valid limits refused: %v", err)
	}
}

// Bucket is nginx's limit_req with nodelay: burst+1 requests at once, then one per 1/rate;
// a refused request does not count.
func TestBucketAsNginxLimitReq(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		rate   float64
		burst  uint32
		at     []time.Duration // request times from t0
		admits string          // one letter per request: y or n
	}{
		{1, 0, []time.Duration{0, 0, time.Second, time.Second + time.Millisecond}, "ynyn"},
		{2, 4, []time.Duration{0, 0, 0, 0, 0, 0, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}, "yyyyynnyn"},
		{10, 1, []time.Duration{0, 0, 0, 100 * time.Millisecond, 10 * time.Second, 10 * time.Second, 10 * time.Second}, "yynyyyn"},
	} {
		var b Bucket
		got := ""
		for _, d := range tc.at {
			got += map[bool]string{true: "y", false: "n"}[b.Take(t0.Add(d), tc.rate, tc.burst)]
		}
		if got != tc.admits {
			t.Errorf("rate %v burst %d at %v: %s, want %s", tc.rate, tc.burst, tc.at, got, tc.admits)
		}
	}
}

func TestCheckRateLimitRefusesWhatCannotBeEnforced(t *testing.T) {
	for _, tc := range []struct {
		l  *configv1.RateLimit
		ok bool
	}{
		{&configv1.RateLimit{Zone: "z", RequestsPerSecond: 10, BurstMultiplier: 5}, true},
		{&configv1.RateLimit{Zone: "z", Connections: 3}, true},
		{&configv1.RateLimit{RequestsPerSecond: 10, BurstMultiplier: 5}, false},
		{&configv1.RateLimit{Zone: "z"}, false},
		{&configv1.RateLimit{Zone: "z", RequestsPerMinute: 10}, false},
		{&configv1.RateLimit{Zone: "z", RequestsPerSecond: MaxRate, BurstMultiplier: 2}, false},
		{&configv1.RateLimit{Zone: "z", Connections: 1, Exempt: []string{"10.0.0.1"}}, false},
	} {
		if err := CheckRateLimit(tc.l); (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok=%v", tc.l, err, tc.ok)
		}
	}
}

func TestCheckBackendTimeouts(t *testing.T) {
	for _, tc := range []struct {
		t  *configv1.BackendTimeouts
		ok bool
	}{
		{nil, true},
		{&configv1.BackendTimeouts{Connect: durationpb.New(5 * time.Second), Read: durationpb.New(time.Hour)}, true},
		{&configv1.BackendTimeouts{Read: durationpb.New(0)}, false},
		{&configv1.BackendTimeouts{Write: durationpb.New(25 * time.Hour)}, false},
		{&configv1.BackendTimeouts{Connect: durationpb.New(1500 * time.Microsecond)}, false},
	} {
		if err := CheckBackendTimeouts(tc.t); (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok=%v", tc.t, err, tc.ok)
		}
	}
}
