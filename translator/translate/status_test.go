package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Every golden case also has its statuses (docs/design.md, "Status"): testdata/NAME.status.json
// holds what each served Ingress should show, with the findings of the translation, for a
// proxy published at one IP and one hostname.
func TestGoldenStatuses(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, path := range inputs {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		opts := goldenOptions(t, name)
		opts.PublishAddresses = []string{"lb.example.com", "203.0.113.7"}
		t.Run(name, func(t *testing.T) {
			in := load(t, name+".yaml")
			got := renderStatuses(t, Statuses(in, opts, Translate(in, opts)))
			golden := filepath.Join("testdata", name+".status.json")
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
				t.Fatalf("statuses of %s differ from %s (run with -update after checking):\n%s", path, golden, diffLines(string(want), string(got)))
			}
		})
	}
	// docs/design.md, "Cold start": the statuses of a translation share one list of the
	// proxy's addresses (the reporter holds a status per served object; a copy each would
	// grow with the cluster).
	in := load(t, "basic.yaml")
	in.Ingresses = append(in.Ingresses, in.Ingresses[0].DeepCopy())
	in.Ingresses[1].Name += "-twin"
	opts := goldenOptions(t, "basic")
	opts.PublishAddresses = []string{"203.0.113.7"}
	sts := Statuses(in, opts, Translate(in, opts))
	if len(sts) != 2 || len(sts[0].GetAddresses()) != 1 || sts[0].GetAddresses()[0] != sts[1].GetAddresses()[0] {
		t.Fatalf("statuses %v: want two sharing one address list", sts)
	}
}

func renderStatuses(t *testing.T, sts []*watchv1.ObjectStatus) []byte {
	t.Helper()
	var parts []json.RawMessage
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

// The publish Service gives the addresses from its load-balancer status and external IPs; an
// absent one leaves the statuses alone (unknown), never empties them.
func TestPublishedAddressesFromService(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "sluice-system", Name: "proxy"},
		Spec: corev1.ServiceSpec{ExternalIPs: []string{"198.51.100.2"}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "198.51.100.9"}, {Hostname: "lb.example.net"}, {IP: "198.51.100.2"}}}}}
	opts := Options{PublishService: "sluice-system/proxy"}
	got, ok := PublishedAddresses(Input{Services: []*corev1.Service{svc}}, opts)
	if !ok {
		t.Fatal("the publish Service is present but the addresses are unknown")
	}
	var s []string
	for _, a := range got {
		s = append(s, a.GetIp()+"|"+a.GetHostname())
	}
	if want := "|lb.example.net,198.51.100.2|,198.51.100.9|"; strings.Join(s, ",") != want {
		t.Fatalf("addresses %q, want %q", strings.Join(s, ","), want)
	}
	if _, ok := PublishedAddresses(Input{}, opts); ok {
		t.Fatal("an absent publish Service gave known addresses")
	}
	if _, ok := PublishedAddresses(Input{Services: []*corev1.Service{svc}}, Options{}); ok {
		t.Fatal("no publish option gave known addresses")
	}
}
