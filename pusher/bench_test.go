package main_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/pusher/caddy"
	"github.com/sluice-io/sluice/translator/translate"
)

// routesConfig is a config of n hosts, one route each, all to backend b.
func routesConfig(epoch string, version uint64, n int, b *testenv.Backend) *configv1.Config {
	res := &configv1.Resources{Backends: []*configv1.Backend{{Name: "be", Endpoints: []*configv1.Endpoint{{Address: b.Address, Port: uint32(b.Port), Ready: true}}}}}
	for i := 0; i < n; i++ {
		res.VirtualHosts = append(res.VirtualHosts, &configv1.VirtualHost{Hostname: fmt.Sprintf("h%d-v%d.example.com", i, version), Routes: []*configv1.Route{{Name: "r",
			Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, Backends: []*configv1.WeightedBackend{{Backend: "be", Weight: 1}}}}})
	}
	return &configv1.Config{Epoch: epoch, Version: version, Hash: translate.Hash(res), Resources: res}
}

func medianDur(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkCaddyLoad: render and POST /load of a whole config at 100, 1k and 10k routes,
// against a real Caddy; the median apply latency, and the size of the Caddy JSON.
func BenchmarkCaddyLoad(b *testing.B) {
	n := testenv.SharedNet(b)
	be, err := n.StartBackend("bench")
	if err != nil {
		b.Fatal(err)
	}
	cd, err := testenv.StartCaddy(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer cd.Kill()
	target, err := caddy.New(caddy.Config{Admin: cd.AdminURL, Render: caddy.RenderOptions{
		HTTPListen: fmt.Sprintf("127.0.0.1:%d", cd.HTTPPort), HTTPSListen: fmt.Sprintf("127.0.0.1:%d", cd.HTTPSPort)}})
	if err != nil {
		b.Fatal(err)
	}
	for _, routes := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", routes), func(b *testing.B) {
			var took []time.Duration
			v := uint64(0)
			var size int
			for b.Loop() {
				v++
				cfg := routesConfig("bench", v, routes, be)
				body, _, _ := caddy.Render(cfg, caddy.RenderOptions{AdminListen: "x", HTTPListen: "y", HTTPSListen: "z"})
				size = len(body)
				start := time.Now()
				if err := target.Apply(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			b.ReportMetric(float64(medianDur(took).Microseconds())/1000, "load-ms")
			b.ReportMetric(float64(size)/1024, "json-KiB")
		})
	}
}

// BenchmarkConfigToServed: from a config arriving at the pusher (sent by a test-double
// translator) to the first request Caddy serves from it, at 1k routes; the median.
func BenchmarkConfigToServed(b *testing.B) {
	n := testenv.SharedNet(b)
	be, err := n.StartBackend("served")
	if err != nil {
		b.Fatal(err)
	}
	fake, addr := startFake(b)
	e := startPusher(b, addr)
	s := fake.nextStream(b)
	_ = s.send(marker("bench", 1))
	var took []time.Duration
	v := uint64(0)
	for b.Loop() {
		v++
		cfg := routesConfig("bench", v, 1000, be)
		host := fmt.Sprintf("h999-v%d.example.com", v)
		start := time.Now()
		if err := s.send(configMsg(cfg)); err != nil {
			b.Fatal(err)
		}
		// Polling Caddy every millisecond: the measure is when it first answers.
		testenv.EventuallyEvery(b, time.Millisecond, 30*time.Second, fmt.Sprintf("config %d to be served", v), func() (bool, error) {
			got := get(b, e.caddy.HTTPPort, host, "/")
			return got == "served", fmt.Errorf("%s answered %s", host, got)
		})
		took = append(took, time.Since(start))
	}
	b.ReportMetric(float64(medianDur(took).Microseconds())/1000, "to-served-ms")
}
