package caddy

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// goldenOptions are the pusher's defaults for stock Caddy (pusher/app: --caddy-admin
// http://127.0.0.1:2019, --proxy-http-listen :8080, --proxy-https-listen :8443).
var goldenOptions = RenderOptions{AdminListen: "127.0.0.1:2019", HTTPListen: ":8080", HTTPSListen: ":8443"}

// goldenOptionsFor are goldenOptions with a further listener for each one res's routes name,
// bound in order from :18100 (what a pusher of that fleet is given as --proxy-listener).
func goldenOptionsFor(res *configv1.Resources) RenderOptions {
	o := goldenOptions
	for i, l := range contract.ListenersOf(res) {
		o.Listeners = append(o.Listeners, Listener{Name: l.Name, HTTPS: l.HTTPS, Listen: fmt.Sprintf(":%d", 18100+i)})
	}
	return o
}

// renderGoldenDir holds one rendering per case: testdata/render/NAME.json.
const renderGoldenDir = "testdata/render"

// goldenCase is one config to render and the name of its golden file.
type goldenCase struct {
	name string
	res  func(t *testing.T) *configv1.Resources
}

// renderGoldenCases are the translator's golden outputs, read from disk (the pusher may not
// link the translator; a new translator golden gets a case here by the glob), and the data
// plane fixture that uses every field of a route.
func renderGoldenCases(t *testing.T) []goldenCase {
	t.Helper()
	paths, err := filepath.Glob("../../translator/translate/testdata/*.golden.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no translator goldens: %v", err)
	}
	var cases []goldenCase
	for _, p := range paths {
		cases = append(cases, goldenCase{name: strings.TrimSuffix(filepath.Base(p), ".golden.json"), res: func(t *testing.T) *configv1.Resources {
			return readResources(t, p)
		}})
	}
	cases = append(cases, goldenCase{name: "dataplane", res: dataplaneFixture})
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("two golden cases are named %q", c.name)
		}
		seen[c.name] = true
	}
	return cases
}

func readResources(t *testing.T, path string) *configv1.Resources {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res := &configv1.Resources{}
	if err := protojson.Unmarshal(data, res); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return res
}

// dataplaneFixture is internal/contract/testdata/dataplane.json with what it leaves out (so
// that each data plane test supplies its own): ready endpoints for its backends and a
// certificate for its host. The PEM is a fixed placeholder, not a key pair made per run: the
// golden must not change between runs, and Render passes PEM through untouched.
func dataplaneFixture(t *testing.T) *configv1.Resources {
	t.Helper()
	res := readResources(t, "../../internal/contract/testdata/dataplane.json")
	for i, b := range res.GetBackends() {
		b.Endpoints = []*configv1.Endpoint{{Address: fmt.Sprintf("10.0.0.%d", i+1), Port: 8080, Ready: true}}
	}
	res.Certificates = []*configv1.Certificate{{Name: "dp/tls",
		CertificatePem: []byte("-----BEGIN CERTIFICATE-----\nZGF0YXBsYW5lIGZpeHR1cmU=\n-----END CERTIFICATE-----\n"),
		PrivateKeyPem:  []byte("-----BEGIN PRIVATE KEY-----\nZGF0YXBsYW5lIGZpeHR1cmU=\n-----END PRIVATE KEY-----\n")}}
	return res
}

// renderIndented is the golden form of what stock Caddy's /load receives: Render's bytes,
// indented (Render's own key order is already stable: encoding/json sorts map keys).
func renderIndented(t *testing.T, res *configv1.Resources) []byte {
	t.Helper()
	body, _, err := Render(&configv1.Config{Epoch: "golden", Version: 1, Resources: res}, goldenOptionsFor(res))
	var refused *RenderError
	if errors.As(err, &refused) {
		// A config stock Caddy cannot express (docs/translation.md): the golden is the
		// refusal, route by route, which the pusher NACKs and the translator quarantines.
		type refusal struct {
			Host  string `json:"host"`
			Route string `json:"route"`
			Error string `json:"error"`
		}
		var rs []refusal
		for i, r := range refused.Refused {
			rs = append(rs, refusal{r.Host, r.Route, refused.Causes[i].Error()})
		}
		body, err = json.Marshal(map[string]any{"refused": rs})
	}
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, body, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// docs/design.md, "The pusher gate" (stock Caddy's /load replaces the whole config): the
// document stock Caddy receives for every golden case of the translator (Ingress and Gateway
// API) and for the data plane fixture is the reviewed one in testdata/render/NAME.json, so a
// change to a rendering rule shows as a diff. `go test ./pusher/caddy -run Golden -update`
// rewrites them. (What these documents do in a real Caddy is proven by pusher's
// TestCaddyRoutesEveryGoldenCaseLikeTheReference.)
func TestRenderGolden(t *testing.T) {
	cases := renderGoldenCases(t)
	want := map[string]bool{}
	for _, c := range cases {
		want[c.name+".json"] = true
		t.Run(c.name, func(t *testing.T) {
			got := renderIndented(t, c.res(t))
			if again := renderIndented(t, c.res(t)); !bytes.Equal(got, again) {
				t.Fatalf("two renderings differ:\n%s", lineDiff(string(got), string(again)))
			}
			golden := filepath.Join(renderGoldenDir, c.name+".json")
			if *update {
				if err := os.MkdirAll(renderGoldenDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			have, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run `go test ./pusher/caddy -run Golden -update` to create it)", err)
			}
			if !bytes.Equal(got, have) {
				t.Fatalf("the rendering differs from %s (run with -update after checking):\n%s", golden, lineDiff(string(have), string(got)))
			}
		})
	}
	// A golden whose case is gone would be kept up to date by nothing.
	files, err := filepath.Glob(filepath.Join(renderGoldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s renders no case (its translator golden is gone): delete it", f)
		}
	}
}

// lineDiff is a unified-style diff of want and got by lines (a longest common subsequence:
// the files have at most a few thousand lines), each change with 3 lines of context, and at
// most 60 lines in all.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of the longest common subsequence of w[i:] and g[j:].
	lcs := make([][]int, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte // ' ', '-' or '+'
		text string
		at   int // the line of want it is at (an added line: the one it comes before)
	}
	var lines []line
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			lines = append(lines, line{' ', w[i], i + 1})
			i, j = i+1, j+1
		case i < len(w) && (j == len(g) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', w[i], i + 1})
			i++
		default:
			lines = append(lines, line{'+', g[j], i + 1})
			j++
		}
	}
	var b strings.Builder
	shown, last := 0, -1
	for k, l := range lines {
		near := false
		for d := max(0, k-3); d < min(len(lines), k+4); d++ {
			near = near || lines[d].op != ' '
		}
		if !near {
			continue
		}
		if shown == 60 {
			b.WriteString("...\n")
			break
		}
		if k != last+1 {
			fmt.Fprintf(&b, "@@ line %d\n", l.at)
		}
		fmt.Fprintf(&b, "%c %s\n", l.op, l.text)
		shown, last = shown+1, k
	}
	return b.String()
}
