// Package caddy is the Caddy data plane of the pusher: it renders a config into one Caddy
// JSON document and applies it with POST /load, which replaces the whole config or none of
// it. The request semantics are those of contract.Match (the reference): per request, the
// virtual hosts that apply are tried in order (the exact host, a one-label wildcard, the
// any-depth routes of deeper wildcards from the longest suffix, then the catch-all), each as a
// subroute whose routes are tried in order; what nothing matches gets a 404, and so does a
// stop route (Route.stop). Each server (HTTP, HTTPS) gets the routes served on its scheme. Paths are matched
// with anchored RE2 expressions (Caddy's own path matcher is case-insensitive, the Ingress
// semantics are not); what a route does to a request (contract.RedirectLocation,
// contract.Forwarded) is built from Caddy's placeholders, rewrite and headers handlers.
package caddy

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// MetaID is the @id of the object that carries the applied config's identity inside Caddy's
// config; the pusher reads it back to detect a Caddy that lost or replaced its config.
const MetaID = "sluice-meta"

// metaPrefix prefixes the identity string kept in the meta log's include list.
const metaPrefix = "sluice.config."

// RenderOptions are the pusher's settings that shape the Caddy config.
type RenderOptions struct {
	// AdminListen is Caddy's admin address as Caddy writes it ("127.0.0.1:2019" or
	// "unix//path/to/socket"); it is kept in every config so the pusher keeps reaching Caddy.
	AdminListen string
	HTTPListen  string
	HTTPSListen string
	// MetricsListen, when set, is the address of a third server that answers /metrics
	// (Caddy's own Prometheus metrics, which this also turns on) and /healthz (200 while Caddy
	// serves), for scrapers and probes; Caddy's admin API stays on localhost.
	MetricsListen string
	// AccessLog writes one JSON line per request to Caddy's standard output.
	AccessLog bool
	// Listeners are the proxy's listeners besides the main HTTP and HTTPS ones: the routes
	// whose Route.listener names one are served there only.
	Listeners []Listener
}

// Listener is one of the proxy's further listeners: a Gateway listener port on the shared
// address ("8080"), or a Gateway's own address and port ("192.0.2.21:80"), bound to a local
// address.
type Listener struct {
	// Name is Route.listener's value for the routes served here.
	Name string
	// HTTPS says the listener terminates TLS (with the table's certificates).
	HTTPS bool
	// Listen is the local address Caddy binds ("127.0.0.1:18080", ":18080").
	Listen string
}

// server is one of the proxy's servers: the main HTTP or HTTPS one, or a further listener.
type server struct {
	key      string // its name in Caddy's config
	listener string // Route.listener of its routes
	scheme   string
	listen   string
}

// servers lists the proxy's servers in a fixed order: http, https, then the further
// listeners as given.
func (o RenderOptions) servers() []server {
	out := []server{{"http", "", "http", o.HTTPListen}, {"https", "", "https", o.HTTPSListen}}
	for _, l := range o.Listeners {
		scheme := "http"
		if l.HTTPS {
			scheme = "https"
		}
		out = append(out, server{scheme + "/" + l.Name, l.Name, scheme, l.Listen})
	}
	return out
}

// MetricsServer is the server MetricsListen adds; the Caddy container's probes and the
// bootstrap config (before the pusher's first load) use the same paths.
func MetricsServer(listen string) obj {
	return obj{"listen": []string{listen}, "automatic_https": obj{"disable": true}, "routes": []any{
		obj{"match": []any{obj{"path": []string{"/metrics"}}}, "handle": []any{obj{"handler": "metrics"}}},
		obj{"match": []any{obj{"path": []string{"/healthz"}}}, "handle": []any{obj{"handler": "static_response", "status_code": 200, "body": "ok\n"}}},
		obj{"handle": []any{obj{"handler": "static_response", "status_code": 404}}},
	}}
}

// observe adds what RenderOptions ask for to a config's http app and logging: the metrics
// server and Caddy's metrics, and the access log of the proxy's servers.
func observe(o RenderOptions, httpApp obj, servers obj, logs obj) {
	if o.MetricsListen != "" {
		httpApp["metrics"] = obj{}
		servers["metrics"] = MetricsServer(o.MetricsListen)
	}
	if o.AccessLog {
		for _, sv := range o.servers() {
			if srv, ok := servers[sv.key].(obj); ok {
				// Only the proxy's servers log requests, not the probes' and scrapers'.
				srv["logs"] = obj{"default_logger_name": "sluice-access"}
			}
		}
		logs["sluice-access"] = obj{"writer": obj{"output": "stdout"}, "encoder": obj{"format": "json"},
			"include": []string{"http.log.access.sluice-access"}}
		// Caddy's own log (standard error) would carry every access line a second time.
		logs["default"] = obj{"exclude": []string{"http.log.access.sluice-access"}}
	}
}

