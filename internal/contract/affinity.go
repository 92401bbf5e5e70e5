package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// AffinityValue is the cookie value that names endpoint address:port of backend: a digest,
// so that the cookie tells a client nothing of the cluster.
func AffinityValue(backend, address string, port uint32) string {
	sum := sha256.Sum256([]byte(backend + "\x00" + net.JoinHostPort(address, strconv.Itoa(int(port)))))
	return hex.EncodeToString(sum[:8])
}

// CheckSessionAffinity returns why a data plane could not set a's cookie: a name that is
// not a token, a path that is not absolute or has a control character or ';', a SameSite
// other than Strict, Lax or None.
func CheckSessionAffinity(a *configv1.SessionAffinity) error {
	if a == nil {
		return nil
	}
	if err := CheckHeaderName(a.GetCookieName()); err != nil {
		return fmt.Errorf("cookie name: %w", err)
	}
	if p := a.GetPath(); p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, ";,") || controlChar(p, false) >= 0) {
		return fmt.Errorf("cookie path %q", p)
	}
	switch a.GetSameSite() {
	case "", "Strict", "Lax", "None":
	default:
		return errors.New("SameSite is Strict, Lax or None")
	}
	return nil
}

// AffinityCookie is the Set-Cookie header value that pins a client to the endpoint named by
// value.
func AffinityCookie(a *configv1.SessionAffinity, value string) string {
	c := &http.Cookie{Name: a.GetCookieName(), Value: value, Path: a.GetPath(), HttpOnly: true, Secure: a.GetSecure()}
	if c.Path == "" {
		c.Path = "/"
	}
	if m := a.GetMaxAgeSeconds(); m > 0 {
		c.MaxAge = int(m)
	}
	switch a.GetSameSite() {
	case "Strict":
		c.SameSite = http.SameSiteStrictMode
	case "Lax":
		c.SameSite = http.SameSiteLaxMode
	case "None":
		c.SameSite = http.SameSiteNoneMode
	}
	return c.String()
}

// AffinityCookieValue is the value of a's cookie in req's header, "" without one.
func AffinityCookieValue(a *configv1.SessionAffinity, h http.Header) string {
	r := http.Request{Header: h}
	if c, err := r.Cookie(a.GetCookieName()); err == nil {
		return c.Value
	}
	return ""
}

// PinnedEndpoint is the backend and ready endpoint of rt that req's affinity cookie names,
// or ok false (no affinity, no cookie, or it names no ready endpoint of the route).
func PinnedEndpoint(res *configv1.Resources, rt *configv1.Route, req Request) (backend string, ep *configv1.Endpoint, ok bool) {
	a := rt.GetSessionAffinity()
	if a == nil {
		return "", nil, false
	}
	v := AffinityCookieValue(a, req.Header)
	if v == "" {
		return "", nil, false
	}
	for _, wb := range rt.GetBackends() {
		for _, b := range res.GetBackends() {
			if b.GetName() != wb.GetBackend() {
				continue
			}
			for _, e := range b.GetEndpoints() {
				if e.GetReady() && AffinityValue(b.GetName(), e.GetAddress(), e.GetPort()) == v {
					return b.GetName(), e, true
				}
			}
		}
	}
	return "", nil, false
}
