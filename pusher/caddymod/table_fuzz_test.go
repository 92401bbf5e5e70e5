package caddymod

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// FuzzStore builds the module's table from an arbitrary complete state and applies an
// arbitrary delta onto it (fix's bits make the state's hash, the delta's base and the
// delta's hash the right ones, so that the fuzzer gets past those checks). Nothing panics,
// routing and certificate look-ups on the result included; a refused state or delta is
// ErrRejected or ErrNotAtBase and changes nothing (the same table, the same state hash); an
// accepted one is served: the table names its version and holds exactly the state's keys.
func FuzzStore(f *testing.F) {
	paths, err := filepath.Glob("../../translator/translate/testdata/*.yaml")
	if err != nil || len(paths) == 0 {
		f.Fatalf("golden inputs: %v", err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		in, _, err := translate.LoadManifests(p, data)
		if err != nil {
			f.Fatal(err)
		}
		res := translate.Translate(in, translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", Now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)})
		cfg, _ := proto.Marshal(&configv1.Config{Epoch: "e", Version: 1, Hash: contract.Hash(res), Resources: res})
		d := &configv1.ConfigDelta{Epoch: "e", Version: 2, BaseVersion: 1,
			VirtualHosts: []*configv1.VirtualHost{{Hostname: "new.example.com", Routes: []*configv1.Route{{Name: "n",
				Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: "/v[0-9]+"}}}}}}
		if len(res.GetVirtualHosts()) > 0 {
			d.RemovedVirtualHosts = []string{res.GetVirtualHosts()[0].GetHostname()}
		}
		if len(res.GetBackends()) > 0 {
			d.RemovedBackends = []string{res.GetBackends()[0].GetName()}
		}
		db, _ := proto.Marshal(d)
		f.Add(cfg, db, byte(7))
	}
	f.Fuzz(func(t *testing.T, cfgBytes, deltaBytes []byte, fix byte) {
		var cfg configv1.Config
		var d configv1.ConfigDelta
		if proto.Unmarshal(cfgBytes, &cfg) != nil || proto.Unmarshal(deltaBytes, &d) != nil {
			return
		}
		if st, err := contract.StateOf(cfg.GetResources()); fix&1 != 0 && err == nil {
			cfg.Hash = st.Hash()
		}
		s := &Store{}
		if err := s.Replace(&cfg); err != nil {
			if !errors.Is(err, ErrRejected) || s.Current() != nil || s.chain.State != nil {
				t.Fatalf("a refused state: %v; the store holds %v", err, s.Current())
			}
			return
		}
		served(t, s, cfg.GetEpoch(), cfg.GetVersion(), cfg.GetHash())

		if fix&2 != 0 {
			d.Epoch, d.BaseVersion = cfg.GetEpoch(), cfg.GetVersion()
		}
		if changes, err := contract.Changes(&d); fix&4 != 0 && err == nil {
			next := s.chain.State.Clone()
			for _, c := range changes {
				if c.Msg == nil {
					next.Remove(c.Type, c.Key)
				} else {
					next.Put(c.Type, c.Key, c.Msg)
				}
			}
			d.Hash = next.Hash()
		}
		before, hash := s.Current(), s.chain.State.Hash()
		if err := s.ApplyDelta(&d); err != nil {
			if !errors.Is(err, ErrRejected) && !errors.Is(err, ErrNotAtBase) {
				t.Fatalf("a refused delta: %v is neither rejected nor not at base", err)
			}
			if s.Current() != before || s.chain.State.Hash() != hash {
				t.Fatalf("a refused delta (%v) changed the table or the state", err)
			}
			return
		}
		served(t, s, d.GetEpoch(), d.GetVersion(), d.GetHash())
	})
}

// served checks that the store serves the version named, with the keys of its state, and
// that look-ups on it do not panic.
func served(t *testing.T, s *Store, epoch string, version uint64, hash string) {
	t.Helper()
	tb := s.Current()
	if tb == nil || tb.Epoch != epoch || tb.Version != version || tb.Hash != hash || s.chain.State.Hash() != hash {
		t.Fatalf("the store serves %+v with state hash %.12s, want %s/%d %.12s", tb, s.chain.State.Hash(), epoch, version, hash)
	}
	res := s.chain.State.Resources()
	if tb.hosts.len() != len(res.GetVirtualHosts()) || tb.backends.len() != len(res.GetBackends()) || tb.certs.len() != len(res.GetCertificates()) {
		t.Fatalf("the table holds %d hosts, %d backends, %d certificates; the state %d, %d, %d", tb.hosts.len(), tb.backends.len(), tb.certs.len(),
			len(res.GetVirtualHosts()), len(res.GetBackends()), len(res.GetCertificates()))
	}
	for _, vh := range res.GetVirtualHosts() {
		if _, ok := tb.hosts.get(vh.GetHostname()); !ok {
			t.Fatalf("the table lacks the state's host %q", vh.GetHostname())
		}
		for _, p := range []string{"/", "/v1", vh.GetHostname()} {
			if r := tb.Match(get(vh.GetHostname(), p)); r != nil {
				tb.pick(r)
			}
		}
		tb.Certificate(vh.GetHostname())
	}
	for _, b := range res.GetBackends() {
		if _, ok := tb.backends.get(b.GetName()); !ok {
			t.Fatalf("the table lacks the state's backend %q", b.GetName())
		}
	}
	for _, c := range res.GetCertificates() {
		if _, ok := tb.certs.get(c.GetName()); !ok {
			t.Fatalf("the table lacks the state's certificate %q", c.GetName())
		}
	}
}