// Identity is what a rendered config is known by inside Caddy: its fingerprint.
func Identity(fingerprint string) string { return metaPrefix + fingerprint }

// FingerprintOfIdentity returns the fingerprint in an identity ("" if it is not one).
func FingerprintOfIdentity(id string) string {
	fp, ok := strings.CutPrefix(id, metaPrefix)
	if !ok {
		return ""
	}
	return fp
}

type obj = map[string]any

// Render returns the Caddy JSON config for cfg and its fingerprint: the hash of everything
// Caddy runs. Two configs that differ only in what Caddy does not use (a not-ready endpoint,
// a finding, the version) have the same fingerprint, and need no reload.
func Render(cfg *configv1.Config, o RenderOptions) ([]byte, string, error) {
	res := cfg.GetResources()
	backends := map[string]*configv1.Backend{}
	for _, b := range res.GetBackends() {
		backends[b.GetName()] = b
	}
	routes := map[string][]any{}
	var refused RenderError
	for _, sv := range o.servers() {
		// Caddy's host matcher takes a wildcard one label deep. A wildcard's any-depth routes
		// (Route.any_depth) are tried again for deeper names after every one-label wildcard,
		// longest suffix first, and before the catch-all: the order of contract.HostCandidates.
		var deep []obj
		var catchAll obj
		for _, vh := range orderedHosts(res.GetVirtualHosts()) {
			var sub, deepSub []any
			for _, rt := range vh.GetRoutes() {
				if !servedOn(rt, sv.listener, sv.scheme) {
					continue
				}
				r, err := route(rt, backends, sv.scheme)
				if err != nil {
					refused.add(vh.GetHostname(), rt.GetName(), err)
					continue
				}
				sub = append(sub, r)
				if rt.GetAnyDepth() {
					deepSub = append(deepSub, r)
				}
			}
			if len(sub) == 0 {
				continue
			}
			r := obj{"handle": []any{obj{"handler": "subroute", "routes": sub}}}
			h := vh.GetHostname()
			if h == "" {
				catchAll = r
				continue
			}
			r["match"] = []any{obj{"host": []string{h}}}
			routes[sv.key] = append(routes[sv.key], r)
			if suffix, ok := strings.CutPrefix(h, "*"); ok && len(deepSub) > 0 {
				// Two or more labels in front of the suffix; the host without its port.
				pattern := `(?i)^[^.]+(\.[^.]+)+` + regexp.QuoteMeta(suffix) + "$"
				deep = append(deep, obj{"match": []any{obj{"vars_regexp": obj{"{http.request.host}": obj{"pattern": pattern}}}},
					"handle": []any{obj{"handler": "subroute", "routes": deepSub}}, "suffix": suffix})
			}
		}
		sort.SliceStable(deep, func(i, j int) bool { return len(deep[i]["suffix"].(string)) > len(deep[j]["suffix"].(string)) })
		for _, d := range deep {
			delete(d, "suffix")
			routes[sv.key] = append(routes[sv.key], d)
		}
		if catchAll != nil {
			routes[sv.key] = append(routes[sv.key], catchAll)
		}
		routes[sv.key] = append(routes[sv.key], obj{"handle": []any{obj{"handler": "static_response", "status_code": 404, "body": "no route\n"}}})
	}
	if len(refused.Refused) > 0 {
		return nil, "", &refused
	}

	servers := obj{}
	for _, sv := range o.servers() {
		if sv.scheme == "http" {
			servers[sv.key] = obj{"listen": []string{sv.listen}, "routes": routes[sv.key], "automatic_https": obj{"disable": true}}
		}
	}
	httpApp := obj{"servers": servers}
	apps := obj{"http": httpApp}
	if len(res.GetCertificates()) > 0 {
		var pems, policies []any
		var fallback obj
		hostsByCert := map[string][]string{}
		catchAll := ""
		for _, vh := range res.GetVirtualHosts() {
			switch {
			case vh.GetCertificate() == "":
			case vh.GetHostname() == "":
				catchAll = vh.GetCertificate()
			default:
				hostsByCert[vh.GetCertificate()] = append(hostsByCert[vh.GetCertificate()], vh.GetHostname())
			}
		}
		for i, c := range res.GetCertificates() {
			hosts := hostsByCert[c.GetName()]
			if len(hosts) == 0 && c.GetName() != catchAll {
				continue
			}
			tag := fmt.Sprintf("sluice-cert-%d", i)
			pems = append(pems, obj{"certificate": string(c.GetCertificatePem()), "key": string(c.GetPrivateKeyPem()), "tags": []string{tag}})
			if len(hosts) > 0 {
				sort.Strings(hosts)
				policies = append(policies, obj{"match": obj{"sni": hosts}, "certificate_selection": obj{"any_tag": []string{tag}}})
			}
			if c.GetName() == catchAll {
				fallback = obj{"certificate_selection": obj{"any_tag": []string{tag}}}
			}
		}
		// The catch-all's certificate (a Gateway listener without hostname) is the default:
		// the last policy, without a match, takes every handshake no host's policy matched.
		if fallback != nil {
			policies = append(policies, fallback)
		}
		if len(pems) > 0 {
			for _, sv := range o.servers() {
				if sv.scheme == "https" {
					servers[sv.key] = obj{"listen": []string{sv.listen}, "routes": routes[sv.key], "automatic_https": obj{"disable": true}, "tls_connection_policies": policies}
				}
			}
			apps["tls"] = obj{"certificates": obj{"load_pem": pems}}
		}
	}
	logs := obj{}
	observe(o, httpApp, servers, logs)
	// encoding/json sorts map keys, so the same content always gives the same bytes.
	adminJSON, err := json.Marshal(obj{"listen": o.AdminListen, "config": obj{"persist": false}})
	if err != nil {
		return nil, "", err
	}
	appsJSON, err := json.Marshal(apps)
	if err != nil {
		return nil, "", err
	}
	logsJSON, err := json.Marshal(logs)
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	h.Write(adminJSON)
	h.Write([]byte{0})
	h.Write(appsJSON)
	if len(logs) > 0 {
		h.Write([]byte{0})
		h.Write(logsJSON)
	}
	fp := hex.EncodeToString(h.Sum(nil))
	// The meta log never receives anything (no logger has that name); it only carries the
	// identity of the config, readable at /id/sluice-meta.
	logs["sluice-meta"] = obj{"@id": MetaID, "writer": obj{"output": "discard"}, "include": []string{Identity(fp)}}
	doc := obj{
		"admin":   json.RawMessage(adminJSON),
		"logging": obj{"logs": logs},
		"apps":    json.RawMessage(appsJSON),
	}
	body, err := json.Marshal(doc)
	return body, fp, err
}

