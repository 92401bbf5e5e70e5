package caddymod

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// A refused change names every route and certificate it refused (host and route name, or
// certificate name), and the admin API's 422 carries them in contract.RefusedHeader, so that
// the pusher can trace them to their objects; nothing of the change is applied.
func TestRefusalNamesTheRoutesAndCertificates(t *testing.T) {
	cfg := goldenConfigs(t)["tls.yaml"]
	s := &Store{}
	if err := s.Replace(cfg); err != nil {
		t.Fatal(err)
	}
	before := s.Current()
	bad := proto.Clone(cfg).(*configv1.Config)
	bad.Version++
	var want []contract.Refusal
	for _, vh := range bad.GetResources().GetVirtualHosts() {
		if len(vh.GetRoutes()) == 0 || len(want) == 2 {
			continue
		}
		rt := vh.GetRoutes()[0]
		rt.Query = []*configv1.QueryMatch{{Name: "q", Value: "(", Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX}}
		want = append(want, contract.Refusal{Host: vh.GetHostname(), Route: rt.GetName()})
	}
	bad.GetResources().Certificates = append(bad.GetResources().Certificates, &configv1.Certificate{Name: "ns/junk", CertificatePem: []byte("junk")})
	want = append(want, contract.Refusal{Certificate: "ns/junk"})
	bad.Hash = contract.Hash(bad.GetResources())

	err := s.Replace(bad)
	var rf *RefusedError
	if !errors.Is(err, ErrRejected) || !errors.As(err, &rf) || !reflect.DeepEqual(rf.Refused, want) {
		t.Fatalf("refused: %v naming %+v, want rejected naming %+v", err, rf, want)
	}
	if s.Current() != before {
		t.Fatal("a refused state changed the table")
	}
	w := httptest.NewRecorder()
	if answer(w, err) == nil {
		t.Fatal("a refusal answered as a success")
	}
	var got []contract.Refusal
	if jerr := json.Unmarshal([]byte(w.Header().Get(contract.RefusedHeader)), &got); jerr != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the answer names %q (%v), want %+v", w.Header().Get(contract.RefusedHeader), jerr, want)
	}
	if err := s.ApplyDelta(&configv1.ConfigDelta{Epoch: cfg.GetEpoch(), BaseVersion: cfg.GetVersion(), Version: cfg.GetVersion() + 1,
		VirtualHosts: []*configv1.VirtualHost{vhostOf(bad, want[0].Host)}}); !errors.As(err, &rf) || !reflect.DeepEqual(rf.Refused, want[:1]) {
		t.Fatalf("a refused delta: %v, want it naming %+v", err, want[:1])
	}
	if h := httptest.NewRecorder(); answer(h, errors.New("other")) != nil && h.Header().Get(contract.RefusedHeader) != "" {
		t.Fatal("an error naming nothing names something")
	}
}

func vhostOf(c *configv1.Config, host string) *configv1.VirtualHost {
	for _, vh := range c.GetResources().GetVirtualHosts() {
		if vh.GetHostname() == host {
			return vh
		}
	}
	return nil
}

// Production builds have no test-only rule: a route under its prefix is served.
func TestNoTestRuleWithoutTheBuildTag(t *testing.T) {
	if testRule != nil {
		t.Skip("built with the sluicetest tag")
	}
	cfg := fixtureConfig(t)
	cfg.GetResources().GetVirtualHosts()[0].GetRoutes()[0].Path = &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/refused-by-test"}
	cfg.Hash = contract.Hash(cfg.GetResources())
	if err := (&Store{}).Replace(cfg); err != nil {
		t.Fatalf("a production build refused a route under the test-only prefix: %v", err)
	}
}

// A complete state large enough to be compiled on every core (docs/design.md, "Cold start")
// names its refusals exactly as one goroutine would: in the state's order, hosts before
// certificates, at most contract.MaxRefusals of them and the rest counted.
func TestLargeStateNamesItsRefusalsInOrder(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	// Refused hosts fall in every goroutine's range: every 37th (fewer than the cap, so the
	// certificates are named too) or every 9th (more than the cap).
	for _, every := range []int{37, 9} {
		t.Run(fmt.Sprint("every ", every), func(t *testing.T) {
			cfg := benchState(t, 4*parallelCompile)
			res := cfg.GetResources()
			var all []contract.Refusal
			for i, vh := range res.GetVirtualHosts() {
				if i%every == every-1 {
					rt := vh.GetRoutes()[0]
					rt.Query = []*configv1.QueryMatch{{Name: "q", Value: "(", Type: configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX}}
					all = append(all, contract.Refusal{Host: vh.GetHostname(), Route: rt.GetName()})
				}
			}
			certs := res.GetCertificates()
			for _, c := range []*configv1.Certificate{certs[0], certs[len(certs)-1]} {
				c.PrivateKeyPem = []byte("junk")
				all = append(all, contract.Refusal{Certificate: c.GetName()})
			}
			cfg.Hash = contract.Hash(res)
			want := all[:min(len(all), contract.MaxRefusals)]

			err := (&Store{}).Replace(cfg)
			var rf *RefusedError
			if !errors.As(err, &rf) {
				t.Fatalf("a state with %d refused parts: %v, want a refusal", len(all), err)
			}
			if !reflect.DeepEqual(rf.Refused, want) || rf.More != len(all)-len(want) {
				t.Fatalf("refused %+v and %d more, want %+v and %d more", rf.Refused, rf.More, want, len(all)-len(want))
			}
		})
	}
}
