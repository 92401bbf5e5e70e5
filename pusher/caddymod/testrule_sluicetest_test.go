//go:build sluicetest

package caddymod

import (
	"errors"
	"testing"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// The sluicetest build refuses a route under TestRulePrefix, naming it.
func TestTestRuleRefusesItsPrefix(t *testing.T) {
	cfg := fixtureConfig(t)
	vh := cfg.GetResources().GetVirtualHosts()[0]
	vh.GetRoutes()[0].Path = &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: TestRulePrefix + "/x"}
	cfg.Hash = contract.Hash(cfg.GetResources())
	err := (&Store{}).Replace(cfg)
	var rf *RefusedError
	if !errors.As(err, &rf) || len(rf.Refused) != 1 || rf.Refused[0].Route != vh.GetRoutes()[0].GetName() {
		t.Fatalf("the test rule: %v, want the route refused by name", err)
	}
}