// orderedHosts puts the virtual hosts in the order requests try them (contract.HostLess);
// configs from translate are already in it, others (test doubles) may not be.
func orderedHosts(vhs []*configv1.VirtualHost) []*configv1.VirtualHost {
	out := append([]*configv1.VirtualHost(nil), vhs...)
	sort.SliceStable(out, func(i, j int) bool { return contract.HostLess(out[i].GetHostname(), out[j].GetHostname()) })
	return out
}

// PathPattern is the anchored RE2 expression a path match becomes.
func PathPattern(m *configv1.PathMatch) (string, error) {
	switch m.GetType() {
	case configv1.PathMatchType_PATH_MATCH_TYPE_EXACT:
		return "^" + regexp.QuoteMeta(m.GetValue()) + "$", nil
	case configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX:
		if m.GetValue() == "/" {
			return "", nil // every path
		}
		// Group 1 is the rest of the path after the prefix ("" or "/..."), group 2 the rest
		// without its slash: a redirect's PREFIX modifier builds the Location from them.
		return "^" + regexp.QuoteMeta(m.GetValue()) + "(?s:((?:/(.*))?))$", nil
	case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
		p := "^(?:" + m.GetValue() + ")$"
		if _, err := regexp.Compile(p); err != nil {
			return "", err
		}
		return p, nil
	}
	return "", fmt.Errorf("unknown path match type %v", m.GetType())
}

// servedOn says whether rt is served on the listener named listener, of scheme.
func servedOn(rt *configv1.Route, listener, scheme string) bool {
	if rt.GetListener() != listener {
		return false
	}
	switch rt.GetScheme() {
	case configv1.RouteScheme_ROUTE_SCHEME_HTTP:
		return scheme == "http"
	case configv1.RouteScheme_ROUTE_SCHEME_HTTPS:
		return scheme == "https"
	}
	return true
}

// pathCapture names the path_regexp matcher whose groups a redirect's Location uses
// ({http.regexp.sluice.1}).
const pathCapture = "sluice"

