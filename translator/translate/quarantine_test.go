package translate

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
)

// quarantineCases are golden inputs with objects a data plane rejected: an Ingress and the
// Secret of another one's TLS; an HTTPRoute.
var quarantineCases = []struct {
	input       string
	quarantined map[string]string
}{
	{"tls", map[string]string{"Ingress/app/implicit-hosts": "route app/implicit-hosts/rules[0]/paths[0]: refused", "Secret/app/secure-cert": "certificate app/secure-cert: refused"}},
	{"gateway-backends", map[string]string{"HTTPRoute/app/refs": "route httproute/app/refs/rules[0]/matches[0]/http: refused"}},
}

// An object a data plane rejected is left out as an invalid one is: an Ingress or HTTPRoute
// serves no route (an HTTPRoute says Accepted=False, RejectedByDataPlane, on every parent), a
// Secret's certificate is not served (its Ingresses say so), and each carries the finding
// "rejected by the data plane"; everything else is as without the quarantine
// (testdata/quarantine/NAME.golden.json, .gateway-status.json; -update rewrites them). The
// incremental translator gives the same bytes when it learns the quarantine later, and the
// unquarantined bytes once it is lifted.
func TestGoldenQuarantine(t *testing.T) {
	for _, tc := range quarantineCases {
		t.Run(tc.input, func(t *testing.T) {
			in := load(t, tc.input+".yaml")
			opts := goldenOpts
			opts.Quarantined = tc.quarantined
			full := Translate(in, opts)
			files := map[string][]byte{filepath.Join("testdata", "quarantine", tc.input+".golden.json"): render(t, full)}
			if len(in.HTTPRoutes) > 0 {
				sopts := opts
				sopts.PublishAddresses = []string{"lb.example.com", "203.0.113.7"}
				files[filepath.Join("testdata", "quarantine", tc.input+".gateway-status.json")] = renderGatewayStatuses(t, GatewayStatuses(in, sopts))
			}
			for golden, got := range files {
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s differs from %s (run with -update after checking):\n%s", tc.input, golden, diffLines(string(want), string(got)))
				}
			}

			inc := New(goldenOpts)
			for _, o := range in.objects() {
				inc.Set(o)
			}
			inc.Build()
			plain := Translate(in, goldenOpts)
			if !proto.Equal(inc.State().Resources(), plain) {
				t.Fatal("without quarantine, the incremental translation differs from the full one")
			}
			for key, why := range tc.quarantined {
				o := contractObject(key)
				inc.SetQuarantined(o[0], o[1], o[2], why)
			}
			inc.Build()
			if !bytes.Equal(render(t, inc.State().Resources()), render(t, full)) {
				t.Fatal("quarantined later, the incremental translation differs from the full one")
			}
			for key := range tc.quarantined {
				o := contractObject(key)
				inc.SetQuarantined(o[0], o[1], o[2], "")
			}
			inc.Build()
			if !bytes.Equal(render(t, inc.State().Resources()), render(t, plain)) {
				t.Fatal("lifted, the incremental translation differs from the one without quarantine")
			}
		})
	}
}

func contractObject(key string) [3]string {
	var out [3]string
	for i, rest := 0, key; i < 3; i++ {
		j := bytes.IndexByte([]byte(rest), '/')
		if j < 0 || i == 2 {
			out[i] = rest
			break
		}
		out[i], rest = rest[:j], rest[j+1:]
	}
	return out
}
