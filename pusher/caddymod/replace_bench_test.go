package caddymod

import (
	"fmt"
	"testing"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/pki"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// benchState is a complete state shaped like the benchmark harness's cluster (cmd/bench): n
// hosts, each with one prefix route to its own backend of one ready endpoint, and a
// certificate for every tenth host.
func benchState(b testing.TB, n int) *configv1.Config {
	b.Helper()
	certPEM, keyPEM, err := pki.SelfSigned("bench.example.com", "*.bench.example.com")
	if err != nil {
		b.Fatal(err)
	}
	res := &configv1.Resources{}
	for i := range n {
		backend := fmt.Sprintf("ns/app%d:80", i)
		vh := &configv1.VirtualHost{Hostname: fmt.Sprintf("app%d.ns.bench.example.com", i), Routes: []*configv1.Route{{
			Name:     fmt.Sprintf("ingress/ns/app%d/0/0", i),
			Path:     &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
			Backends: []*configv1.WeightedBackend{{Backend: backend, Weight: 1}},
		}}}
		if i%10 == 0 {
			vh.Certificate = fmt.Sprintf("ns/app%d-tls", i)
			res.Certificates = append(res.Certificates, &configv1.Certificate{Name: vh.Certificate, CertificatePem: certPEM, PrivateKeyPem: keyPEM})
		}
		res.VirtualHosts = append(res.VirtualHosts, vh)
		res.Backends = append(res.Backends, &configv1.Backend{Name: backend, Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 8080, Ready: true}}})
	}
	return &configv1.Config{Epoch: "bench", Version: 1, Hash: contract.Hash(res), Resources: res}
}

// BenchmarkReplace is the module's complete-state apply (docs/design.md, "Cold start": the
// second half of the cold start's limit).
func BenchmarkReplace(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		cfg := benchState(b, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				s := &Store{}
				if err := s.Replace(cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