// route renders rt for the server of scheme: its matchers, then what it does (404 for a stop
// route, a redirect,
// 500 for an invalid share without ready endpoints, 503 without ready endpoints, or the
// rewrite, the header modifiers and reverse_proxy, its transport speaking h2c to h2c
// backends).
func route(rt *configv1.Route, backends map[string]*configv1.Backend, scheme string) (obj, error) {
	// Caddy would refuse the whole document for a bad expression, naming no route.
	if err := contract.CheckRoute(rt); err != nil {
		return nil, err
	}
	// Stock Caddy has no handler that sends a copy of a request elsewhere and goes on:
	// reverse_proxy answers the client with the one upstream it picked. Such a route is
	// refused (and its source left out by the translator) rather than served unmirrored.
	if len(rt.GetMirrors()) > 0 {
		return nil, fmt.Errorf("it mirrors requests: stock Caddy cannot mirror a request")
	}
	// A CORS policy answers with the request's own origin only when it is allowed (exactly or
	// by a wildcard), and a preflight with what it asks for; stock Caddy's static headers
	// cannot say that, so the route is refused rather than served without its policy.
	if rt.GetCors() != nil {
		return nil, fmt.Errorf("it has a CORS policy: stock Caddy cannot answer CORS requests as the policy says")
	}
	// Stock Caddy's reverse_proxy can retry on an answer's status (retry_match), but the
	// client of the last try then gets Caddy's error, not the backend's answer, and dial
	// errors are retried whatever the policy says; the route is refused rather than served
	// otherwise than its policy says.
	if rt.GetRetry() != nil {
		return nil, fmt.Errorf("it has a retry policy: stock Caddy cannot answer with the last try's answer")
	}
	// Stock Caddy's forward_auth is a Caddyfile shape of reverse_proxy that answers every
	// status but 2xx as the service did; the route is refused rather than served otherwise
	// than nginx's auth_request (401 and 403 as they are, anything else 500).
	if rt.GetExternalAuth() != nil {
		return nil, fmt.Errorf("it asks an authentication service: stock Caddy cannot answer as nginx's auth_request does")
	}
	// Stock Caddy has no rate limiter (that is a third-party module); the route is refused
	// rather than served unlimited.
	if rt.GetRateLimit() != nil {
		return nil, fmt.Errorf("it has a rate limit: stock Caddy cannot limit a client's rate or connections")
	}
	r := obj{}
	match, err := matchers(rt)
	if err != nil {
		return nil, err
	}
	if len(match) > 0 {
		r["match"] = []any{match}
	}
	if rt.GetStop() {
		// A Gateway listener's hostname ends here (Route.stop): nothing less specific serves
		// the request.
		r["handle"] = []any{obj{"handler": "static_response", "status_code": 404, "body": "no route\n"}}
		return r, nil
	}
	handle, err := guards(rt)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rest, ok := r["handle"].([]any); ok && len(handle) > 0 {
			r["handle"] = append(handle, rest...)
		}
	}()
	if rd := rt.GetRedirect(); rd != nil {
		r["handle"] = redirect(rt, rd, scheme)
		return r, nil
	}
	var upstreams []any
	var weights []int
	distinct := map[uint32]bool{}
	protocols := map[configv1.BackendProtocol]bool{}
	var backendTLS []*configv1.BackendTLS // of each TLS backend
	for _, wb := range rt.GetBackends() {
		b, ok := backends[wb.GetBackend()]
		if !ok {
			return nil, fmt.Errorf("backend %q is not in the config", wb.GetBackend())
		}
		protocols[b.GetProtocol()] = true
		if b.GetProtocol() == configv1.BackendProtocol_BACKEND_PROTOCOL_TLS {
			backendTLS = append(backendTLS, b.GetTls())
		}
		for _, ep := range b.GetEndpoints() {
			if !ep.GetReady() {
				continue
			}
			upstreams = append(upstreams, obj{"dial": joinHostPort(ep.GetAddress(), ep.GetPort())})
			weights = append(weights, int(wb.GetWeight()))
			distinct[wb.GetWeight()] = true
		}
	}
	// What stock Caddy cannot say of the TLS backends refuses the route whether or not they
	// have ready endpoints, so that readiness never decides a refusal.
	var tlsCfg obj
	if protocols[configv1.BackendProtocol_BACKEND_PROTOCOL_TLS] {
		var err error
		if tlsCfg, err = transportTLS(backendTLS); err != nil {
			return nil, err
		}
	}
	// The invalid share (the Gateway API's invalid backendRefs) is answered 500 only when
	// nothing valid is ready: Caddy has no weighted choice between a static response and an
	// upstream, so a share beside ready backends goes to them (docs/translation.md).
	if len(upstreams) == 0 && rt.GetInvalidWeight() > 0 {
		r["handle"] = []any{obj{"handler": "static_response", "status_code": 500, "body": "invalid backend reference\n"}}
		return r, nil
	}
	if len(upstreams) == 0 {
		r["handle"] = []any{obj{"handler": "static_response", "status_code": 503, "body": "no ready endpoints\n"}}
		return r, nil
	}
	// One reverse_proxy has one transport, which speaks one set of HTTP versions: a route
	// whose backends speak different protocols (h2c beside HTTP/1.1) is refused rather than
	// one of them spoken to in the other's (whether or not they have ready endpoints, so
	// that readiness never decides a refusal).
	if len(protocols) > 1 {
		return nil, fmt.Errorf("its backends speak different protocols (of HTTP/1.1, h2c and TLS): stock Caddy's reverse_proxy speaks one")
	}
	proxy := obj{"handler": "reverse_proxy", "upstreams": upstreams}
	if a := rt.GetSessionAffinity(); a != nil {
		// Caddy's cookie policy pins a client to an upstream by an HMAC of its address; its
		// cookie's Path is always "/", and its SameSite Lax (None over HTTPS). It is the one
		// selection policy, so it cannot weigh backends as well.
		if len(distinct) > 1 {
			return nil, fmt.Errorf("it has session affinity and weighted backends: stock Caddy's reverse_proxy has one selection policy")
		}
		policy := obj{"policy": "cookie", "name": a.GetCookieName()}
		if m := a.GetMaxAgeSeconds(); m > 0 {
			policy["max_age"] = (time.Duration(m) * time.Second).String()
		}
		proxy["load_balancing"] = obj{"selection_policy": policy}
	} else if len(distinct) > 1 {
		proxy["load_balancing"] = obj{"selection_policy": obj{"policy": "weighted_round_robin", "weights": weights}}
	}
	transport := obj{}
	if d := rt.GetTimeout(); d != nil {
		transport["response_header_timeout"] = d.AsDuration().String()
	}
	if bt := rt.GetBackendTimeouts(); bt != nil {
		if err := contract.CheckBackendTimeouts(bt); err != nil {
			return nil, err
		}
		for key, d := range map[string]interface{ AsDuration() time.Duration }{"dial_timeout": bt.GetConnect(), "read_timeout": bt.GetRead(), "write_timeout": bt.GetWrite()} {
			if v := d.AsDuration(); v > 0 {
				transport[key] = v.String()
			}
		}
	}
	if protocols[configv1.BackendProtocol_BACKEND_PROTOCOL_H2C] {
		// HTTP/2 over cleartext with prior knowledge (appProtocol kubernetes.io/h2c).
		transport["versions"] = []string{"h2c"}
	}
	if protocols[configv1.BackendProtocol_BACKEND_PROTOCOL_TLS] {
		// TLS (BACKEND_PROTOCOL_TLS), as the backends' TLS settings say. Caddy's TLS
		// transport sends the endpoint's address as Host; the request's (or the rewrite's)
		// is kept, as ingress-nginx keeps it.
		transport["tls"] = tlsCfg
		host := "{http.request.hostport}"
		if h := rt.GetRewrite().GetHostname(); h != "" {
			host = literal(h)
		}
		proxy["headers"] = obj{"request": obj{"set": obj{"Host": []string{host}}}}
	}
	if len(transport) > 0 {
		transport["protocol"] = "http"
		proxy["transport"] = transport
	}
	bm, err := backendModifier(rt)
	if err != nil {
		return nil, err
	}
	changes, err := requestChanges(rt, bm)
	if err != nil {
		return nil, err
	}
	r["handle"] = append(changes, proxy)
	return r, nil
}

