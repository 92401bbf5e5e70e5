package translate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var goldenOpts = Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", Now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}

// goldenOptions are the options of golden case name ("gateway-ports", or a file name):
// goldenOpts, with testdata/NAME.options.json over them where there is one (CaseOptions).
func goldenOptions(t testing.TB, name string) Options {
	t.Helper()
	o := goldenOpts
	if err := CaseOptions(filepath.Join("testdata", strings.TrimSuffix(name, ".yaml")+".yaml"), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func load(t testing.TB, name string) Input {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	in, skipped, err := LoadManifests(name, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) > 0 {
		t.Fatalf("skipped: %v", skipped)
	}
	return in
}

// render is the golden form: protojson, re-indented so that whitespace is stable.
func render(t testing.TB, r *configv1.Resources) []byte {
	t.Helper()
	b, err := protojson.Marshal(r)
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

// Every rule of the translation (docs/translation.md) has a golden case: testdata/NAME.yaml
// in, testdata/NAME.golden.json out. `go test ./translator/translate -update` rewrites them.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, path := range inputs {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			got := render(t, Translate(load(t, name+".yaml"), goldenOptions(t, name)))
			golden := filepath.Join("testdata", name+".golden.json")
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
				t.Fatalf("translation of %s differs from %s (run with -update after checking):\n%s", path, golden, diffLines(string(want), string(got)))
			}
		})
	}
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "first difference at line " + itoa(i+1) + ":\n- " + a + "\n+ " + b
		}
	}
	return ""
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + jsonNum(i)) }

func jsonNum(i int) string { b, _ := json.Marshal(i); return string(b) }

// The path-matching examples of the Kubernetes Ingress documentation, applied through Match
// (the reference every data plane follows) to the translation of testdata/pathtable.yaml.
func TestKubernetesPathMatchingTable(t *testing.T) {
	r := Translate(load(t, "pathtable.yaml"), goldenOpts)
	cases := []struct {
		host, path string
		want       string // backend of the route that must match; "" for no match
	}{
		{"prefix-root.example.com", "/anything/at/all", "app/web:80"},
		{"exact-foo.example.com", "/foo", "app/web:80"},
		{"exact-foo.example.com", "/bar", ""},
		{"exact-foo.example.com", "/foo/", ""},
		{"exact-foo-slash.example.com", "/foo", ""},
		{"prefix-foo.example.com", "/foo", "app/web:80"},
		{"prefix-foo.example.com", "/foo/", "app/web:80"},
		{"prefix-foo-slash.example.com", "/foo", "app/web:80"},
		{"prefix-foo-slash.example.com", "/foo/", "app/web:80"},
		{"prefix-aaa-bb.example.com", "/aaa/bbb", ""},
		{"prefix-aaa-bbb.example.com", "/aaa/bbb", "app/web:80"},
		{"prefix-aaa-bbb-slash.example.com", "/aaa/bbb", "app/web:80"},
		{"prefix-aaa-bbb.example.com", "/aaa/bbb/", "app/web:80"},
		{"prefix-aaa-bbb.example.com", "/aaa/bbb/ccc", "app/web:80"},
		{"prefix-aaa-bbb.example.com", "/aaa/bbbxyz", ""},
		{"multi.example.com", "/aaa/ccc", "app/api:81"},
		{"multi.example.com", "/aaa/bbb", "app/api:9000"},
		{"multi.example.com", "/ccc", "app/web:80"},
		{"prefix-aaa.example.com", "/ccc", ""},
		{"mixed.example.com", "/foo", "app/api:81"},
		{"mixed.example.com", "/foo/x", "app/web:80"},
		{"implspecific.example.com", "/docs", "app/web:80"},
		{"unknown.example.com", "/", ""},
	}
	for _, c := range cases {
		rt := Match(r, c.host, c.path)
		got := ""
		if rt != nil && len(rt.GetBackends()) > 0 {
			got = rt.GetBackends()[0].GetBackend()
		}
		if got != c.want {
			t.Errorf("%s%s: routed to %q, want %q", c.host, c.path, got, c.want)
		}
	}
}

// Host precedence: exact host, then a one-label wildcard, then the catch-all rules and the
// defaultBackend.
func TestHostPrecedence(t *testing.T) {
	r := Translate(load(t, "hosts.yaml"), goldenOpts)
	cases := []struct{ host, path, want string }{
		{"www.example.com", "/www/x", "app/web:80"},
		{"www.example.com", "/other", "app/api:81"}, // falls to *.example.com
		{"a.example.com", "/", "app/api:81"},
		{"a.b.example.com", "/anyhost", "app/api:81"}, // wildcard covers one label only
		{"a.b.example.com", "/", "app/web:80"},        // defaultBackend of the oldest Ingress
		{"example.com", "/", "app/web:80"},
	}
	for _, c := range cases {
		rt := Match(r, c.host, c.path)
		if rt == nil || rt.GetBackends()[0].GetBackend() != c.want {
			t.Errorf("%s%s: got %v, want %s", c.host, c.path, rt, c.want)
		}
	}
}

