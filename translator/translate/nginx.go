package translate

import (
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// This file reads ingress-nginx's annotations (docs/migrating-from-ingress-nginx.md): an
// Ingress of a class Sluice serves is served with the nginx.ingress.kubernetes.io/*
// annotations Sluice can serve as ingress-nginx documents them, and every other annotation
// of that prefix gets a finding that names it and the alternative. None is ignored without a
// finding. An annotation that restricts who may reach the Ingress's routes and that Sluice
// cannot serve keeps the whole Ingress from being served: serving it without the
// restriction would open what its owner closed.

// NginxAnnotationPrefix is the prefix of ingress-nginx's annotations.
const NginxAnnotationPrefix = "nginx.ingress.kubernetes.io/"

// AnnotationSSLRedirect turns the HTTP to HTTPS redirect of an Ingress's routes on a host
// with a certificate off ("false"), as ingress-nginx's ssl-redirect does.
const AnnotationSSLRedirect = "sluice.io/ssl-redirect"

// acmeChallengePath is never redirected to HTTPS by default (ingress-nginx's
// no-tls-redirect-locations): an ACME HTTP-01 challenge is answered over plain HTTP.
const acmeChallengePath = "/.well-known/acme-challenge"

// nginxIngress is what an Ingress's annotations ask of its routes, as far as Sluice serves
// it.
type nginxIngress struct {
	sslRedirect      bool // redirect HTTP to HTTPS on hosts with a certificate (default)
	forceSSLRedirect bool // redirect HTTP to HTTPS on every host
	redirect         *configv1.Redirect
	appRoot          string
	regex            bool // use-regex or rewrite-target: paths are case-insensitive regular expressions
	rewriteTarget    string
	rewrite          *configv1.Rewrite        // upstream-vhost
	requestHeaders   *configv1.HeaderModifier // x-forwarded-prefix
	cors             *configv1.Cors
	h2c              bool      // backend-protocol GRPC or H2C: the endpoints speak HTTP/2 over cleartext
	tls              bool      // backend-protocol HTTPS or GRPCS: TLS to the endpoints
	proxySSL         *proxySSL // proxy-ssl-*: how the TLS endpoints are verified; nil: not at all
	refused          bool      // an annotation the Ingress must not be served without
	// canary: the Ingress is a canary (canary.go): its paths join the main Ingress's.
	canary *canary
	// clients: allowlist- and denylist-source-range; maxBody: proxy-body-size (0: none).
	clients *configv1.AddressFilter
	maxBody uint64
	// rateLimit: limit-rps, limit-rpm, limit-connections (one zone for the whole Ingress).
	rateLimit *configv1.RateLimit
	// affinity: affinity: cookie and session-cookie-*; its Path is the route's when unset.
	affinity *configv1.SessionAffinity
	// timeouts: proxy-connect-, proxy-read- and proxy-send-timeout.
	timeouts *configv1.BackendTimeouts
	// auth: auth-url and its auth-method, auth-response-headers, auth-signin; its Backend is
	// resolved with the Ingress's Services (resolveAuth).
	auth *authURL
	// toWWW: from-to-www-redirect; aliases: server-alias.
	toWWW   bool
	aliases []string
}

// authURL is auth-url as read: a Service of the cluster, by its DNS name.
type authURL struct {
	svc   nsName
	port  int32
	tls   bool
	ea    *configv1.ExternalAuth // Backend unset
	field string
}

// nginxRule is how Sluice answers one ingress-nginx annotation it does not serve.
type nginxRule struct {
	// closed: the Ingress is not served while it has the annotation (it restricts access).
	closed bool
	// error: the Ingress is served, but the routes cannot work as meant (ERROR finding).
	error bool
	// served reports the values that ask for nothing beyond what Sluice does anyway: they
	// get no finding.
	served func(v string) bool
	// alt is what to do instead.
	alt string
}

func isValue(want ...string) func(string) bool {
	return func(v string) bool {
		for _, w := range want {
			if strings.EqualFold(strings.TrimSpace(v), w) {
				return true
			}
		}
		return false
	}
}

const (
	altAuth      = "put the authentication in the backend, or in a proxy that is the backend; the Ingress is not served while it has this annotation, since serving it without the check would open it to everyone"
	altSnippet   = "refused by design: an Ingress never reaches the proxy's configuration; if the snippet restricted access, that restriction is not applied"
	altNotNeeded = "nothing to do: Sluice does not need it"
)

// nginxRules are the ingress-nginx annotations Sluice does not serve (the prefix left out),
// chosen from ingress-nginx's own list; nginxServed are those it does.
var nginxRules = map[string]nginxRule{
	"auth-always-set-cookie":                   {alt: "the authentication service's Set-Cookie reaches the client only on a 401 or 403 it answers, never on a request that passes"},
	"auth-cache-duration":                      {alt: "answers of the authentication service are not cached: it is asked about every request"},
	"auth-cache-key":                           {alt: "answers of the authentication service are not cached: it is asked about every request"},
	"auth-keepalive":                           {served: anyValue, alt: altNotNeeded},
	"auth-keepalive-requests":                  {served: anyValue, alt: altNotNeeded},
	"auth-keepalive-share-vars":                {served: anyValue, alt: altNotNeeded},
	"auth-keepalive-timeout":                   {served: anyValue, alt: altNotNeeded},
	"auth-proxy-set-headers":                   {closed: true, alt: altAuth},
	"auth-realm":                               {closed: true, alt: altAuth},
	"auth-request-redirect":                    {alt: "X-Auth-Request-Redirect is the original request URI"},
	"auth-secret":                              {closed: true, alt: altAuth},
	"auth-secret-type":                         {closed: true, alt: altAuth},
	"auth-signin-redirect-param":               {alt: "the sign-in URL gets the original URL as rd"},
	"auth-snippet":                             {closed: true, alt: altAuth},
	"auth-tls-error-page":                      {closed: true, alt: "client certificate authentication is not supported; " + altAuth},
	"auth-tls-match-cn":                        {closed: true, alt: "client certificate authentication is not supported; " + altAuth},
	"auth-tls-pass-certificate-to-upstream":    {closed: true, alt: "client certificate authentication is not supported; " + altAuth},
	"auth-tls-secret":                          {closed: true, alt: "client certificate authentication is not supported; " + altAuth},
	"auth-tls-verify-client":                   {closed: true, served: isValue("off"), alt: "client certificate authentication is not supported; " + altAuth},
	"auth-tls-verify-depth":                    {closed: true, alt: "client certificate authentication is not supported; " + altAuth},
	"auth-type":                                {closed: true, alt: "basic and digest authentication are not supported; " + altAuth},
	"client-body-buffer-size":                  {served: anyValue, alt: altNotNeeded},
	"configuration-snippet":                    {alt: altSnippet},
	"connection-proxy-header":                  {alt: "not configurable: Caddy's reverse proxy manages the Connection header (it keeps upgrades working)"},
	"custom-headers":                           {alt: "a ConfigMap of headers is not read; an HTTPRoute ResponseHeaderModifier does it"},
	"custom-http-errors":                       {alt: "no custom error pages: a backend's errors reach the client as they are"},
	"default-backend":                          {alt: "a route whose backend has no ready endpoint answers 503 and never falls back to another Service"},
	"disable-proxy-intercept-errors":           {served: anyValue, alt: altNotNeeded},
	"enable-access-log":                        {served: isValue("true"), alt: "access logs are Caddy's, for every route alike"},
	"enable-global-auth":                       {served: isValue("false"), alt: "Sluice has no global external authentication"},
	"enable-influxdb":                          {served: isValue("false"), alt: "no InfluxDB metrics; the proxy's metrics are Caddy's Prometheus metrics"},
	"enable-modsecurity":                       {served: isValue("false"), alt: "no web application firewall: ModSecurity is not supported"},
	"enable-opentelemetry":                     {served: isValue("false"), alt: "no tracing per Ingress"},
	"enable-owasp-core-rules":                  {served: isValue("false"), alt: "no web application firewall: ModSecurity is not supported"},
	"enable-rewrite-log":                       {served: isValue("false"), alt: "no rewrite log"},
	"fastcgi-index":                            {error: true, alt: "FastCGI backends are not supported"},
	"fastcgi-params-configmap":                 {error: true, alt: "FastCGI backends are not supported"},
	"http2-push-preload":                       {served: isValue("false"), alt: "HTTP/2 server push is not supported (browsers dropped it)"},
	"influxdb-host":                            {alt: "no InfluxDB metrics"},
	"limit-rate":                               {alt: "bandwidth limits are not supported"},
	"limit-rate-after":                         {alt: "bandwidth limits are not supported"},
	"load-balance":                             {served: isValue("round_robin"), alt: "not configurable: each request goes to a random ready endpoint"},
	"mirror-host":                              {alt: "an HTTPRoute RequestMirror filter to a Service does it"},
	"mirror-request-body":                      {alt: "an HTTPRoute RequestMirror filter to a Service does it"},
	"mirror-target":                            {alt: "an HTTPRoute RequestMirror filter to a Service does it"},
	"modsecurity-snippet":                      {alt: altSnippet},
	"modsecurity-transaction-id":               {alt: "no web application firewall: ModSecurity is not supported"},
	"opentelemetry-operation-name":             {alt: "no tracing per Ingress"},
	"opentelemetry-trust-incoming-span":        {alt: "no tracing per Ingress"},
	"preserve-trailing-slash":                  {served: isValue("true"), alt: "the HTTPS redirect always keeps the path as it is, trailing slash included"},
	"proxy-buffer-size":                        {served: anyValue, alt: altNotNeeded},
	"proxy-buffering":                          {served: isValue("off"), alt: "not configurable: Caddy's reverse proxy streams responses without buffering them"},
	"proxy-buffers-number":                     {served: anyValue, alt: altNotNeeded},
	"proxy-busy-buffers-size":                  {served: anyValue, alt: altNotNeeded},
	"proxy-cookie-domain":                      {alt: "Set-Cookie is passed on as the backend sent it"},
	"proxy-cookie-path":                        {alt: "Set-Cookie is passed on as the backend sent it"},
	"proxy-http-version":                       {served: isValue("1.1"), alt: "endpoints are spoken to in HTTP/1.1 (or h2c by the Service port's appProtocol)"},
	"proxy-max-temp-file-size":                 {served: anyValue, alt: altNotNeeded},
	"proxy-next-upstream":                      {alt: "an HTTPRoute rule's retry does it"},
	"proxy-next-upstream-timeout":              {alt: "an HTTPRoute rule's retry does it"},
	"proxy-next-upstream-tries":                {alt: "an HTTPRoute rule's retry does it"},
	"proxy-redirect-from":                      {alt: "Location is passed on as the backend sent it"},
	"proxy-redirect-to":                        {alt: "Location is passed on as the backend sent it"},
	"proxy-request-buffering":                  {served: isValue("off"), alt: "not configurable: Caddy's reverse proxy streams request bodies without buffering them"},
	"proxy-ssl-ciphers":                        {alt: "the cipher suites to the endpoints are Go's defaults"},
	"proxy-ssl-protocols":                      {alt: "TLS 1.2 and 1.3 to the endpoints, Go's defaults"},
	"proxy-ssl-session-reuse":                  {served: anyValue, alt: altNotNeeded},
	"relative-redirects":                       {served: isValue("false"), alt: "Location headers of redirects are absolute"},
	"satisfy":                                  {closed: true, alt: altAuth},
	"secure-verify-ca-secret":                  {closed: true, alt: "it is ingress-nginx's older name of the check: use proxy-ssl-secret with proxy-ssl-verify: on; the Ingress is not served rather than served trusting any endpoint"},
	"server-snippet":                           {alt: altSnippet},
	"service-upstream":                         {served: isValue("false"), alt: "requests go to the Service's endpoints, never to its cluster IP"},
	"session-cookie-change-on-failure":         {alt: "a client whose endpoint is no longer ready is sent elsewhere and gets a new cookie; one whose endpoint fails is not moved"},
	"session-cookie-conditional-samesite-none": {alt: "session-cookie-samesite applies to every client"},
	"session-cookie-domain":                    {alt: "the cookie has no Domain attribute: it is the host's"},
	"ssl-ciphers":                              {alt: "the cipher suites are Caddy's (Go's defaults), for every host alike"},
	"ssl-passthrough":                          {closed: true, served: isValue("false"), alt: "TLS always ends at the proxy: the Ingress is not served, since its backend expects the client's TLS"},
	"ssl-prefer-server-ciphers":                {alt: "the cipher suites are Caddy's (Go's defaults), for every host alike"},
	"stream-snippet":                           {alt: altSnippet},
	"upstream-hash-by":                         {alt: "not configurable: each request goes to a random ready endpoint"},
	"upstream-hash-by-subset":                  {alt: "not configurable: each request goes to a random ready endpoint"},
	"upstream-hash-by-subset-size":             {alt: "not configurable: each request goes to a random ready endpoint"},
	"use-port-in-redirects":                    {served: isValue("false"), alt: "the HTTPS redirect's Location has no port"},
}

// nginxServed are the ingress-nginx annotations Sluice serves (readNginx reads them).
var nginxServed = map[string]bool{
	"allowlist-source-range": true, "app-root": true, "backend-protocol": true, "denylist-source-range": true,
	"proxy-body-size": true, "whitelist-source-range": true,
	"affinity": true, "affinity-canary-behavior": true, "affinity-mode": true, "session-cookie-expires": true, "session-cookie-max-age": true,
	"session-cookie-name": true, "session-cookie-path": true, "session-cookie-samesite": true, "session-cookie-secure": true,
	"from-to-www-redirect": true, "server-alias": true,
	"auth-method": true, "auth-response-headers": true, "auth-signin": true, "auth-url": true,
	"proxy-connect-timeout": true, "proxy-read-timeout": true, "proxy-send-timeout": true,
	"proxy-ssl-name": true, "proxy-ssl-secret": true, "proxy-ssl-server-name": true, "proxy-ssl-verify": true, "proxy-ssl-verify-depth": true,
	"limit-allowlist": true, "limit-burst-multiplier": true, "limit-connections": true, "limit-rpm": true, "limit-rps": true, "limit-whitelist": true,
	"canary": true, "canary-by-cookie": true, "canary-by-header": true, "canary-by-header-pattern": true, "canary-by-header-value": true,
	"canary-weight": true, "canary-weight-total": true, "cors-allow-credentials": true, "cors-allow-headers": true, "cors-allow-methods": true,
	"cors-allow-origin": true, "cors-expose-headers": true, "cors-max-age": true, "enable-cors": true,
	"force-ssl-redirect": true, "permanent-redirect": true, "permanent-redirect-code": true,
	"rewrite-target": true, "ssl-redirect": true, "temporal-redirect": true, "temporal-redirect-code": true,
	"upstream-vhost": true, "use-regex": true, "x-forwarded-prefix": true,
}

// NginxAnnotations lists the ingress-nginx annotations Sluice knows (the prefix left out),
// served or not, sorted: the table of docs/migrating-from-ingress-nginx.md is checked
// against it.
func NginxAnnotations() (served, refused []string) {
	for n := range nginxServed {
		served = append(served, n)
	}
	for n := range nginxRules {
		refused = append(refused, n)
	}
	sort.Strings(served)
	sort.Strings(refused)
	return served, refused
}

func anyValue(string) bool { return true }

// plainNginx is what readNginx makes of an Ingress without annotations it reads: nearly
// every Ingress of a large cluster, which then shares this one (at 100k Ingresses a copy
// each was 17 MB of the translator's heap, docs/design.md "Cold start"). Never modified.
var plainNginx = &nginxIngress{sslRedirect: true}

// readsNginx says whether annotations hold one that readNginx reads. Without, its reading is
// plainNginx, so translating nearly every Ingress of a large cluster skips reading (a map
// lookup per annotation it knows, and comparing the result with plainNginx): at 10k
// Ingresses that was a twelfth of the translator's cold start.
func readsNginx(annotations map[string]string) bool {
	if _, ok := annotations[AnnotationSSLRedirect]; ok {
		return true
	}
	for k := range annotations {
		if strings.HasPrefix(k, NginxAnnotationPrefix) {
			return true
		}
	}
	return false
}

// kept is what an Ingress's translation keeps of n: plainNginx when n is that, else a copy.
func (n nginxIngress) kept() *nginxIngress {
	if reflect.DeepEqual(n, *plainNginx) {
		return plainNginx
	}
	return &n
}

// readNginx reads an Ingress's ingress-nginx annotations (and Sluice's own ssl-redirect),
// adding a finding for every one it does not serve or cannot read.
func readNginx(ing *networkingv1.Ingress, add func(field string, sev configv1.FindingSeverity, reason, cause string)) nginxIngress {
	n := nginxIngress{sslRedirect: true}
	names := make([]string, 0, len(ing.Annotations))
	for k := range ing.Annotations {
		if strings.HasPrefix(k, NginxAnnotationPrefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	get := func(name string) (string, bool) {
		v, ok := ing.Annotations[NginxAnnotationPrefix+name]
		return strings.TrimSpace(v), ok
	}
	field := func(name string) string { return "metadata.annotations[" + NginxAnnotationPrefix + name + "]" }
	invalid := func(name, cause string) {
		add(field(name), sevWarn, "InvalidAnnotation", cause)
	}
	boolean := func(name string, def bool) bool {
		v, ok := get(name)
		if !ok {
			return def
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			invalid(name, fmt.Sprintf("%q is not true or false; the default (%t) applies", v, def))
			return def
		}
		return b
	}

	n.refused = unservedNginx(ing, names, field, add)

	if boolean("canary", false) {
		n.canary = readCanary(get, field, add)
	}
	checkCanaryAnnotations(names, n.canary != nil, field, add)

	n.sslRedirect = boolean("ssl-redirect", true)
	if v, ok := ing.Annotations[AnnotationSSLRedirect]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			add("metadata.annotations["+AnnotationSSLRedirect+"]", sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not true or false; the default (true) applies", v))
		} else {
			n.sslRedirect = n.sslRedirect && b
		}
	}
	n.forceSSLRedirect = boolean("force-ssl-redirect", false)
	n.regex = boolean("use-regex", false)

	n.readRedirects(ing, get, field, add, invalid)
	n.readRewrites(get, field, add)
	n.h2c, n.tls = readBackendProtocol(get, field, add)
	n.proxySSL = readProxySSL(ing, n.tls, get, field, add, &n.refused)
	n.cors = readCORS(ing, get, field, add)
	n.clients = readSourceRanges(get, field, add, &n.refused)
	n.rateLimit = readRateLimit(ing, get, field, add)
	n.affinity = readAffinity(get, field, add)
	n.timeouts = readTimeouts(get, field, add)
	n.auth = readAuth(ing, get, field, add, &n.refused)
	n.toWWW = boolean("from-to-www-redirect", false)
	n.aliases = readAliases(get, field, add)
	n.maxBody = readBodySize(get, field, add)
	return n
}

// unservedNginx adds a finding for each of names (the Ingress's ingress-nginx annotations,
// sorted) that Sluice does not serve, and reports whether one keeps the Ingress from being
// served.
func unservedNginx(ing *networkingv1.Ingress, names []string, field func(string) string, add func(string, configv1.FindingSeverity, string, string)) (refused bool) {
	for _, k := range names {
		name := strings.TrimPrefix(k, NginxAnnotationPrefix)
		if nginxServed[name] {
			continue
		}
		v := ing.Annotations[k]
		r, known := nginxRules[name]
		switch {
		case !known:
			add(field(name), sevWarn, "UnsupportedAnnotation", fmt.Sprintf("%s is not an ingress-nginx annotation Sluice knows; it is ignored", k))
		case r.served != nil && r.served(v):
		case r.closed:
			refused = true
			add(field(name), sevError, "UnsupportedAnnotation", fmt.Sprintf("%s is not supported and the Ingress is not served: %s", k, r.alt))
		case r.error:
			add(field(name), sevError, "UnsupportedAnnotation", fmt.Sprintf("%s: %q is not supported: %s", k, v, r.alt))
		default:
			add(field(name), sevWarn, "UnsupportedAnnotation", fmt.Sprintf("%s is not supported and is ignored: %s", k, r.alt))
		}
	}
	return refused
}

// checkCanaryAnnotations adds a finding for each of names that does nothing on this
// Ingress: a canary's own annotation without canary: "true", or another on a canary.
func checkCanaryAnnotations(names []string, canary bool, field func(string) string, add func(string, configv1.FindingSeverity, string, string)) {
	for _, k := range names {
		name := strings.TrimPrefix(k, NginxAnnotationPrefix)
		switch {
		case !nginxServed[name] || name == "canary":
		case !canary && canaryOwnAnnotations[name] && name != "backend-protocol":
			add(field(name), sevWarn, "InvalidAnnotation", `without canary: "true" it does nothing`)
		case canary && !canaryOwnAnnotations[name]:
			add(field(name), sevWarn, "InvalidAnnotation", "ignored on a canary Ingress: its paths are served as the main Ingress's are, as ingress-nginx does")
		}
	}
}

// readRedirects reads temporal-redirect and permanent-redirect (with their codes), and
// app-root.
func (n *nginxIngress) readRedirects(ing *networkingv1.Ingress, get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string), invalid func(name, cause string)) {
	// temporal-redirect comes before permanent-redirect, as ingress-nginx reads them.
	// Each code's name is written out: built from the name here, it would be allocated on
	// the heap, since get and invalid may keep their argument as far as the compiler knows.
	for _, r := range []struct {
		name, codeName string
		code           uint32
		max            int
	}{{"temporal-redirect", "temporal-redirect-code", 302, 307}, {"permanent-redirect", "permanent-redirect-code", 301, 308}} {
		v, ok := get(r.name)
		if !ok || v == "" {
			continue
		}
		if n.redirect != nil {
			invalid(r.name, "temporal-redirect is set too, and takes precedence; this annotation is ignored")
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Scheme == "" || u.Host == "" || strings.ContainsAny(v, " \t\r\n") {
			add(field(r.name), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not an absolute URL; the Ingress's paths do not redirect", v))
			continue
		}
		code := r.code
		if c, ok := get(r.codeName); ok {
			i, err := strconv.Atoi(c)
			switch {
			case err != nil || i < 300 || i > r.max:
				invalid(r.codeName, fmt.Sprintf("%q is not a status code from 300 to %d; %d applies", c, r.max, r.code))
			case i != 301 && i != 302 && i != 303 && i != 307 && i != 308:
				invalid(r.codeName, fmt.Sprintf("%d is not a redirect the proxy answers (301, 302, 303, 307 or 308); %d applies", i, r.code))
			default:
				code = uint32(i)
			}
		}
		n.redirect = &configv1.Redirect{Location: v, StatusCode: code}
	}
	if _, ok := get("permanent-redirect-code"); ok && ing.Annotations[NginxAnnotationPrefix+"permanent-redirect"] == "" {
		invalid("permanent-redirect-code", "without permanent-redirect it does nothing")
	}
	if _, ok := get("temporal-redirect-code"); ok && ing.Annotations[NginxAnnotationPrefix+"temporal-redirect"] == "" {
		invalid("temporal-redirect-code", "without temporal-redirect it does nothing")
	}

	if v, ok := get("app-root"); ok && v != "" {
		if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, " \t\r\n?#") {
			add(field("app-root"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not an absolute path; / does not redirect", v))
		} else {
			n.appRoot = v
		}
	}
}

// readRewrites reads rewrite-target (which makes the paths regular expressions),
// upstream-vhost and x-forwarded-prefix.
func (n *nginxIngress) readRewrites(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) {
	if v, ok := get("rewrite-target"); ok && v != "" {
		if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, " \t\r\n#?") {
			add(field("rewrite-target"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not a path (a query in the target is not supported); the Ingress's paths are not rewritten", v))
		} else {
			n.rewriteTarget = v
			n.regex = true
		}
	}

	if v, ok := get("upstream-vhost"); ok && v != "" {
		if err := checkHost(v); err != "" || strings.HasPrefix(v, "*.") {
			add(field("upstream-vhost"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not a host name; the Host header is not changed", v))
		} else {
			n.rewrite = &configv1.Rewrite{Hostname: v}
		}
	}
	if v, ok := get("x-forwarded-prefix"); ok && v != "" {
		if err := contract.CheckHeaderValue(v); err != nil {
			add(field("x-forwarded-prefix"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not a header value (%v); X-Forwarded-Prefix is not sent", v, err))
		} else {
			n.requestHeaders = &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X-Forwarded-Prefix", Value: v}}}
		}
	}
}

// readBackendProtocol reads backend-protocol: whether the endpoints speak h2c, or TLS.
func readBackendProtocol(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) (h2c, tls bool) {
	if v, ok := get("backend-protocol"); ok {
		switch strings.ToUpper(v) {
		case "", "HTTP":
		case "GRPC", "H2C":
			// nginx's grpc_pass and h2c both speak HTTP/2 with prior knowledge, in cleartext.
			h2c = true
		case "HTTPS", "GRPCS":
			// nginx's proxy_pass https:// and grpcs://: TLS, the certificate unverified unless
			// proxy-ssl-verify (readProxySSL), HTTP/2 for gRPC by ALPN.
			tls = true
		case "AJP", "FCGI":
			add(field("backend-protocol"), sevError, "UnsupportedAnnotation", fmt.Sprintf("%sbackend-protocol: %q is not supported (AJP and FCGI upstreams are not): the endpoints are spoken to in HTTP/1.1, so the routes cannot reach them as meant", NginxAnnotationPrefix, v))
		default:
			add(field("backend-protocol"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not a backend protocol (HTTP, HTTPS, GRPC, GRPCS, H2C, AJP or FCGI); the endpoints are spoken to in HTTP/1.1", v))
		}
	}
	return h2c, tls
}

// readAliases reads server-alias: the host names that serve the routes of the Ingress's
// first rule's host.
func readAliases(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) []string {
	var aliases []string
	if v, ok := get("server-alias"); ok && v != "" {
		for _, a := range strings.Split(v, ",") {
			a = strings.ToLower(strings.TrimSpace(a))
			if a == "" {
				continue
			}
			if err := checkHost(a); err != "" {
				add(field("server-alias"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q: %s; it is not served", a, err))
				continue
			}
			aliases = append(aliases, a)
		}
	}
	return aliases
}

// readBodySize reads proxy-body-size: the largest request body, 0 for no limit.
func readBodySize(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) uint64 {
	var maxBody uint64
	if v, ok := get("proxy-body-size"); ok && v != "" {
		size, err := nginxSize(v)
		if err != nil {
			add(field("proxy-body-size"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a size (bytes, or a number with k, m or g); request bodies are not limited", v))
		} else {
			maxBody = size
		}
	}
	return maxBody
}

// readSourceRanges reads allowlist-source-range (or its older name whitelist-source-range)
// and denylist-source-range: comma-separated addresses or CIDR prefixes. A list that does not
// parse keeps the Ingress from being served (refused): serving it with a part of the list
// would admit what its owner did not.
func readSourceRanges(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string), refused *bool) *configv1.AddressFilter {
	var f configv1.AddressFilter
	parse := func(name string) ([]string, bool) {
		v, ok := get(name)
		if !ok || v == "" {
			return nil, false
		}
		out, bad := addressList(v)
		if bad != "" {
			*refused = true
			add(field(name), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not an address or a CIDR prefix; the Ingress is not served, since serving it without the whole list would admit what it does not", bad))
			return nil, false
		}
		if len(out) > contract.MaxAddressPrefixes {
			*refused = true
			add(field(name), sevError, "InvalidAnnotation", fmt.Sprintf("%d prefixes (at most %d); the Ingress is not served", len(out), contract.MaxAddressPrefixes))
			return nil, false
		}
		return out, true
	}
	allow, okAllow := parse("allowlist-source-range")
	if _, ok := get("allowlist-source-range"); !ok {
		allow, okAllow = parse("whitelist-source-range")
	} else if _, both := get("whitelist-source-range"); both {
		add(field("whitelist-source-range"), sevWarn, "InvalidAnnotation", "allowlist-source-range is set too, and takes precedence; this annotation is ignored")
	}
	deny, okDeny := parse("denylist-source-range")
	if !okAllow && !okDeny {
		return nil
	}
	f.Allow, f.Deny = allow, deny
	return &f
}

// readAuth reads auth-url (with auth-method, auth-response-headers and auth-signin). The URL
// must name a Service of the cluster (NAME.NAMESPACE.svc[.DOMAIN], or NAME.NAMESPACE), which
// the proxy reaches as a backend; any other URL keeps the Ingress from being served (the
// proxy asks no address outside the cluster), as does a value that does not parse.
func readAuth(ing *networkingv1.Ingress, get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string), refused *bool) *authURL {
	v, ok := get("auth-url")
	if !ok || v == "" {
		for _, name := range []string{"auth-method", "auth-response-headers", "auth-signin"} {
			if _, ok := get(name); ok {
				add(field(name), sevWarn, "InvalidAnnotation", "without auth-url it does nothing")
			}
		}
		return nil
	}
	fail := func(cause string) *authURL {
		*refused = true
		add(field("auth-url"), sevError, "InvalidAnnotation", cause+"; the Ingress is not served, since serving it without the check would open it to everyone")
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fail(fmt.Sprintf("%q is not an http or https URL", v))
	}
	labels := strings.Split(u.Hostname(), ".")
	if len(labels) < 2 || (len(labels) > 2 && labels[2] != "svc") || labels[0] == "" || labels[1] == "" {
		return fail(fmt.Sprintf("%q does not name a Service of the cluster (NAME.NAMESPACE.svc.cluster.local): the proxy asks only Services it knows", v))
	}
	a := &authURL{svc: nsName{labels[1], labels[0]}, tls: u.Scheme == "https", field: field("auth-url"),
		ea: &configv1.ExternalAuth{Host: u.Host, Path: u.EscapedPath(), Method: ""}}
	if a.ea.Path == "" {
		a.ea.Path = "/"
	}
	if u.RawQuery != "" {
		a.ea.Path += "?" + u.RawQuery
	}
	a.port = 80
	if a.tls {
		a.port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return fail(fmt.Sprintf("%q has no valid port", v))
		}
		a.port = int32(n)
	}
	if m, ok := get("auth-method"); ok && m != "" {
		if contract.CheckHeaderName(m) != nil {
			add(field("auth-method"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a method; GET applies", m))
		} else {
			a.ea.Method = strings.ToUpper(m)
		}
	}
	if hs, ok := get("auth-response-headers"); ok && hs != "" {
		for _, h := range strings.Split(hs, ",") {
			if h = strings.TrimSpace(h); h == "" {
				continue
			}
			if contract.CheckHeaderName(h) != nil {
				add(field("auth-response-headers"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a header name; it is not copied", h))
				continue
			}
			a.ea.ResponseHeaders = append(a.ea.ResponseHeaders, h)
		}
	}
	if s, ok := get("auth-signin"); ok && s != "" {
		a.ea.SigninUrl = s
		if err := contract.CheckExternalAuth(&configv1.ExternalAuth{Backend: "x", Host: a.ea.Host, Path: a.ea.Path, SigninUrl: s}); err != nil {
			add(field("auth-signin"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not an absolute http(s) URL; a 401 is answered as it is", s))
			a.ea.SigninUrl = ""
		}
	}
	if err := contract.CheckExternalAuth(&configv1.ExternalAuth{Backend: "x", Host: a.ea.Host, Path: a.ea.Path, Method: a.ea.Method}); err != nil {
		return fail(fmt.Sprintf("%q: %v", v, err))
	}
	return a
}

// readTimeouts reads proxy-connect-timeout, proxy-read-timeout and proxy-send-timeout:
// whole seconds, as ingress-nginx reads them (an "s" after the number is taken too).
func readTimeouts(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) *configv1.BackendTimeouts {
	var t configv1.BackendTimeouts
	set := false
	for _, r := range []struct {
		name string
		to   **durationpb.Duration
	}{{"proxy-connect-timeout", &t.Connect}, {"proxy-read-timeout", &t.Read}, {"proxy-send-timeout", &t.Write}} {
		v, ok := get(r.name)
		if !ok || v == "" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(v, "s"), 10, 32)
		d := time.Duration(n) * time.Second
		if err != nil || n == 0 || d > contract.MaxBackendTimeout {
			add(field(r.name), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a number of seconds from 1 to %d; the proxy's default applies", v, int(contract.MaxBackendTimeout.Seconds())))
			continue
		}
		*r.to, set = durationpb.New(d), true
	}
	if !set {
		return nil
	}
	return &t
}

// readAffinity reads affinity: cookie with ingress-nginx's session-cookie-* (the cookie
// INGRESSCOOKIE by default, HttpOnly, a session cookie unless session-cookie-max-age or
// -expires gives it a lifetime in seconds).
func readAffinity(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) *configv1.SessionAffinity {
	v, ok := get("affinity")
	if !ok || v == "" {
		for _, name := range []string{"affinity-mode", "affinity-canary-behavior", "session-cookie-name", "session-cookie-path", "session-cookie-expires",
			"session-cookie-max-age", "session-cookie-samesite", "session-cookie-secure"} {
			if _, ok := get(name); ok {
				add(field(name), sevWarn, "InvalidAnnotation", `without affinity: "cookie" it does nothing`)
			}
		}
		return nil
	}
	if v != "cookie" {
		add(field("affinity"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not an affinity ingress-nginx has (cookie); requests are not pinned", v))
		return nil
	}
	a := &configv1.SessionAffinity{CookieName: "INGRESSCOOKIE"}
	if v, ok := get("session-cookie-name"); ok && v != "" {
		if err := contract.CheckHeaderName(v); err != nil {
			add(field("session-cookie-name"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a cookie name; INGRESSCOOKIE applies", v))
		} else {
			a.CookieName = v
		}
	}
	if v, ok := get("session-cookie-path"); ok && v != "" {
		a.Path = v
		if err := contract.CheckSessionAffinity(a); err != nil {
			add(field("session-cookie-path"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a cookie path; the route's path applies", v))
			a.Path = ""
		}
	}
	for _, name := range []string{"session-cookie-max-age", "session-cookie-expires"} {
		if v, ok := get(name); ok && v != "" {
			n, err := strconv.ParseUint(v, 10, 31)
			if err != nil {
				add(field(name), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a number of seconds; the cookie lasts the session", v))
				continue
			}
			if a.MaxAgeSeconds == 0 {
				a.MaxAgeSeconds = uint32(n)
			}
		}
	}
	if v, ok := get("session-cookie-secure"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			add(field("session-cookie-secure"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not true or false; the cookie is not Secure", v))
		}
		a.Secure = b
	}
	if v, ok := get("session-cookie-samesite"); ok && v != "" {
		switch strings.ToLower(v) {
		case "strict":
			a.SameSite = "Strict"
		case "lax":
			a.SameSite = "Lax"
		case "none":
			a.SameSite = "None"
		default:
			add(field("session-cookie-samesite"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not Strict, Lax or None; the cookie has no SameSite", v))
		}
	}
	if v, ok := get("affinity-mode"); ok && v != "" && v != "balanced" && v != "persistent" {
		add(field("affinity-mode"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not balanced or persistent; a client stays on its endpoint while it is ready", v))
	}
	if v, ok := get("affinity-canary-behavior"); ok && v != "" && v != "sticky" {
		add(field("affinity-canary-behavior"), sevWarn, "UnsupportedAnnotation", fmt.Sprintf("%q is not supported: a client stays on its endpoint, canary or not (sticky)", v))
	}
	return a
}

// readRateLimit reads limit-rps, limit-rpm and limit-connections, each whole numbers, with
// limit-burst-multiplier (5 by default) and limit-allowlist (or its older name
// limit-whitelist), as ingress-nginx does: one zone per Ingress, counted per client address.
func readRateLimit(ing *networkingv1.Ingress, get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) *configv1.RateLimit {
	number := func(name string, def uint32) uint32 {
		v, ok := get(name)
		if !ok || v == "" {
			return def
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n > contract.MaxRate {
			add(field(name), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a whole number up to %d; %d applies", v, contract.MaxRate, def))
			return def
		}
		return uint32(n)
	}
	l := &configv1.RateLimit{Zone: "Ingress " + ing.Namespace + "/" + ing.Name,
		RequestsPerSecond: number("limit-rps", 0), RequestsPerMinute: number("limit-rpm", 0), Connections: number("limit-connections", 0)}
	if l.RequestsPerSecond == 0 && l.RequestsPerMinute == 0 && l.Connections == 0 {
		for _, name := range []string{"limit-burst-multiplier", "limit-allowlist", "limit-whitelist"} {
			if _, ok := get(name); ok {
				add(field(name), sevWarn, "InvalidAnnotation", "without limit-rps, limit-rpm or limit-connections it does nothing")
			}
		}
		return nil
	}
	if l.RequestsPerSecond > 0 || l.RequestsPerMinute > 0 {
		l.BurstMultiplier = max(number("limit-burst-multiplier", 5), 1)
		if err := contract.CheckRateLimit(l); err != nil {
			add(field("limit-burst-multiplier"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%v; 1 applies", err))
			l.BurstMultiplier = 1
		}
	}
	name := "limit-allowlist"
	if _, ok := get(name); !ok {
		name = "limit-whitelist"
	}
	if v, ok := get(name); ok && v != "" {
		exempt, bad := addressList(v)
		if bad != "" {
			add(field(name), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not an address or a CIDR prefix; no client is exempt", bad))
		} else {
			l.Exempt = exempt
		}
	}
	return l
}

// addressList reads nginx's comma-separated addresses and CIDR prefixes as CIDR prefixes (an
// address is its /32 or /128), or returns the first entry that is neither.
func addressList(v string) (prefixes []string, bad string) {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, s
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		prefixes = append(prefixes, p.Masked().String())
	}
	return prefixes, ""
}

// nginxSize reads an nginx size: bytes, or a number with k, m or g (any case) for KiB, MiB
// and GiB; "0" means no limit.
func nginxSize(v string) (uint64, error) {
	mult := uint64(1)
	switch strings.ToLower(v[len(v)-1:]) {
	case "k":
		mult = 1 << 10
	case "m":
		mult = 1 << 20
	case "g":
		mult = 1 << 30
	}
	if mult > 1 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > (1<<63)/mult {
		return 0, fmt.Errorf("not a size")
	}
	return n * mult, nil
}

// ingress-nginx's CORS defaults.
const (
	corsDefaultMethods = "GET, PUT, POST, DELETE, PATCH, OPTIONS"
	corsDefaultHeaders = "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization"
	corsDefaultMaxAge  = 1728000
)

// readCORS is enable-cors and the cors-* annotations as a CORS policy (nil without
// enable-cors: "true"): ingress-nginx's defaults where an annotation is not set.
func readCORS(ing *networkingv1.Ingress, get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) *configv1.Cors {
	invalid := func(name, cause string) { add(field(name), sevWarn, "InvalidAnnotation", cause) }
	on, ok := get("enable-cors")
	if b, err := strconv.ParseBool(on); !ok || err != nil || !b {
		if ok && err != nil {
			invalid("enable-cors", fmt.Sprintf("%q is not true or false; CORS is off", on))
		}
		for _, name := range []string{"cors-allow-origin", "cors-allow-methods", "cors-allow-headers", "cors-expose-headers", "cors-allow-credentials", "cors-max-age"} {
			if _, ok := get(name); ok {
				invalid(name, "without enable-cors: \"true\" it does nothing")
			}
		}
		return nil
	}
	list := func(v string) []string {
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	c := &configv1.Cors{AllowOrigins: []string{"*"}, AllowCredentials: true, AllowMethods: list(corsDefaultMethods), AllowHeaders: list(corsDefaultHeaders), MaxAge: corsDefaultMaxAge}
	try := func(name string, set func(v string), check func() error) {
		v, ok := get(name)
		if !ok {
			return
		}
		saved := proto.Clone(c).(*configv1.Cors)
		set(v)
		if err := check(); err != nil {
			invalid(name, fmt.Sprintf("%q: %v; ingress-nginx's default applies", v, err))
			c = saved
		}
	}
	check := func() error { return contract.CheckCORS(c) }
	try("cors-allow-origin", func(v string) { c.AllowOrigins = list(v) }, func() error {
		if len(c.AllowOrigins) == 0 {
			return fmt.Errorf("no origin")
		}
		return check()
	})
	try("cors-allow-methods", func(v string) { c.AllowMethods = list(strings.ToUpper(v)) }, check)
	try("cors-allow-headers", func(v string) { c.AllowHeaders = list(v) }, check)
	try("cors-expose-headers", func(v string) { c.ExposeHeaders = list(v) }, check)
	try("cors-allow-credentials", func(v string) {
		b, err := strconv.ParseBool(v)
		c.AllowCredentials = err == nil && b
	}, func() error {
		v, _ := get("cors-allow-credentials")
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("not true or false")
		}
		return nil
	})
	try("cors-max-age", func(v string) {
		i, _ := strconv.Atoi(v)
		c.MaxAge = uint32(max(i, 0))
	}, func() error {
		v, _ := get("cors-max-age")
		if i, err := strconv.Atoi(v); err != nil || i < 0 {
			return fmt.Errorf("not a number of seconds")
		}
		return nil
	})
	return c
}

// nginxPath is an Ingress path under ingress-nginx's regular expressions (use-regex or
// rewrite-target on any Ingress of the host): a case-insensitive expression anchored at the
// start only, whatever the pathType (the path matches when the expression matches a prefix
// of the request's path).
func nginxPath(path string) (*configv1.PathMatch, string) {
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Sprintf("path %q does not start with /", path)
	}
	if _, err := regexp.Compile("(?i)^(?:" + path + ")"); err != nil {
		return nil, fmt.Sprintf("invalid regular expression %q (ingress-nginx's are PCRE, Sluice's RE2): %v", path, err)
	}
	return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: "(?i)(?:" + path + ").*"}, ""
}

// nginxRewrite is rewrite-target as ingress-nginx applies it: nginx's rewrite of the path
// with the (case-insensitive, unanchored) path expression into the target, whose $1-$9 are
// the expression's groups.
func nginxRewrite(path, target string) *configv1.PathModifier {
	var b strings.Builder
	for i := 0; i < len(target); i++ {
		if target[i] == '$' && i+1 < len(target) && target[i+1] >= '0' && target[i+1] <= '9' {
			b.WriteString("${" + string(target[i+1]) + "}")
			i++
			continue
		}
		if target[i] == '$' {
			b.WriteString("$$")
			continue
		}
		b.WriteByte(target[i])
	}
	return &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_REGEX, Pattern: "(?i)" + path, Value: b.String()}
}

// apply puts what the annotations ask of every path on route, whose path the Ingress wrote
// as path.
func (n nginxIngress) apply(route *configv1.Route, path string) {
	if n.redirect != nil {
		// ingress-nginx answers the redirect before anything else of the location.
		route.Redirect = n.redirect
		return
	}
	if path == "" {
		path = "/"
	}
	if n.rewriteTarget != "" && n.rewriteTarget != path {
		route.Rewrite = &configv1.Rewrite{Path: nginxRewrite(path, n.rewriteTarget)}
	}
	if n.rewrite != nil {
		if route.Rewrite == nil {
			route.Rewrite = &configv1.Rewrite{}
		}
		route.Rewrite.Hostname = n.rewrite.GetHostname()
	}
	route.RequestHeaders = n.requestHeaders
	route.Cors = n.cors
	route.ClientAddresses = n.clients
	route.MaxRequestBodyBytes = n.maxBody
	route.RateLimit = n.rateLimit
	route.BackendTimeouts = n.timeouts
	if n.auth != nil && n.auth.ea.GetBackend() != "" {
		route.ExternalAuth = n.auth.ea
	}
	if n.affinity != nil {
		a := proto.Clone(n.affinity).(*configv1.SessionAffinity)
		if a.Path == "" && !n.regex && !strings.ContainsAny(path, ";, \t") {
			// ingress-nginx's default: the location's path.
			a.Path = path
		}
		route.SessionAffinity = a
	}
}

// routeVariants are the forms of one Ingress route that the rest of its host can call for,
// each built once: as a case-insensitive regular expression (another Ingress of the host
// has use-regex or rewrite-target), and split in two for the HTTPS redirect.
type routeVariants struct {
	regex    *configv1.Route
	regexErr string
	split    [2]*[2]*configv1.Route // by regex: the route on HTTPS, and its redirect on HTTP
}

// hostRoute is claim c's route on a host whose paths are regular expressions (regexHost:
// ingress-nginx makes every path of a host one when any Ingress of the host asks for it),
// or why it cannot be served there.
func hostRoute(c claim, regexHost bool) (*configv1.Route, string) {
	if !regexHost || c.variants == nil {
		return c.route, ""
	}
	v := c.variants
	if v.regex == nil && v.regexErr == "" {
		pm, err := nginxPath(c.path)
		if err != "" {
			v.regexErr = err + " (another Ingress of the host has use-regex or rewrite-target, which makes every path of the host a regular expression); the path is not served"
			return nil, v.regexErr
		}
		r := proto.Clone(c.route).(*configv1.Route)
		r.Path = pm
		v.regex = r
	}
	return v.regex, v.regexErr
}

// sslSplit is route served on HTTPS only, and the route that redirects its HTTP requests to
// HTTPS (308, as ingress-nginx's ssl-redirect).
func sslSplit(c claim, route *configv1.Route, regexHost bool) (https, redirect *configv1.Route) {
	i := 0
	if regexHost {
		i = 1
	}
	var memo *[2]*configv1.Route
	if c.variants != nil {
		memo = c.variants.split[i]
	}
	if memo == nil {
		https, redirect := splitForHTTPS(route)
		memo = &[2]*configv1.Route{https, redirect}
		if c.variants != nil {
			c.variants.split[i] = memo
		}
	}
	return memo[0], memo[1]
}

// splitForHTTPS is route served on HTTPS only, and the route that redirects its path's
// plain HTTP requests to HTTPS (308, as ingress-nginx's ssl-redirect).
func splitForHTTPS(route *configv1.Route) (https, redirect *configv1.Route) {
	https = proto.Clone(route).(*configv1.Route)
	https.Scheme = configv1.RouteScheme_ROUTE_SCHEME_HTTPS
	redirect = &configv1.Route{Name: route.GetName(), Path: route.GetPath(), Source: route.GetSource(), Scheme: configv1.RouteScheme_ROUTE_SCHEME_HTTP,
		Redirect: &configv1.Redirect{Scheme: "https", StatusCode: 308}}
	return https, redirect
}

// redirectsToHTTPS reports whether claim c's route answers plain HTTP with a redirect to
// HTTPS on a host that has a certificate or not (hasCert): ssl-redirect (the default) on a
// host with a certificate, force-ssl-redirect on any; never a route that redirects already,
// nor an ACME HTTP-01 challenge's path unless forced.
func (t *Translator) redirectsToHTTPS(c claim, n nginxIngress, route *configv1.Route, hasCert bool) bool {
	switch {
	case route.GetRedirect() != nil:
		return false
	case n.forceSSLRedirect:
		return true
	case t.opts.NoSSLRedirect || !hasCert || !n.sslRedirect:
		return false
	default:
		return !strings.HasPrefix(c.path, acmeChallengePath)
	}
}