// transportTLS is the TLS of the transport of a route whose TLS backends have settings bts
// (Backend.tls; nil: unverified). One reverse_proxy has one transport, so they must all be
// the same. Stock Caddy verifies an endpoint for the name it sends (server_name), so a
// verified backend's name is sent even where the module sends none; it bounds no chain's
// depth; and it reads a client certificate only from files, so a backend that presents one
// is refused (docs/translation.md, "Upstream TLS").
func transportTLS(bts []*configv1.BackendTLS) (obj, error) {
	for _, bt := range bts[1:] {
		if !proto.Equal(bt, bts[0]) {
			return nil, fmt.Errorf("its TLS backends are spoken to with different TLS settings: stock Caddy's reverse_proxy has one transport")
		}
	}
	bt := bts[0]
	if err := contract.CheckBackendTLS(bt); err != nil {
		return nil, fmt.Errorf("its backends' TLS settings: %w", err)
	}
	if len(bt.GetClientCertificatePem()) > 0 {
		return nil, fmt.Errorf("its backends are presented a client certificate, which stock Caddy reads only from files: the Sluice module presents it")
	}
	if len(bt.GetSubjectAltNames()) > 0 {
		return nil, fmt.Errorf("its backends are verified for subject alternative names, and stock Caddy verifies only the name it sends: the Sluice module verifies them")
	}
	if !bt.GetVerify() {
		out := obj{"insecure_skip_verify": true}
		if n := bt.GetServerName(); n != "" {
			out["server_name"] = n
		}
		return out, nil
	}
	out := obj{"server_name": bt.GetVerifyName()}
	if len(bt.GetCaPem()) > 0 {
		var ders []string
		for rest := bt.GetCaPem(); ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			ders = append(ders, base64.StdEncoding.EncodeToString(b.Bytes))
		}
		out["ca"] = obj{"provider": "inline", "trusted_ca_certs": ders}
	}
	return out, nil
}

