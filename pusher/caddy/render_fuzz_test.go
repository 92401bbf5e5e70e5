package caddy

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// fuzzSeeds are resources with what Render must handle: every path type, regular
// expressions good and bad, header matches, weights, timeouts, IPv6 and not-ready endpoints,
// a missing backend, certificates with and without hosts, a catch-all host.
func fuzzSeeds() []*configv1.Resources {
	web := &configv1.Backend{Name: "ns/web:80", Endpoints: []*configv1.Endpoint{
		{Address: "10.0.0.1", Port: 8080, Ready: true}, {Address: "fd00::1", Port: 8080, Ready: true}, {Address: "10.0.0.2", Port: 8080}}}
	api := &configv1.Backend{Name: "ns/api:81", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.3", Port: 9000, Ready: true}}}
	path := func(t configv1.PathMatchType, v string) *configv1.PathMatch {
		return &configv1.PathMatch{Type: t, Value: v}
	}
	good := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{
			{Hostname: "shop.example.com", Certificate: "ns/tls", Routes: []*configv1.Route{
				{Name: "ns/shop/0/0", Path: path(configv1.PathMatchType_PATH_MATCH_TYPE_EXACT, "/cart"), Backends: []*configv1.WeightedBackend{{Backend: "ns/web:80", Weight: 1}}},
				{Name: "ns/shop/0/1", Path: path(configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, "/v[0-9]+/.*"), Timeout: durationpb.New(5e9),
					Backends: []*configv1.WeightedBackend{{Backend: "ns/web:80", Weight: 3}, {Backend: "ns/api:81", Weight: 1}}},
				{Name: "ns/shop/0/2", Path: path(configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, "/api"), Headers: []*configv1.HeaderMatch{
					{Name: "X-Env", Value: "canary", Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_EXACT},
					{Name: "X-User", Value: "^a.*", Type: configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX}},
					Backends: []*configv1.WeightedBackend{{Backend: "ns/api:81"}}},
				{Name: "ns/shop/0/3", Path: path(configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, "/")},
			}},
			{Hostname: "*.example.com", Routes: []*configv1.Route{{Name: "ns/wild/0/0", Path: path(configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, "/")}}},
			{Hostname: "", Routes: []*configv1.Route{{Name: "ns/default", Path: path(configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, "/"), Backends: []*configv1.WeightedBackend{{Backend: "ns/web:80"}}}}},
		},
		Backends: []*configv1.Backend{api, web},
		Certificates: []*configv1.Certificate{
			{Name: "ns/tls", CertificatePem: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), PrivateKeyPem: []byte("-----BEGIN PRIVATE KEY-----\n\xff\xfe\n-----END PRIVATE KEY-----\n")},
			{Name: "ns/unused"},
		},
	}
	badRegex := proto.Clone(good).(*configv1.Resources)
	badRegex.VirtualHosts[0].Routes[1].Path.Value = "/a("
	badHeader := proto.Clone(good).(*configv1.Resources)
	badHeader.VirtualHosts[0].Routes[2].Headers[1].Value = "[z-a]"
	missing := proto.Clone(good).(*configv1.Resources)
	missing.Backends = missing.Backends[:1]
	unknown := proto.Clone(good).(*configv1.Resources)
	unknown.VirtualHosts[1].Routes[0].Path.Type = configv1.PathMatchType_PATH_MATCH_TYPE_UNSPECIFIED
	return []*configv1.Resources{good, badRegex, badHeader, missing, unknown, {}}
}

// FuzzRender renders arbitrary resources (any protobuf the fuzzer makes of them) for both
// Caddy targets: the /load document of Render and the module's constant config. Neither
// panics; what renders is valid JSON, the same bytes and fingerprint every time; a route
// that cannot be rendered (a path or header expression that does not compile, an unknown
// path type, a backend not in the config) is an error that names it, and is never rendered.
func FuzzRender(f *testing.F) {
	for _, r := range fuzzSeeds() {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "127.0.0.1:2019", ":80", ":443")
	}
	f.Add([]byte{}, "unix//run/caddy.sock", "", "[::]:8443")
	f.Fuzz(func(t *testing.T, b []byte, admin, http, https string) {
		var res configv1.Resources
		if err := proto.Unmarshal(b, &res); err != nil {
			return
		}
		o := RenderOptions{AdminListen: admin, HTTPListen: http, HTTPSListen: https}
		cfg := &configv1.Config{Epoch: "e", Version: 1, Hash: "h", Resources: &res}

		mod := ModuleConfig(o)
		if !json.Valid(mod) || !bytes.Equal(mod, ModuleConfig(o)) {
			t.Fatalf("module config is not valid JSON or not deterministic: %s", mod)
		}

		body, fp, err := Render(cfg, o)
		body2, fp2, err2 := Render(proto.Clone(cfg).(*configv1.Config), o)
		if (err == nil) != (err2 == nil) || !bytes.Equal(body, body2) || fp != fp2 {
			t.Fatalf("two renderings differ: %v / %v\n%s\n%s", err, err2, body, body2)
		}
		backends := map[string]bool{}
		for _, be := range res.GetBackends() {
			backends[be.GetName()] = true
		}
		var broken []string // the routes that cannot be rendered
		for _, vh := range res.GetVirtualHosts() {
			for _, rt := range vh.GetRoutes() {
				if !renderable(rt, backends) {
					broken = append(broken, rt.GetName())
				}
			}
		}
		if err != nil {
			named := false
			for _, name := range broken {
				named = named || strings.HasPrefix(err.Error(), "route "+name+": ")
			}
			if !named {
				t.Fatalf("the error %q names none of the routes that cannot be rendered %q", err, broken)
			}
			return
		}
		if len(broken) > 0 {
			t.Fatalf("rendered routes %q that cannot be rendered", broken)
		}
		if !json.Valid(body) {
			t.Fatalf("not valid JSON: %s", body)
		}
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil || doc["apps"] == nil || doc["admin"] == nil {
			t.Fatalf("no admin or apps in the document (%v): %s", err, body)
		}
		if fp == "" || !strings.Contains(string(body), Identity(fp)) {
			t.Fatalf("the document does not carry its identity %q", Identity(fp))
		}
	})
}

// renderable is whether a route can be rendered, decided here independently of Render.
func renderable(rt *configv1.Route, backends map[string]bool) bool {
	switch p := rt.GetPath(); p.GetType() {
	case configv1.PathMatchType_PATH_MATCH_TYPE_EXACT, configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX:
	case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
		if _, err := regexp.Compile("^(?:" + p.GetValue() + ")$"); err != nil {
			return false
		}
	default:
		return false
	}
	for _, h := range rt.GetHeaders() {
		if h.GetType() == configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX {
			if _, err := regexp.Compile(h.GetValue()); err != nil {
				return false
			}
		}
	}
	for _, wb := range rt.GetBackends() {
		if !backends[wb.GetBackend()] {
			return false
		}
	}
	return true
}
