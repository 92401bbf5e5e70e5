package contract

import (
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// MaxAddressPrefixes bounds a route's client address prefixes (allow and deny together): a
// list is checked on every request.
const MaxAddressPrefixes = 1000

// AddressFilter is a route's ClientAddresses, parsed.
type AddressFilter struct {
	allow, deny []netip.Prefix
}

// CompileAddressFilter parses f (nil for an unset filter, which admits every address).
func CompileAddressFilter(f *configv1.AddressFilter) (*AddressFilter, error) {
	if f == nil {
		return nil, nil
	}
	if n := len(f.GetAllow()) + len(f.GetDeny()); n > MaxAddressPrefixes {
		return nil, fmt.Errorf("%d address prefixes (at most %d)", n, MaxAddressPrefixes)
	}
	parse := func(what string, ss []string) ([]netip.Prefix, error) {
		out := make([]netip.Prefix, 0, len(ss))
		for _, s := range ss {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("%s %q is not an address prefix (CIDR)", what, s)
			}
			out = append(out, p.Masked())
		}
		return out, nil
	}
	allow, err := parse("allow", f.GetAllow())
	if err != nil {
		return nil, err
	}
	deny, err := parse("deny", f.GetDeny())
	if err != nil {
		return nil, err
	}
	return &AddressFilter{allow: allow, deny: deny}, nil
}

// Admits reports whether a client at a may use the route: not in a deny prefix, and in an
// allow prefix when there are any. A nil filter admits everyone; an invalid address (the
// client's is unknown) only a filter without allow prefixes.
func (f *AddressFilter) Admits(a netip.Addr) bool {
	if f == nil {
		return true
	}
	a = a.Unmap()
	for _, p := range f.deny {
		if p.Contains(a) {
			return false
		}
	}
	if len(f.allow) == 0 {
		return true
	}
	for _, p := range f.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// BodyTooLarge reports whether a request body of size bytes (-1: unknown, as a chunked one
// before it is read) is over the route's MaxRequestBodyBytes.
func BodyTooLarge(rt *configv1.Route, size int64) bool {
	max := rt.GetMaxRequestBodyBytes()
	return max > 0 && size >= 0 && uint64(size) > max
}

// ClientOf is the address of r's client: the TCP peer's (RemoteAddr), unmapped; the zero
// Addr when it is not an address.
func ClientOf(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// guard is the answer the route's limits give req before anything else of the route: 403
// when its client address is not admitted, 413 when its body is too large; 0 to go on. A
// rate limit admits one request (what it refuses depends on the requests before it, which
// the reference does not see: Bucket is its rule).
func guard(rt *configv1.Route, req Request) int {
	if rt.GetClientAddresses() != nil {
		f, err := CompileAddressFilter(rt.GetClientAddresses())
		if err != nil || !f.Admits(req.Client) {
			return http.StatusForbidden
		}
	}
	if BodyTooLarge(rt, req.BodySize) {
		return http.StatusRequestEntityTooLarge
	}
	return 0
}

// MaxBackendTimeout bounds each of a route's backend timeouts.
const MaxBackendTimeout = 24 * time.Hour

// CheckBackendTimeouts returns why a data plane could not apply t: a timeout that is not
// positive, over MaxBackendTimeout, or not whole milliseconds.
func CheckBackendTimeouts(t *configv1.BackendTimeouts) error {
	for name, d := range map[string]*durationpb.Duration{"connect": t.GetConnect(), "read": t.GetRead(), "write": t.GetWrite()} {
		if d == nil {
			continue
		}
		v := d.AsDuration()
		if !d.IsValid() || v <= 0 || v > MaxBackendTimeout || v%time.Millisecond != 0 {
			return fmt.Errorf("%s timeout %s (whole milliseconds, up to %s)", name, v, MaxBackendTimeout)
		}
	}
	return nil
}
