package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Every Gateway API golden case (testdata/gateway-*.yaml) also has the statuses of the
// GatewayClasses, Gateways and HTTPRoutes it serves (docs/design.md, "Status"):
// testdata/NAME.gateway-status.json, for a proxy published at one IP and one hostname.
func TestGoldenGatewayStatuses(t *testing.T) {
	inputs, err := filepath.Glob("testdata/gateway-*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no Gateway API golden inputs: %v", err)
	}
	for _, path := range inputs {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		opts := goldenOptions(t, name)
		opts.PublishAddresses = []string{"lb.example.com", "203.0.113.7"}
		t.Run(name, func(t *testing.T) {
			got := renderGatewayStatuses(t, GatewayStatuses(load(t, name+".yaml"), opts))
			golden := filepath.Join("testdata", name+".gateway-status.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Gateway API statuses of %s differ from %s (run with -update after checking):\n%s", path, golden, diffLines(string(want), string(got)))
			}
		})
	}
}

func renderGatewayStatuses(t *testing.T, sts []*watchv1.ObjectStatus) []byte {
	t.Helper()
	parts := []json.RawMessage{}
	for _, s := range sts {
		b, err := protojson.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, b)
	}
	b, err := json.Marshal(parts)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// The Gateway API's objects, in any order, give the same bytes, hash and statuses
// (docs/design.md: translation is deterministic).
func TestGatewayDeterministic(t *testing.T) {
	inputs, err := filepath.Glob("testdata/gateway-*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no Gateway API golden inputs: %v", err)
	}
	for _, path := range inputs {
		in := load(t, filepath.Base(path))
		opts := goldenOptions(t, filepath.Base(path))
		want := Hash(Translate(in, opts))
		wantSt := renderGatewayStatuses(t, GatewayStatuses(in, opts))
		for i := range 12 {
			shuffled := in
			shuffled.Gateways = rotate(in.Gateways, i)
			shuffled.HTTPRoutes = rotate(in.HTTPRoutes, i)
			shuffled.ReferenceGrants = rotate(in.ReferenceGrants, i)
			shuffled.GatewayClasses = rotate(in.GatewayClasses, i)
			shuffled.Services = rotate(in.Services, i)
			shuffled.Secrets = rotate(in.Secrets, i)
			shuffled.Namespaces = rotate(in.Namespaces, i)
			if got := Hash(Translate(shuffled, opts)); got != want {
				t.Fatalf("%s: hash %s after reordering, want %s", path, got, want)
			}
			if got := renderGatewayStatuses(t, GatewayStatuses(shuffled, opts)); !bytes.Equal(got, wantSt) {
				t.Fatalf("%s: statuses differ after reordering:\n%s", path, diffLines(string(wantSt), string(got)))
			}
		}
	}
}
