package caddymod

import (
	"testing"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Every redirect status the Gateway API allows (301, 302, 303, 307, 308) is taken and
// answered with that status; any other refuses the change whole.
func TestRedirectStatusCodes(t *testing.T) {
	saved := store
	t.Cleanup(func() { store = saved })
	for _, code := range []uint32{301, 302, 303, 307, 308, 304} {
		res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{{
			Hostname: "r.example.com",
			Routes: []*configv1.Route{{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
				Redirect: &configv1.Redirect{Hostname: "to.example.com", StatusCode: code}}},
		}}}
		cfg := &configv1.Config{Epoch: "e", Version: 1, Hash: contract.Hash(res), Resources: res}
		store = &Store{}
		err := store.Replace(cfg)
		if code == 304 {
			if err == nil {
				t.Errorf("status %d taken", code)
			}
			continue
		}
		if err != nil {
			t.Fatalf("status %d: %v", code, err)
		}
		got := routeThrough(t, contract.Request{Scheme: "http", Method: "GET", Host: "r.example.com", Path: "/a", RawQuery: "q=1"}, nil)
		if got.status != int(code) || got.location != "http://to.example.com/a?q=1" {
			t.Errorf("status %d: answered %d %q", code, got.status, got.location)
		}
	}
}
