package main_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// Route.backend_timeouts through a real Caddy, on both targets: a route whose read timeout
// is shorter than its endpoint's answer takes answers 504; the same endpoint behind a route
// without one answers; a route whose timeouts another route shares is served alike (the
// module builds one transport per set of timeouts).
func TestBackendReadTimeoutIs504(t *testing.T) {
	for _, target := range []string{"module", "load"} {
		t.Run(target, func(t *testing.T) {
			n := testenv.SharedNet(t)
			slow, err := n.StartBackend("slow")
			if err != nil {
				t.Fatal(err)
			}
			fake, addr := startFake(t)
			e := startPusherOn(t, target == "load", addr)
			s := fake.nextStream(t)
			route := func(name, path string, read *durationpb.Duration) *configv1.Route {
				rt := &configv1.Route{Name: name, Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: path},
					Backends: []*configv1.WeightedBackend{{Backend: "be", Weight: 1}}}
				if read != nil {
					rt.BackendTimeouts = &configv1.BackendTimeouts{Read: read, Connect: durationpb.New(5e9)}
				}
				return rt
			}
			res := &configv1.Resources{
				VirtualHosts: []*configv1.VirtualHost{{Hostname: "slow.example.com", Routes: []*configv1.Route{
					route("short", "/delay/2s", durationpb.New(5e8)), route("short-too", "/delay/1500ms", durationpb.New(5e8)), route("none", "/", nil)}}},
				Backends: []*configv1.Backend{{Name: "be", Endpoints: []*configv1.Endpoint{{Address: slow.Address, Port: uint32(slow.Port), Ready: true}}}},
			}
			cfg := &configv1.Config{Epoch: "e1", Version: 1, Hash: translate.Hash(res), Resources: res}
			_ = s.send(marker("e1", 1))
			_ = s.send(configMsg(cfg))
			e.waitConfig(t, cfg)
			for path, want := range map[string]string{"/delay/2s": "504", "/delay/1500ms": "504", "/delay/1s": "slow", "/": "slow"} {
				if got := get(t, e.caddy.HTTPPort, "slow.example.com", path); got != want {
					t.Errorf("%s: %s, want %s", path, got, want)
				}
			}
		})
	}
}
