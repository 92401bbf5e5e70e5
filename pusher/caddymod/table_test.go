package caddymod

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

func goldenConfigs(t *testing.T) map[string]*configv1.Config {
	t.Helper()
	paths, err := filepath.Glob("../../translator/translate/testdata/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("golden inputs: %v", err)
	}
	out := map[string]*configv1.Config{}
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		in, _, err := translate.LoadManifests(p, data)
		if err != nil {
			t.Fatal(err)
		}
		res := translate.Translate(in, translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", Now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)})
		out[filepath.Base(p)] = &configv1.Config{Epoch: "golden", Version: uint64(i + 1), Hash: contract.Hash(res), Resources: res}
	}
	return out
}

// The module matches every golden case exactly as translate.Match, the reference every data
// plane follows: the same route for every probe, and the same certificate per server name.
func TestTableMatchesLikeTheReference(t *testing.T) {
	for name, cfg := range goldenConfigs(t) {
		t.Run(name, func(t *testing.T) {
			s := &Store{}
			if err := s.Replace(cfg); err != nil {
				t.Fatal(err)
			}
			tb := s.Current()
			res := cfg.GetResources()
			for _, vh := range res.GetVirtualHosts() {
				host := strings.Replace(vh.GetHostname(), "*.", "x.", 1)
				var paths []string
				for _, rt := range vh.GetRoutes() {
					v := rt.GetPath().GetValue()
					paths = append(paths, v, strings.TrimRight(v, "/")+"/", v+"/sub", v+"xyz", strings.ToUpper(v), "/users/42")
				}
				paths = append(paths, "/", "/nothing-here")
				for _, h := range []string{host, strings.ToUpper(host) + ":8443", "unlisted.example.net", ""} {
					for _, p := range paths {
						want, got := translate.Match(res, h, p), tb.Match(h, p)
						if (want == nil) != (got == nil) || (want != nil && want.GetName() != got.name) {
							t.Errorf("%s%s: module routes to %v, the reference to %v", h, p, got, want.GetName())
						}
					}
				}
				wantCert := vh.GetCertificate()
				got := tb.Certificate(host)
				if (wantCert == "") != (got == nil) {
					t.Errorf("server name %s: certificate %v, want %q", host, got != nil, wantCert)
				}
			}
		})
	}
}

// A delta applies entirely or not at all: a bad certificate or regular expression anywhere in
// it leaves the table and the state exactly as they were (the same table is served); a delta
// onto another version is refused as not at its base; a good one is swapped in whole.
func TestDeltaAppliesWholeOrNotAtAll(t *testing.T) {
	cfg := goldenConfigs(t)["tls.yaml"]
	s := &Store{}
	if err := s.Replace(cfg); err != nil {
		t.Fatal(err)
	}
	before := s.Current()
	st, err := contract.FromResources(cfg.GetResources(), cfg.GetHash())
	if err != nil {
		t.Fatal(err)
	}
	delta := func(version uint64, change func(*contract.State)) *configv1.ConfigDelta {
		next, _ := contract.StateOf(st.Resources())
		change(next)
		d := next.TakeDelta()
		d.Epoch, d.Version, d.BaseVersion, d.Hash = cfg.GetEpoch(), version, cfg.GetVersion(), next.Hash()
		return d
	}
	newHost := &configv1.VirtualHost{Hostname: "new.example.com", Routes: []*configv1.Route{{Name: "new", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}}}}

	bad := delta(cfg.GetVersion()+1, func(n *contract.State) {
		n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost)
		n.Put(contract.VirtualHosts, "bad.example.com", &configv1.VirtualHost{Hostname: "bad.example.com", Routes: []*configv1.Route{{Name: "bad",
			Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: "/a("}}}})
	})
	if err := s.ApplyDelta(bad); !errors.Is(err, ErrRejected) {
		t.Fatalf("a delta with a bad regular expression: %v, want rejected", err)
	}
	badCert := delta(cfg.GetVersion()+1, func(n *contract.State) {
		n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost)
		n.Put(contract.Certificates, "app/secure-cert", &configv1.Certificate{Name: "app/secure-cert", CertificatePem: []byte("garbage"), PrivateKeyPem: []byte("garbage")})
	})
	if err := s.ApplyDelta(badCert); !errors.Is(err, ErrRejected) {
		t.Fatalf("a delta with a bad certificate: %v, want rejected", err)
	}
	if s.Current() != before || s.state.Hash() != cfg.GetHash() {
		t.Fatal("a rejected delta changed the table or the state")
	}
	if before.Match("new.example.com", "/") != nil {
		t.Fatal("a rejected delta's host is routed")
	}

	good := delta(cfg.GetVersion()+1, func(n *contract.State) { n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost) })
	wrongBase := delta(cfg.GetVersion()+1, func(n *contract.State) { n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost) })
	wrongBase.BaseVersion = cfg.GetVersion() - 1
	if err := s.ApplyDelta(wrongBase); !errors.Is(err, ErrNotAtBase) {
		t.Fatalf("a delta onto another version: %v, want not at base", err)
	}
	corrupt := delta(cfg.GetVersion()+1, func(n *contract.State) { n.Put(contract.VirtualHosts, newHost.GetHostname(), newHost) })
	corrupt.Hash = strings.Repeat("0", 64)
	if err := s.ApplyDelta(corrupt); !errors.Is(err, ErrNotAtBase) || s.Current() != before {
		t.Fatalf("a delta with another resulting hash: %v (table changed: %v), want not at base and nothing changed", err, s.Current() != before)
	}
	if err := s.ApplyDelta(good); err != nil {
		t.Fatal(err)
	}
	after := s.Current()
	if after.Match("new.example.com", "/") == nil || after.Version != good.GetVersion() || s.state.Hash() != good.GetHash() {
		t.Fatal("the good delta is not what the store serves")
	}
	if before.Match("new.example.com", "/") != nil {
		t.Fatal("the previous table changed: a table must never change once served")
	}
}
