package contract

import (
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
