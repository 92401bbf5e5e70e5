package contract

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// This file is the reference's CORS: the Gateway API's CORS filter, as every data plane
// applies a route's Cors.

// CheckCORS returns what makes a CORS policy unusable: a list over MaxCORSEntries, an
// origin that is neither "*" nor "scheme://host[:port]" (a host that may begin with "*."),
// or is over MaxCORSOriginLength, a method that is neither "*" nor a token, a header name
// that is not a token ("*" among them).
func CheckCORS(c *configv1.Cors) error {
	if c == nil {
		return nil
	}
	for what, l := range map[string][]string{"allowOrigins": c.GetAllowOrigins(), "allowMethods": c.GetAllowMethods(), "allowHeaders": c.GetAllowHeaders(), "exposeHeaders": c.GetExposeHeaders()} {
		if len(l) > MaxCORSEntries {
			return fmt.Errorf("%d %s (at most %d)", len(l), what, MaxCORSEntries)
		}
	}
	for _, o := range c.GetAllowOrigins() {
		if err := checkOrigin(o); err != nil {
			return err
		}
	}
	for _, m := range c.GetAllowMethods() {
		if m != "*" && CheckHeaderName(m) != nil {
			return fmt.Errorf("method %q is not a token", m)
		}
	}
	for _, h := range c.GetAllowHeaders() {
		if h != "*" && CheckHeaderName(h) != nil {
			return fmt.Errorf("allowed header %q is not a token", h)
		}
	}
	for _, h := range c.GetExposeHeaders() {
		if err := CheckHeaderName(h); err != nil {
			return fmt.Errorf("exposed header: %w", err)
		}
	}
	return nil
}

func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	if len(o) > MaxCORSOriginLength {
		return fmt.Errorf("origin of %d bytes (at most %d)", len(o), MaxCORSOriginLength)
	}
	scheme, host, ok := strings.Cut(o, "://")
	if !ok || scheme == "" || host == "" || CheckHeaderName(scheme) != nil {
		return fmt.Errorf("origin %q is not scheme://host[:port]", o)
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-.:[]", c) >= 0 || c == '*' && i == 0) {
			return fmt.Errorf("origin %q: host %q is not a hostname with an optional port and leading \"*.\"", o, host)
		}
	}
	if strings.HasPrefix(host, "*") && !strings.HasPrefix(host, "*.") {
		return fmt.Errorf("origin %q: a wildcard is a leading \"*.\"", o)
	}
	return nil
}

// OriginAllowed reports whether c allows origin: "*" allows any; an origin is compared
// without regard to case, and "scheme://*.rest" allows an origin of the same scheme whose
// host and port end in ".rest" after one or more labels.
func OriginAllowed(c *configv1.Cors, origin string) bool {
	if origin == "" {
		return false
	}
	origin = strings.ToLower(origin)
	for _, o := range c.GetAllowOrigins() {
		o = strings.ToLower(o)
		if o == "*" || o == origin {
			return true
		}
		if scheme, host, _ := strings.Cut(o, "://"); strings.HasPrefix(host, "*.") {
			p := scheme + "://"
			if rest, ok := strings.CutPrefix(origin, p); ok && len(rest) > len(host)-1 && strings.HasSuffix(rest, host[1:]) {
				return true
			}
		}
	}
	return false
}

// IsPreflight reports whether req is a CORS preflight for rt: rt has a CORS policy, and req
// is an OPTIONS request with an Origin and an Access-Control-Request-Method.
func IsPreflight(rt *configv1.Route, req Request) bool {
	return rt.GetCors() != nil && req.Method == http.MethodOptions &&
		req.Header.Get("Origin") != "" && req.Header.Get("Access-Control-Request-Method") != ""
}

// PreflightHeader is the header the proxy answers a preflight with (status
// http.StatusNoContent, no body; the backend never sees it). For an origin the policy
// allows: Access-Control-Allow-Origin is the origin (also for "*", so that credentials
// work), Allow-Credentials "true" when allowed, Allow-Methods the methods (for "*" the one
// asked for), Allow-Headers the headers (for "*" those asked for, if any), Expose-Headers,
// and Max-Age when set; Vary: Origin always. For any other origin, only Vary.
func PreflightHeader(c *configv1.Cors, req Request) http.Header {
	h := http.Header{"Vary": {"Origin"}}
	origin := req.Header.Get("Origin")
	if !OriginAllowed(c, origin) {
		return h
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if c.GetAllowCredentials() {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	methods := c.GetAllowMethods()
	if slices.Contains(methods, "*") {
		methods = []string{req.Header.Get("Access-Control-Request-Method")}
	}
	if len(methods) > 0 {
		h.Set("Access-Control-Allow-Methods", strings.Join(methods, ", "))
	}
	headers := c.GetAllowHeaders()
	if slices.Contains(headers, "*") {
		headers = nil
		if asked := req.Header.Get("Access-Control-Request-Headers"); asked != "" {
			headers = []string{asked}
		}
	}
	if len(headers) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(headers, ", "))
	}
	if len(c.GetExposeHeaders()) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(c.GetExposeHeaders(), ", "))
	}
	if c.GetMaxAge() > 0 {
		h.Set("Access-Control-Max-Age", strconv.FormatUint(uint64(c.GetMaxAge()), 10))
	}
	return h
}

// ApplyResponseCORS changes h, the header of the answer to req through a route of policy c
// that is not a preflight, when c allows req's Origin: Access-Control-Allow-Origin is the
// origin, Allow-Credentials "true" when allowed, Expose-Headers the exposed headers (each
// replacing what the backend sent under that name), and "Origin" is added to Vary. The
// route's response header modifier applies after it.
func ApplyResponseCORS(c *configv1.Cors, req Request, h http.Header) {
	origin := req.Header.Get("Origin")
	if c == nil || !OriginAllowed(c, origin) {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if c.GetAllowCredentials() {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	if len(c.GetExposeHeaders()) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(c.GetExposeHeaders(), ", "))
	}
	h.Add("Vary", "Origin")
}