// The same objects, in any order, give the same bytes and hash.
func TestDeterministic(t *testing.T) {
	for _, name := range []string{"basic.yaml", "hosts.yaml", "tls.yaml", "backends.yaml", "conflicts.yaml"} {
		in := load(t, name)
		want := Hash(Translate(in, goldenOpts))
		for i := 0; i < 20; i++ {
			shuffled := in
			shuffled.Ingresses = rotate(in.Ingresses, i)
			shuffled.Services = rotate(in.Services, i)
			shuffled.EndpointSlices = rotate(in.EndpointSlices, i)
			if got := Hash(Translate(shuffled, goldenOpts)); got != want {
				t.Fatalf("%s: hash %s after reordering, want %s", name, got, want)
			}
		}
	}
}

func rotate[T any](s []T, n int) []T {
	if len(s) == 0 {
		return s
	}
	n %= len(s)
	return append(append([]T{}, s[n:]...), s[:n]...)
}

// routeSet is every route by host and path, with its backends.
func routeSet(r *configv1.Resources) map[string]*configv1.Route {
	out := map[string]*configv1.Route{}
	for _, vh := range r.GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			out[vh.GetHostname()+"|"+rt.GetPath().String()] = rt
		}
	}
	return out
}

// Arbitrary Ingresses never panic the translator and never remove or change the routes of
// other, older Ingresses (scenario 8's "every other route still served").
func FuzzIngressNeverLosesUnrelatedRoutes(f *testing.F) {
	for _, name := range []string{"basic.yaml", "annotations.yaml", "backends.yaml"} {
		in := load(f, name)
		for _, ing := range in.Ingresses {
			b, _ := json.Marshal(ing)
			f.Add(b)
		}
	}
	f.Add([]byte(`{"spec":{"rules":[{"host":"shop.example.com","http":{"paths":[{"path":"/","pathType":"Prefix"}]}}]}}`))
	f.Add([]byte(`{"spec":{"tls":[{"secretName":"x"}],"defaultBackend":{"resource":{"kind":"X","name":"y"}}}}`))
	base := load(f, "basic.yaml")
	baseRoutes := routeSet(Translate(base, goldenOpts))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ing networkingv1.Ingress
		if err := json.Unmarshal(b, &ing); err != nil {
			return
		}
		ing.Namespace, ing.Name = "fuzz", "fuzzed"
		ing.CreationTimestamp = metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) // newer than every base Ingress
		cls := "sluice"
		ing.Spec.IngressClassName = &cls
		in := base
		in.Ingresses = append(append([]*networkingv1.Ingress{}, base.Ingresses...), &ing)
		got := routeSet(Translate(in, goldenOpts))
		for k, want := range baseRoutes {
			if !proto.Equal(got[k], want) {
				t.Fatalf("route %s changed by an unrelated Ingress: %v, was %v", k, got[k], want)
			}
		}
	})
}

// Manifests given to the translator offline (sluicectl translate) may hold kinds it does not
// read: they are skipped and named, in a document of their own or in a List, and do not stop
// the rest from loading; a document that does not decode is still an error naming it.
func TestLoadManifestsSkipsKindsItDoesNotRead(t *testing.T) {
	data := []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: app}
---
apiVersion: v1
kind: List
items:
- apiVersion: batch/v1
  kind: Job
  metadata: {name: once, namespace: app}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: app}
  spec: {ports: [{port: 80}]}
`)
	in, skipped, err := LoadManifests("mixed.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Services) != 1 {
		t.Errorf("loaded %d Services, want the List's one", len(in.Services))
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0], "document 1: apps/v1 Deployment is not read") || !strings.Contains(skipped[1], "batch/v1 Job is not read") {
		t.Errorf("skipped %q, want the Deployment and the Job named", skipped)
	}
	if _, _, err := LoadManifests("bad.yaml", []byte("apiVersion: v1\nkind: Service\nspec: {ports: 3}\n")); err == nil || !strings.Contains(err.Error(), "bad.yaml: document 1") {
		t.Errorf("a Service that does not decode: %v, want an error naming its document", err)
	}
}
