package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func settings(t *testing.T, args ...string) *Settings {
	t.Helper()
	var s Settings
	fs := pflag.NewFlagSet("translator", pflag.ContinueOnError)
	s.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &s
}

// Issue 17: the Gateway API settings default to the documented controller name and the
// ports clients see (80, 443); a setting that could never serve is refused at start, naming it.
func TestGatewaySettings(t *testing.T) {
	s := settings(t)
	if err := s.Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	if s.GatewayControllerName != "sluice.io/gateway-controller" || s.GatewayHTTPPort != 80 || s.GatewayHTTPSPort != 443 {
		t.Fatalf("defaults %q %d %d, want sluice.io/gateway-controller 80 443", s.GatewayControllerName, s.GatewayHTTPPort, s.GatewayHTTPSPort)
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--gateway-controller-name", "no-path"}, "gateway-controller-name"},
		{[]string{"--gateway-controller-name", ""}, "gateway-controller-name"},
		{[]string{"--gateway-http-port", "0"}, "gateway-http-port"},
		{[]string{"--gateway-https-port", "70000"}, "gateway-https-port"},
		{[]string{"--gateway-http-port", "8443", "--gateway-https-port", "8443"}, "gateway-https-port"},
	} {
		err := settings(t, c.args...).Validate()
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%v: error %v, want one naming --%s", c.args, err, c.flag)
		}
	}
}
