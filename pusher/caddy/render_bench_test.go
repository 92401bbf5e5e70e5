package caddy

import (
	"fmt"
	"testing"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// BenchmarkRender renders a config of 10k hosts (one route each, one endpoint).
func BenchmarkRender(b *testing.B) {
	res := &configv1.Resources{Backends: []*configv1.Backend{{Name: "be", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}}}}
	for i := 0; i < 10000; i++ {
		res.VirtualHosts = append(res.VirtualHosts, &configv1.VirtualHost{Hostname: fmt.Sprintf("h%d.example.com", i), Routes: []*configv1.Route{{Name: "r",
			Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, Backends: []*configv1.WeightedBackend{{Backend: "be", Weight: 1}}}}})
	}
	cfg := &configv1.Config{Resources: res}
	o := RenderOptions{AdminListen: "127.0.0.1:2019", HTTPListen: ":8080", HTTPSListen: ":8443"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Render(cfg, o); err != nil {
			b.Fatal(err)
		}
	}
}
