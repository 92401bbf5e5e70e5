package contract

import (
	"fmt"
	"strings"
	"testing"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// docs/design.md, "The config stream": every receiver (the gate, the module, the config
// server, the client) applies a delta only onto the version it holds, within its epoch,
// with a rising version, through one Chain; a delta that is not is refused with the cause
// and changes nothing.
func TestChainTakesADeltaOnlyOntoTheVersionHeld(t *testing.T) {
	res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com"}}}
	base := &configv1.Config{Epoch: "e1", Version: 3, Hash: Hash(res), Resources: res}
	next := NewState()
	next.Put(VirtualHosts, "a.example.com", res.GetVirtualHosts()[0])
	next.Put(VirtualHosts, "b.example.com", &configv1.VirtualHost{Hostname: "b.example.com"})
	delta := func(epoch string, basev, v uint64) *configv1.ConfigDelta {
		return &configv1.ConfigDelta{Epoch: epoch, BaseVersion: basev, Version: v, Hash: next.Hash(),
			VirtualHosts: []*configv1.VirtualHost{{Hostname: "b.example.com"}}}
	}
	for _, tc := range []struct {
		name    string
		held    bool
		d       *configv1.ConfigDelta
		wantErr string
	}{
		{"onto the version held", true, delta("e1", 3, 4), ""},
		{"before a complete state", false, delta("e1", 3, 4), "a delta before the complete state"},
		{"of another epoch", true, delta("e2", 3, 4), "a delta onto e2/3, but e1/3 is held"},
		{"onto another version", true, delta("e1", 2, 4), "a delta onto version 2, but version 3 is held"},
		{"to a version not above its base", true, delta("e1", 3, 3), "a delta to version 3 onto version 3: versions only rise"},
		{"whose hash is not the state's", true, func() *configv1.ConfigDelta { d := delta("e1", 3, 4); d.Hash = base.GetHash(); return d }(), "the state after the delta has hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Chain
			if tc.held {
				if err := c.Complete(base, false); err != nil {
					t.Fatal(err)
				}
			}
			before := c.Version
			_, err := c.Delta(tc.d)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr == "" && (c.Version.GetVersion() != 4 || c.State.Hash() != next.Hash()):
				t.Fatalf("after the delta: version %d, hash %.12s", c.Version.GetVersion(), c.State.Hash())
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			case tc.wantErr != "" && (c.Version != before || tc.held && c.State.Hash() != base.GetHash()):
				t.Fatalf("a refused delta changed the chain: version %v, hash %.12s", c.Version, c.State.Hash())
			}
		})
	}
}

// docs/design.md, "The config stream": the config server applies the engine's deltas with
// the digests the engine's state computed (DeltaDigests): the result is the engine's state,
// a delta not onto the version held is still refused, and the digests given are the ones
// used (a wrong one makes the sum disagree with the delta's hash; without digests the same
// delta applies, each resource hashed again).
func TestChainTakesTheTakersDigestsAndStillChecksTheSum(t *testing.T) {
	taker := NewState()
	taker.Put(VirtualHosts, "a.example.com", &configv1.VirtualHost{Hostname: "a.example.com"})
	taker.Put(Backends, "web", &configv1.Backend{Name: "web"})
	taker.TakeDelta()
	base := &configv1.Config{Epoch: "e1", Version: 1, Hash: taker.Hash(), Resources: taker.Resources()}
	taker.Put(VirtualHosts, "a.example.com", &configv1.VirtualHost{Hostname: "a.example.com", Routes: []*configv1.Route{{Name: "web"}}})
	taker.Put(VirtualHosts, "b.example.com", &configv1.VirtualHost{Hostname: "b.example.com"})
	taker.Remove(Backends, "web")
	d, dg := taker.TakeDeltaDigests()
	d.Epoch, d.BaseVersion, d.Version, d.Hash = "e1", 1, 2, taker.Hash()
	if len(dg[VirtualHosts]) != 2 || len(dg[Backends]) != 0 {
		t.Fatalf("digests %v, want the two upserted virtual hosts only", dg)
	}
	follow := func(t *testing.T) *Chain {
		t.Helper()
		var c Chain
		if err := c.Complete(base, false); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	c := follow(t)
	if _, err := c.DeltaDigests(d, dg); err != nil || c.State.Hash() != taker.Hash() || c.Version.GetVersion() != 2 {
		t.Fatalf("with the taker's digests: %v, hash %.12s, version %d; want the taker's state at version 2", err, c.State.Hash(), c.Version.GetVersion())
	}
	if _, err := follow(t).DeltaDigests(&configv1.ConfigDelta{Epoch: "e1", BaseVersion: 2, Version: 3, Hash: d.GetHash()}, dg); err == nil {
		t.Fatal("a delta onto a version not held was taken because digests came with it")
	}
	var wrong Digests
	wrong[VirtualHosts] = map[string][32]byte{"a.example.com": dg[VirtualHosts]["b.example.com"], "b.example.com": dg[VirtualHosts]["b.example.com"]}
	c = follow(t)
	if _, err := c.DeltaDigests(d, wrong); err == nil || !strings.Contains(err.Error(), "the state after the delta has hash") {
		t.Fatalf("a wrong digest was not the one used (error %v)", err)
	}
	if c.Version.GetVersion() != 1 || c.State.Hash() != base.GetHash() {
		t.Fatal("a refused delta changed the chain")
	}
	if _, err := c.Delta(d); err != nil || c.State.Hash() != taker.Hash() {
		t.Fatalf("without digests: %v", err)
	}
}

// BenchmarkApplyDelta measures what the config server saves by taking the engine's digests:
// a delta of 100 virtual hosts of 20 routes each, applied with and without them.
func BenchmarkApplyDelta(b *testing.B) {
	taker := NewState()
	for i := range 100 {
		vh := &configv1.VirtualHost{Hostname: fmt.Sprintf("h%03d.example.com", i)}
		for j := range 20 {
			vh.Routes = append(vh.Routes, &configv1.Route{Name: fmt.Sprintf("r%d", j), Method: "GET",
				Backends: []*configv1.WeightedBackend{{Backend: fmt.Sprintf("web-%d", j)}}})
		}
		taker.Put(VirtualHosts, vh.GetHostname(), vh)
	}
	d, dg := taker.TakeDeltaDigests()
	d.Hash = taker.Hash()
	for _, bc := range []struct {
		name string
		dg   Digests
	}{{"encode", Digests{}}, {"digests", dg}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := NewState().ApplyDigests(d, bc.dg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
