//go:build sluicetest

package caddymod

import (
	"errors"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// TestRulePrefix is the path prefix the test-only rule refuses.
const TestRulePrefix = "/refused-by-test"

func init() {
	testRule = func(rt *configv1.Route) error {
		if strings.HasPrefix(rt.GetPath().GetValue(), TestRulePrefix) {
			return errors.New("path " + TestRulePrefix + " is refused by the test-only rule of this build (sluicetest)")
		}
		return nil
	}
}
