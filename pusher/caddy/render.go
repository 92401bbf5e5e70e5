// Package caddy is the Caddy data plane of the pusher: it renders a config into one Caddy
// JSON document and applies it with POST /load, which replaces the whole config or none of
// it. The request semantics are those of translate.Match (the reference): per request, the virtual hosts that
// apply are tried in order (the exact host, a one-label wildcard, then the catch-all), each
// as a subroute whose routes are tried in order; what nothing matches gets a 404. Paths are
// matched with anchored RE2 expressions (Caddy's own path matcher is case-insensitive, the
// Ingress semantics are not).
package caddy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

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
	var routes []any
	for _, vh := range orderedHosts(res.GetVirtualHosts()) {
		var sub []any
		for _, rt := range vh.GetRoutes() {
			r, err := route(rt, backends)
			if err != nil {
				return nil, "", fmt.Errorf("route %s: %w", rt.GetName(), err)
			}
			sub = append(sub, r)
		}
		if len(sub) == 0 {
			continue
		}
		r := obj{"handle": []any{obj{"handler": "subroute", "routes": sub}}}
		if vh.GetHostname() != "" {
			r["match"] = []any{obj{"host": []string{vh.GetHostname()}}}
		}
		routes = append(routes, r)
	}
	routes = append(routes, obj{"handle": []any{obj{"handler": "static_response", "status_code": 404, "body": "no route\n"}}})

	servers := obj{
		"http": obj{"listen": []string{o.HTTPListen}, "routes": routes, "automatic_https": obj{"disable": true}},
	}
	apps := obj{"http": obj{"servers": servers}}
	if len(res.GetCertificates()) > 0 {
		var pems, policies []any
		hostsByCert := map[string][]string{}
		for _, vh := range res.GetVirtualHosts() {
			if vh.GetCertificate() != "" {
				hostsByCert[vh.GetCertificate()] = append(hostsByCert[vh.GetCertificate()], vh.GetHostname())
			}
		}
		for i, c := range res.GetCertificates() {
			hosts := hostsByCert[c.GetName()]
			if len(hosts) == 0 {
				continue
			}
			tag := fmt.Sprintf("sluice-cert-%d", i)
			pems = append(pems, obj{"certificate": string(c.GetCertificatePem()), "key": string(c.GetPrivateKeyPem()), "tags": []string{tag}})
			sort.Strings(hosts)
			policies = append(policies, obj{"match": obj{"sni": hosts}, "certificate_selection": obj{"any_tag": []string{tag}}})
		}
		if len(pems) > 0 {
			servers["https"] = obj{"listen": []string{o.HTTPSListen}, "routes": routes, "automatic_https": obj{"disable": true}, "tls_connection_policies": policies}
			apps["tls"] = obj{"certificates": obj{"load_pem": pems}}
		}
	}
	// encoding/json sorts map keys, so the same content always gives the same bytes.
	adminJSON, err := json.Marshal(obj{"listen": o.AdminListen, "config": obj{"persist": false}})
	if err != nil {
		return nil, "", err
	}
	appsJSON, err := json.Marshal(apps)
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	h.Write(adminJSON)
	h.Write([]byte{0})
	h.Write(appsJSON)
	fp := hex.EncodeToString(h.Sum(nil))
	doc := obj{
		"admin": json.RawMessage(adminJSON),
		// The meta log never receives anything (no logger has that name); it only carries the
		// identity of the config, readable at /id/sluice-meta.
		"logging": obj{"logs": obj{"sluice-meta": obj{"@id": MetaID, "writer": obj{"output": "discard"}, "include": []string{Identity(fp)}}}},
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
		return "^" + regexp.QuoteMeta(m.GetValue()) + "(/.*)?$", nil
	case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
		p := "^(?:" + m.GetValue() + ")$"
		if _, err := regexp.Compile(p); err != nil {
			return "", err
		}
		return p, nil
	}
	return "", fmt.Errorf("unknown path match type %v", m.GetType())
}

func route(rt *configv1.Route, backends map[string]*configv1.Backend) (obj, error) {
	r := obj{}
	pattern, err := PathPattern(rt.GetPath())
	if err != nil {
		return nil, err
	}
	match := obj{}
	if pattern != "" {
		match["path_regexp"] = obj{"pattern": pattern}
	}
	if len(rt.GetHeaders()) > 0 {
		exact, re := obj{}, obj{}
		for _, h := range rt.GetHeaders() {
			if h.GetType() == configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX {
				// Caddy would refuse the whole document for it, naming no route.
				if _, err := regexp.Compile(h.GetValue()); err != nil {
					return nil, fmt.Errorf("header %s: %w", h.GetName(), err)
				}
				re[h.GetName()] = obj{"pattern": h.GetValue()}
			} else {
				exact[h.GetName()] = []string{h.GetValue()}
			}
		}
		if len(exact) > 0 {
			match["header"] = exact
		}
		if len(re) > 0 {
			match["header_regexp"] = re
		}
	}
	if len(match) > 0 {
		r["match"] = []any{match}
	}
	var upstreams []any
	var weights []int
	distinct := map[uint32]bool{}
	for _, wb := range rt.GetBackends() {
		b, ok := backends[wb.GetBackend()]
		if !ok {
			return nil, fmt.Errorf("backend %q is not in the config", wb.GetBackend())
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
	if len(upstreams) == 0 {
		r["handle"] = []any{obj{"handler": "static_response", "status_code": 503, "body": "no ready endpoints\n"}}
		return r, nil
	}
	proxy := obj{"handler": "reverse_proxy", "upstreams": upstreams}
	if len(distinct) > 1 {
		proxy["load_balancing"] = obj{"selection_policy": obj{"policy": "weighted_round_robin", "weights": weights}}
	}
	if d := rt.GetTimeout(); d != nil {
		proxy["transport"] = obj{"protocol": "http", "response_header_timeout": d.AsDuration().String()}
	}
	r["handle"] = []any{proxy}
	return r, nil
}

func joinHostPort(addr string, port uint32) string {
	if strings.Contains(addr, ":") {
		return fmt.Sprintf("[%s]:%d", addr, port)
	}
	return fmt.Sprintf("%s:%d", addr, port)
}
