package configserver

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/syncbuf"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// docs/design.md, "The config stream": a new epoch begins with its complete state, so a delta
// never crosses epochs, and versions only grow within an epoch. What breaks either is not
// published, and the newest version stays what it was.
func TestVersionsNeverCrossEpochsNorGoBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(s *Server, src *source)
		log  string
	}{
		{"a delta of the new epoch onto the old epoch's newest version", func(s *Server, src *source) {
			s.NewEpoch("e2")
			st := src.st.Clone()
			st.Put(contract.VirtualHosts, src.host(20).GetHostname(), src.host(20))
			d := st.TakeDelta()
			d.Epoch, d.Version, d.BaseVersion, d.Hash = "e2", 2, 1, st.Hash()
			s.PublishDelta(d, contract.Digests{})
		}, "built a delta that does not apply onto the newest version; not published: version=2 error=\"a delta onto e2/1, but e1/1 is held\""},
		{"a complete config of the version already published", func(s *Server, src *source) {
			st := src.st.Clone()
			st.Put(contract.VirtualHosts, src.host(20).GetHostname(), src.host(20))
			st.TakeDelta()
			s.Publish(&configv1.Config{Epoch: "e1", Version: 1, Hash: st.Hash(), Resources: st.Resources()}, st)
		}, "built a complete config not newer than the newest; not published: version=1 newest=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncbuf.Buffer{}
			s, _ := newUnitServer(t, func(cfg *Config) { cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}) })
			src := &source{epoch: "e1"}
			src.first(s)
			v1 := src.st.Hash()
			tc.bad(s, src)
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("the server logged %q, want %q", logs.String(), tc.log)
			}
			resp, err := s.GetStatus(context.Background(), &configv1.GetStatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if c := resp.GetCurrent(); c.GetEpoch() != "e1" || c.GetVersion() != 1 || c.GetHash() != v1 {
				t.Errorf("the newest is %v after %s, want e1/1 unchanged", contract.RefOf(c), tc.name)
			}
		})
	}
}