// guards are the handlers of rt's limits, before anything else of it (contract.OutcomeOf):
// a subroute that answers 403 to a client address the route does not admit (remote_ip, the
// TCP peer's), then request_body, which answers 413 to a Content-Length over the limit (a
// chunked body over it is cut, and reverse_proxy answers 502).
func guards(rt *configv1.Route) ([]any, error) {
	var out []any
	if f := rt.GetClientAddresses(); f != nil {
		if _, err := contract.CompileAddressFilter(f); err != nil {
			return nil, err
		}
		forbidden := []any{obj{"handler": "static_response", "status_code": 403, "body": "client address not allowed\n"}}
		var routes []any
		if len(f.GetDeny()) > 0 {
			routes = append(routes, obj{"match": []any{obj{"remote_ip": obj{"ranges": f.GetDeny()}}}, "handle": forbidden})
		}
		if len(f.GetAllow()) > 0 {
			routes = append(routes, obj{"match": []any{obj{"not": []any{obj{"remote_ip": obj{"ranges": f.GetAllow()}}}}}, "handle": forbidden})
		}
		if len(routes) > 0 {
			out = append(out, obj{"handler": "subroute", "routes": routes})
		}
	}
	if max := rt.GetMaxRequestBodyBytes(); max > 0 {
		out = append(out, obj{"handler": "request_body", "max_size": max})
	}
	return out, nil
}

// matchers are rt's path, method, header and query matches as one Caddy matcher set.
// Header matches are header_regexp (any value of the header; exact values anchored and
// quoted), query matches a query matcher for presence ("*") and, for each value, a
// vars_regexp on the parameter's placeholder (its values joined with ","); several
// vars_regexp are ANDed as not(not(a), not(b)), because one vars_regexp ORs its keys.
func matchers(rt *configv1.Route) (obj, error) {
	match := obj{}
	pattern, err := PathPattern(rt.GetPath())
	if err != nil {
		return nil, err
	}
	if pattern != "" {
		match["path_regexp"] = obj{"name": pathCapture, "pattern": pattern}
	}
	if m := rt.GetMethod(); m != "" {
		match["method"] = []string{m}
	}
	if hs := contract.HeaderMatches(rt); len(hs) > 0 {
		re := obj{}
		for _, h := range hs {
			p := h.GetValue()
			if h.GetType() != configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX {
				p = "^" + regexp.QuoteMeta(p) + "$"
			}
			re[http.CanonicalHeaderKey(h.GetName())] = obj{"pattern": p}
		}
		match["header_regexp"] = re
	}
	if qs := contract.QueryMatches(rt); len(qs) > 0 {
		present := obj{}
		var values []any
		for _, q := range qs {
			if strings.ContainsAny(q.GetName(), "{}") {
				return nil, fmt.Errorf("query parameter %q: a name with braces cannot be matched by stock Caddy", q.GetName())
			}
			present[q.GetName()] = []string{"*"}
			p := q.GetValue()
			if q.GetType() != configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX {
				p = "^" + regexp.QuoteMeta(p) + "$"
			}
			values = append(values, obj{"vars_regexp": obj{"{http.request.uri.query." + q.GetName() + "}": obj{"pattern": p}}})
		}
		match["query"] = present
		if len(values) == 1 {
			match["vars_regexp"] = values[0].(obj)["vars_regexp"]
		} else {
			var nots []any
			for _, v := range values {
				nots = append(nots, obj{"not": []any{v}})
			}
			match["not"] = nots
		}
	}
	return match, nil
}

// literal escapes Caddy's placeholder braces in a value that is meant as is.
func literal(s string) string {
	return strings.NewReplacer("{", `\{`, "}", `\}`).Replace(s)
}

