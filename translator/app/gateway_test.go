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

// The Gateway API settings (docs/operations.md) default to the documented controller name and the
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
		{[]string{"--gateway-port", "8080"}, "gateway-port"},
		{[]string{"--gateway-port", "8080/TCP"}, "gateway-port"},
		{[]string{"--gateway-port", "0/HTTP"}, "gateway-port"},
		{[]string{"--gateway-port", "443/HTTP"}, "gateway-port"},
		{[]string{"--gateway-port", "8080/HTTP,8080/HTTPS"}, "gateway-port"},
		{[]string{"--gateway-address", "192.0.2.300"}, "gateway-address"},
		{[]string{"--gateway-address", "gw.example.com"}, "gateway-address"},
		{[]string{"--gateway-address", "192.0.2.21,192.0.2.21"}, "gateway-address"},
		{[]string{"--gateway-reserved-address", "192.0.2.40"}, "gateway-reserved-address"},
		{[]string{"--gateway-address", "192.0.2.21", "--gateway-reserved-address", "192.0.2.21"}, "gateway-reserved-address"},
	} {
		err := settings(t, c.args...).Validate()
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%v: error %v, want one naming --%s", c.args, err, c.flag)
		}
	}
}

// Further ports and the address pool (docs/design.md, "Gateway addresses and ports") reach
// the translation parsed and in canonical form.
func TestGatewayPortsAndAddresses(t *testing.T) {
	s := settings(t, "--gateway-port", "8080/HTTP,8443/HTTPS", "--gateway-address", "192.0.2.21", "--gateway-address", "2001:DB8::1")
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	ports, _ := s.gatewayPorts()
	addrs, _, _ := s.gatewayAddresses()
	if len(ports) != 2 || ports[0].Port != 8080 || ports[0].HTTPS || ports[1].Port != 8443 || !ports[1].HTTPS {
		t.Errorf("ports %+v, want 8080 HTTP and 8443 HTTPS", ports)
	}
	if strings.Join(addrs, ",") != "192.0.2.21,2001:db8::1" {
		t.Errorf("addresses %v, want 192.0.2.21 and 2001:db8::1", addrs)
	}
}