// redirect answers with contract.RedirectLocation built from placeholders: the scheme of
// the server (known per server), {http.request.host} or the redirect's hostname, the port
// (the request's is taken from {http.request.hostport} by a map handler when the hostname
// changes), the path from the path matcher's groups, and {http.request.uri.prefixed_query}.
func redirect(rt *configv1.Route, rd *configv1.Redirect, scheme string) []any {
	var handle []any
	if l := rd.GetLocation(); l != "" {
		code := int(rd.GetStatusCode())
		if code == 0 {
			code = http.StatusFound
		}
		return []any{obj{"handler": "static_response", "status_code": code, "headers": obj{"Location": []string{literal(l)}}}}
	}
	to := rd.GetScheme()
	if to == "" {
		to = scheme
	}
	loc := to + "://"
	switch {
	case rd.GetPort() != 0:
		host := "{http.request.hostport}"
		if rd.GetHostname() != "" {
			host = literal(rd.GetHostname())
		}
		loc += host
		if p := rd.GetPort(); !(to == "http" && p == 80) && !(to == "https" && p == 443) {
			loc += fmt.Sprintf(":%d", p)
		}
	case rd.GetScheme() != "":
		if rd.GetHostname() != "" {
			loc += literal(rd.GetHostname())
		} else {
			loc += "{http.request.host}"
		}
	case rd.GetHostname() == "":
		loc += "{http.request.hostport}"
	default:
		loc += literal(rd.GetHostname()) + "{sluice_port}"
		handle = append(handle, obj{"handler": "map", "source": "{http.request.hostport}", "destinations": []string{"{sluice_port}"},
			"mappings": []any{obj{"input_regexp": `^(?:\[[^\]]*\]|[^:\[\]]*):([^:\[\]]+)$`, "outputs": []any{":$1"}}}, "defaults": []string{""}})
	}
	loc += redirectPath(rt, rd.GetPath()) + "{http.request.uri.prefixed_query}"
	code := int(rd.GetStatusCode())
	if code == 0 {
		code = http.StatusFound
	}
	return append(handle, obj{"handler": "static_response", "status_code": code, "headers": obj{"Location": []string{loc}}})
}

// redirectPath is contract.ModifiedPath in placeholders.
func redirectPath(rt *configv1.Route, m *configv1.PathModifier) string {
	switch m.GetType() {
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL:
		if m.GetValue() == "" {
			return "/"
		}
		return literal(m.GetValue())
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_PREFIX:
		to := literal(strings.TrimRight(m.GetValue(), "/"))
		pm := rt.GetPath()
		switch {
		case pm.GetType() != configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX:
			if to == "" {
				return "/"
			}
			return to
		case strings.TrimRight(pm.GetValue(), "/") == "":
			// The prefix is "/": the whole path is the rest (it starts with "/").
			return to + "{http.request.uri.path}"
		case to == "":
			return "/{http.regexp." + pathCapture + ".2}"
		default:
			return to + "{http.regexp." + pathCapture + ".1}"
		}
	}
	return "{http.request.uri.path}"
}

// backendModifier is the request header modifier every backend of rt carries (nil for
// none), which then applies whichever is picked. Stock Caddy picks the upstream inside
// reverse_proxy, after every handler ran, so backends whose modifiers differ cannot be
// rendered: such a route is refused (and its source left out by the translator) rather
// than proxied with another backend's headers.
func backendModifier(rt *configv1.Route) (*configv1.HeaderModifier, error) {
	var m *configv1.HeaderModifier
	for i, wb := range rt.GetBackends() {
		bm := wb.GetRequestHeaders()
		if len(bm.GetSet())+len(bm.GetAdd())+len(bm.GetRemove()) == 0 {
			bm = nil
		}
		if i == 0 {
			m = bm
		} else if !proto.Equal(m, bm) {
			return nil, fmt.Errorf("its backends' request header modifiers differ: stock Caddy cannot change headers by the backend it picks")
		}
	}
	return m, nil
}

// requestChanges are the handlers before reverse_proxy: the rewrite (the path by
// path_regexp replacements on the escaped path, the Host by a request header set), then
// the route's request header modifier, then its backends' one (backendModifier), then the
// response header modifier; each modifier as three
// headers handlers so that they apply remove, set, add (Caddy's own order within one is
// add, set, delete). Deferred response handlers apply innermost first, hence add, set,
// remove.
func requestChanges(rt *configv1.Route, backend *configv1.HeaderModifier) ([]any, error) {
	var handle []any
	if pm := rt.GetRewrite().GetPath(); pm != nil {
		handle = append(handle, obj{"handler": "rewrite", "path_regexp": rewritePath(rt, pm)})
	}
	if h := rt.GetRewrite().GetHostname(); h != "" {
		handle = append(handle, obj{"handler": "headers", "request": obj{"set": obj{"Host": []string{literal(h)}}}})
	}
	req, err := headerOps(rt.GetRequestHeaders())
	if err != nil {
		return nil, fmt.Errorf("request headers: %w", err)
	}
	for _, ops := range req {
		handle = append(handle, obj{"handler": "headers", "request": ops})
	}
	breq, err := headerOps(backend)
	if err != nil {
		return nil, fmt.Errorf("backend request headers: %w", err)
	}
	for _, ops := range breq {
		handle = append(handle, obj{"handler": "headers", "request": ops})
	}
	resp, err := headerOps(rt.GetResponseHeaders())
	if err != nil {
		return nil, fmt.Errorf("response headers: %w", err)
	}
	for i := len(resp) - 1; i >= 0; i-- {
		resp[i]["deferred"] = true
		handle = append(handle, obj{"handler": "headers", "response": resp[i]})
	}
	return handle, nil
}

// headerOps are m's remove, set and add, in that order, each as Caddy header operations.
func headerOps(m *configv1.HeaderModifier) ([]obj, error) {
	var out []obj
	for _, n := range append(append([]string{}, m.GetRemove()...), names(m.GetSet())...) {
		if strings.ContainsAny(n, "*{}") {
			return nil, fmt.Errorf("header name %q: stock Caddy reads '*' and braces in names as patterns", n)
		}
	}
	for _, n := range names(m.GetAdd()) {
		if strings.ContainsAny(n, "*{}") {
			return nil, fmt.Errorf("header name %q: stock Caddy reads '*' and braces in names as patterns", n)
		}
	}
	if len(m.GetRemove()) > 0 {
		out = append(out, obj{"delete": m.GetRemove()})
	}
	if len(m.GetSet()) > 0 {
		set := obj{}
		for _, h := range m.GetSet() {
			set[http.CanonicalHeaderKey(h.GetName())] = []string{literal(h.GetValue())} // the last of a name wins
		}
		out = append(out, obj{"set": set})
	}
	if len(m.GetAdd()) > 0 {
		add := map[string][]string{}
		for _, h := range m.GetAdd() {
			n := http.CanonicalHeaderKey(h.GetName())
			add[n] = append(add[n], literal(h.GetValue()))
		}
		out = append(out, obj{"add": add})
	}
	return out, nil
}

func names(hs []*configv1.HeaderValue) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.GetName())
	}
	return out
}

// rewritePath is contract.ModifiedPath as path_regexp replacements on the escaped path
// (Caddy unescapes the result into the path): a final "^$" -> "/" for an empty result.
func rewritePath(rt *configv1.Route, m *configv1.PathModifier) []any {
	escaped := func(p string) string {
		return strings.ReplaceAll((&url.URL{Path: p}).EscapedPath(), "$", "$$")
	}
	var find, replace string
	switch m.GetType() {
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL:
		find, replace = `(?s)^.*$`, escaped(m.GetValue())
	case configv1.PathModifierType_PATH_MODIFIER_TYPE_REGEX:
		// On the escaped path, as every replacement here: the groups carry the escapes along
		// and Caddy unescapes the result. A ${N} reaches Go's expansion with its braces
		// escaped from Caddy's placeholders.
		find = contract.RewriteExpr(m.GetPattern())
		v := m.GetValue()
		for v != "" {
			i := strings.IndexByte(v, '$')
			if i < 0 {
				replace += escaped(v)
				break
			}
			replace += escaped(v[:i])
			if strings.HasPrefix(v[i:], "$$") {
				replace, v = replace+"$$", v[i+2:]
				continue
			}
			end := strings.IndexByte(v[i:], '}') // CheckRoute: every other '$' starts ${N}
			replace, v = replace+literal(v[i:i+end+1]), v[i+end+1:]
		}
	default: // PREFIX (CheckRoute refused anything else)
		to := escaped(strings.TrimRight(m.GetValue(), "/"))
		if pm := rt.GetPath(); pm.GetType() == configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX {
			find, replace = "^"+regexp.QuoteMeta((&url.URL{Path: strings.TrimRight(pm.GetValue(), "/")}).EscapedPath())+`(?s:(.*))$`, to+"$1"
		} else {
			find, replace = `(?s)^.*$`, to
		}
	}
	return []any{obj{"find": find, "replace": replace}, obj{"find": "^$", "replace": "/"}}
}

func joinHostPort(addr string, port uint32) string {
	if strings.Contains(addr, ":") {
		return fmt.Sprintf("[%s]:%d", addr, port)
	}
	return fmt.Sprintf("%s:%d", addr, port)
}
