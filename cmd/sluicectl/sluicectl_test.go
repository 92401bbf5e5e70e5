package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/pki"
	"github.com/sluice-io/sluice/internal/version"
	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// fixtureManifests is a cluster with one good Ingress of our class, one of our class whose
// backend Service is missing (a finding) and one of another class.
const fixtureManifests = `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.io/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
spec:
  ingressClassName: sluice
  rules:
  - host: web.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: broken, namespace: shop}
spec:
  ingressClassName: sluice
  rules:
  - host: broken.example.com
    http: {paths: [{path: /api, pathType: Prefix, backend: {service: {name: does-not-exist, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: theirs, namespace: shop}
spec:
  ingressClassName: nginx
  rules:
  - host: theirs.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
`

// fixtureStatus translates fixtureManifests with the real translator and wraps the result as
// the translator's GetStatus would: version 7, one pusher on it, one still on version 6.
func fixtureStatus(t *testing.T) *configv1.GetStatusResponse {
	t.Helper()
	in, _, err := translate.LoadManifests("fixture.yaml", []byte(fixtureManifests))
	if err != nil {
		t.Fatal(err)
	}
	res := translate.Translate(in, translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", Now: time.Unix(1e9, 0)})
	cur := &configv1.Config{Epoch: "e1", Version: 7, Hash: translate.Hash(res), WatcherEpoch: "w1", WatcherRevision: 42, Resources: res}
	return &configv1.GetStatusResponse{
		Current: cur,
		Synced:  true,
		Pushers: []*configv1.PusherStatus{
			{PusherId: "pusher-a", DataPlane: configv1.DataPlaneKind_DATA_PLANE_KIND_CADDY, Connected: true, SoftwareVersion: "v1.2.3",
				Applied: &configv1.ConfigRef{Epoch: "e1", Version: 7, Hash: cur.GetHash()}},
			{PusherId: "pusher-b", DataPlane: configv1.DataPlaneKind_DATA_PLANE_KIND_CADDY, Connected: true,
				Applied: &configv1.ConfigRef{Epoch: "e1", Version: 6}},
		},
	}
}

// fakeTranslator serves a fixed status, and on StreamConfig the marker and that config.
type fakeTranslator struct {
	configv1.UnimplementedConfigServiceServer
	st *configv1.GetStatusResponse
	// chunkLimit, when set, sends the config as over a stream of that message limit (in
	// chunks); broken drops its first chunk.
	chunkLimit int
	broken     bool
	// deltas is how many versions follow the complete state, each adding a host.
	deltas int
}

func (f *fakeTranslator) GetStatus(context.Context, *configv1.GetStatusRequest) (*configv1.GetStatusResponse, error) {
	return f.st, nil
}

func (f *fakeTranslator) StreamConfig(s grpc.BidiStreamingServer[configv1.StreamConfigRequest, configv1.StreamConfigResponse]) error {
	if _, err := s.Recv(); err != nil { // the Hello
		return err
	}
	cur := f.st.GetCurrent()
	msgs := []*configv1.StreamConfigResponse{
		{Message: &configv1.StreamConfigResponse_InitialSyncComplete{InitialSyncComplete: &configv1.InitialSyncComplete{Epoch: cur.GetEpoch(), Version: cur.GetVersion()}}},
		{Message: &configv1.StreamConfigResponse_Config{Config: cur}},
	}
	if f.chunkLimit > 0 {
		chunks, err := contract.Chunk(cur, f.chunkLimit, true)
		if err != nil {
			return err
		}
		if f.broken {
			chunks = append(chunks[:1], chunks[2:]...)
		}
		msgs = append(msgs[:1], chunks...)
	}
	if f.deltas > 0 {
		st, err := contract.StateOf(cur.GetResources())
		if err != nil {
			return err
		}
		for i := range f.deltas {
			st.Put(contract.VirtualHosts, fmt.Sprintf("added-%d.example.com", i), &configv1.VirtualHost{Hostname: fmt.Sprintf("added-%d.example.com", i)})
			d := st.TakeDelta()
			d.Epoch, d.BaseVersion, d.Version, d.Hash = cur.GetEpoch(), cur.GetVersion()+uint64(i), cur.GetVersion()+uint64(i)+1, st.Hash()
			msgs = append(msgs, &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: d}})
		}
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			return err
		}
	}
	<-s.Context().Done()
	return nil
}

// fakeWatcher sends a snapshot of one Service and a marker whose inventory verifies.
type fakeWatcher struct {
	watchv1.UnimplementedWatchServiceServer
}

func (fakeWatcher) Watch(_ *watchv1.WatchRequest, s grpc.ServerStreamingServer[watchv1.WatchResponse]) error {
	kind := &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}
	obj := &watchv1.Object{Kind: kind, Namespace: "shop", Name: "web", Uid: "u1", ResourceVersion: "10"}
	const epoch, rev = "w1", 42
	for _, ev := range []*watchv1.WatchResponse{
		{Event: &watchv1.WatchResponse_SnapshotStart{SnapshotStart: &watchv1.SnapshotStart{Count: 1, Kinds: []*watchv1.GroupVersionKind{kind}}}},
		{Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: obj}}},
		{Event: &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: &watchv1.SnapshotEnd{}}},
		{Event: &watchv1.WatchResponse_InitialSyncComplete{InitialSyncComplete: &watchv1.InitialSyncComplete{
			Inventory: []*watchv1.KindInventory{watchstream.InventoryOf(kind, []*watchv1.Object{obj})}}}},
	} {
		ev.Epoch, ev.Revision = epoch, rev
		if err := s.Send(ev); err != nil {
			return err
		}
	}
	<-s.Context().Done()
	return nil
}

// startFake serves the fake translator and watcher (and grpcx's health) on 127.0.0.1:0.
func startFake(t *testing.T, st *configv1.GetStatusResponse) string {
	t.Helper()
	return startFakeTranslator(t, &fakeTranslator{st: st})
}

func startFakeTranslator(t *testing.T, ft *fakeTranslator) string {
	t.Helper()
	return startFakeTranslatorTLS(t, ft, grpcx.TLSFiles{})
}

// startFakeTranslatorTLS serves ft as startFakeTranslator does, with tls (mutual TLS when
// set).
func startFakeTranslatorTLS(t *testing.T, ft *fakeTranslator, tls grpcx.TLSFiles) string {
	t.Helper()
	srv, err := grpcx.NewServer(grpcx.ServerConfig{Logger: hclog.NewNullLogger(), TLS: tls})
	if err != nil {
		t.Fatal(err)
	}
	configv1.RegisterConfigServiceServer(srv, ft)
	watchv1.RegisterWatchServiceServer(srv, fakeWatcher{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fake server: %v", err)
		}
	})
	return lis.Addr().String()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// run executes one sluicectl command line in-process, as main does.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code = execute(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// decodeJSON parses a command's JSON output: one document, or (stream) one per line.
func decodeJSON(t *testing.T, out string, stream bool) []any {
	t.Helper()
	docs := []string{out}
	if stream {
		docs = strings.Split(strings.TrimSpace(out), "\n")
	}
	var vs []any
	for _, d := range docs {
		var v any
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			t.Fatalf("output is not JSON (%v):\n%s", err, out)
		}
		if _, ok := v.(map[string]any); !ok {
			t.Fatalf("JSON output is not an object:\n%s", d)
		}
		vs = append(vs, v)
	}
	return vs
}

// decodeYAML parses a command's YAML output: one document, or (stream) "---"-separated ones.
func decodeYAML(t *testing.T, out string, stream bool) []any {
	t.Helper()
	docs := []string{out}
	if stream {
		if !strings.HasPrefix(out, "---\n") {
			t.Fatalf("streamed YAML does not start with ---:\n%s", out)
		}
		docs = strings.Split(strings.TrimPrefix(out, "---\n"), "\n---\n")
	}
	var vs []any
	for _, d := range docs {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatalf("output is not YAML (%v):\n%s", err, out)
		}
		var v any
		if err := json.Unmarshal(j, &v); err != nil {
			t.Fatal(err)
		}
		if _, ok := v.(map[string]any); !ok {
			t.Fatalf("YAML output is not a mapping:\n%s", d)
		}
		vs = append(vs, v)
	}
	return vs
}

// sluicectl's outputs (docs/operations.md): every command runs with each -o; table is the default (and
// "text", the old name, is the same); JSON and YAML parse, are objects, and carry the same
// data; each exits 0.
func TestEveryCommandWithEveryOutput(t *testing.T) {
	st := fixtureStatus(t)
	addr := startFake(t, st)
	cases := []struct {
		args   []string
		stream bool   // JSON one object per line, YAML one document per message
		table  string // a line the table holds
	}{
		{args: []string{"health", "--addr", addr}, table: "SERVING"},
		{args: []string{"config", "--addr", addr}, table: "config: epoch e1 version 7"},
		{args: []string{"config", "--addr", addr, "--watch", "--count", "1"}, stream: true, table: "version 7 complete"},
		{args: []string{"explain", "ingress", "shop/broken", "--addr", addr}, table: "ServiceNotFound"},
		{args: []string{"explain", "httproute", "shop/store", "--addr", addr}, table: "not served"},
		{args: []string{"translate", "-f", "../../examples"}, table: "shop.sluice.local"},
		{args: []string{"watch", "--addr", addr, "--until-synced"}, stream: true, table: "initial-sync-complete verified: /v1/Service=1"},
		{args: []string{"version", "--addr", addr}, table: fmt.Sprintf("server version: %s (revision %s)", version.Version, version.Rev())},
		{args: []string{"version", "--client"}, table: "client: sluicectl "},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:1], " ")+" "+strings.Join(c.args[1:2], ""), func(t *testing.T) {
			outs := map[string]string{}
			for _, o := range []string{"", "table", "text", "json", "yaml"} {
				args := c.args
				if o != "" {
					args = append(append([]string{}, c.args...), "-o", o)
				}
				code, out, errs := run(t, args...)
				if code != exitOK {
					t.Fatalf("sluicectl %v exited %d, want 0:\n%s%s", args, code, out, errs)
				}
				outs[o] = out
			}
			if outs[""] != outs["table"] || outs["text"] != outs["table"] {
				t.Errorf("the default and -o text differ from -o table:\ndefault:\n%s\ntable:\n%s\ntext:\n%s", outs[""], outs["table"], outs["text"])
			}
			if !strings.Contains(outs["table"], c.table) {
				t.Errorf("table lacks %q:\n%s", c.table, outs["table"])
			}
			if json.Valid([]byte(outs["table"])) {
				t.Errorf("the table is JSON:\n%s", outs["table"])
			}
			j := decodeJSON(t, outs["json"], c.stream)
			y := decodeYAML(t, outs["yaml"], c.stream)
			if !reflect.DeepEqual(j, y) {
				t.Errorf("-o yaml does not carry what -o json does:\njson:\n%s\nyaml:\n%s", outs["json"], outs["yaml"])
			}
		})
	}
	// Completion scripts are shell, whatever -o says; each shell's is printed.
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		for _, o := range []string{"table", "json", "yaml"} {
			if code, out, errs := run(t, "completion", sh, "-o", o); code != exitOK || !strings.Contains(out, "sluicectl") {
				t.Errorf("completion %s -o %s: exit %d:\n%s%s", sh, o, code, out, errs)
			}
		}
	}
}

// sluicectl's exit codes are 0 ok, 1 failure, 2 usage, for every command.
func TestExitCodes(t *testing.T) {
	addr := startFake(t, fixtureStatus(t))
	down := closedAddr(t)
	cases := []struct {
		args []string
		want int
	}{
		{[]string{"health", "--addr", addr}, exitOK},
		{[]string{"help"}, exitOK},
		{[]string{"--help"}, exitOK},
		{[]string{"version", "--addr", down, "--timeout", "1s"}, exitOK}, // an unreachable server is reported, not a failure
		{[]string{"explain", "ingress", "shop/theirs", "--addr", addr}, exitOK},
		{[]string{"--version"}, exitOK},
		{[]string{"translate", "-f", "../../translator/translate/testdata/nginx.yaml"}, exitOK}, // --fail-on none
		{[]string{"translate", "-f", "../../translator/translate/testdata/basic.yaml", "--fail-on", "error"}, exitOK},

		{[]string{"health", "--addr", down, "--timeout", "1s"}, exitFailure},
		{[]string{"health", "--addr", addr, "--service", "no.such.Service"}, exitFailure},
		{[]string{"config", "--addr", down, "--timeout", "1s"}, exitFailure},
		{[]string{"config", "--addr", down, "--watch"}, exitFailure},
		{[]string{"explain", "ingress", "shop/web", "--addr", down, "--timeout", "1s"}, exitFailure},
		{[]string{"watch", "--addr", down, "--connect-timeout", "0s"}, exitFailure},
		{[]string{"translate", "-f", "/no/such/dir"}, exitFailure},
		{[]string{"translate", "-f", "../../translator/translate/testdata/nginx.yaml", "--fail-on", "error"}, exitFailure},
		{[]string{"translate", "-f", "../../translator/translate/testdata/nginx.yaml", "--fail-on", "warning", "-o", "json"}, exitFailure},
		{[]string{"config", "--addr", addr, "--tls-ca", "/no/such/ca.crt"}, exitFailure},

		{nil, exitUsage},
		{[]string{"nosuch"}, exitUsage},
		{[]string{"health", "--nosuch"}, exitUsage},
		{[]string{"health", "extra-arg"}, exitUsage},
		{[]string{"config", "-o", "xml"}, exitUsage},
		{[]string{"config", "--timeout", "soon"}, exitUsage},
		{[]string{"explain"}, exitUsage},
		{[]string{"explain", "ingress"}, exitUsage},
		{[]string{"explain", "pod", "shop/web"}, exitUsage},
		{[]string{"explain", "ingress"}, exitUsage},
		{[]string{"translate"}, exitUsage},
		{[]string{"translate", "-f", "../../examples", "--fail-on", "fatal"}, exitUsage},
		{[]string{"watch", "--kinds", "Service"}, exitUsage},
		{[]string{"version", "-o", "text/plain"}, exitUsage},
		{[]string{"completion"}, exitUsage},
		{[]string{"completion", "tcsh"}, exitUsage},
		{[]string{"completion", "bash", "extra"}, exitUsage},
	}
	for _, c := range cases {
		code, out, errs := run(t, c.args...)
		if code != c.want {
			t.Errorf("sluicectl %q exited %d, want %d:\n%s%s", c.args, code, c.want, out, errs)
		}
	}
}

// sluicectl's help: every command's --help has examples, and documents the exit codes; the
// networked ones document the connection flags with an in-cluster example.
func TestEveryCommandsHelpHasExamplesAndExitCodes(t *testing.T) {
	networked := map[string]bool{"health": true, "config": true, "explain": true, "watch": true, "version": true}
	n := 0
	walk(newRoot(io.Discard, io.Discard), func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		code, out, errs := run(t, append(path, "--help")...)
		if code != exitOK {
			t.Errorf("%s --help exited %d:\n%s", c.CommandPath(), code, errs)
			return
		}
		n++
		for _, want := range []string{"Examples:", "Exit codes:", "0  success", "1  failure", "2  usage error"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help lacks %q:\n%s", c.CommandPath(), want, out)
			}
		}
		if networked[c.Name()] {
			for _, want := range []string{"--addr", "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name", "port-forward svc/sluice-translator"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s --help lacks %q:\n%s", c.CommandPath(), want, out)
				}
			}
		}
	})
	if n < 12 { // root, six commands, help, completion and its four shells
		t.Errorf("checked %d commands' help, want every one", n)
	}
}

// sluicectl explain on an Ingress with a finding shows the finding, its hosts and routes,
// the config version holding it, and which pushers applied that version; an Ingress of
// another class is not served.
func TestExplainIngressWithFinding(t *testing.T) {
	addr := startFake(t, fixtureStatus(t))

	code, out, errs := run(t, "explain", "ingress", "shop/broken", "--addr", addr, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errs)
	}
	var e explanation
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatal(err)
	}
	if !e.Served || e.Kind != "Ingress" || e.Namespace != "shop" || e.Name != "broken" {
		t.Errorf("explanation names %s %s/%s served=%v, want Ingress shop/broken served", e.Kind, e.Namespace, e.Name, e.Served)
	}
	if len(e.Findings) != 1 || e.Findings[0].Reason != "ServiceNotFound" || e.Findings[0].Severity != "ERROR" ||
		e.Findings[0].Field != "spec.rules[0].http.paths[0].backend.service.name" || !strings.Contains(e.Findings[0].Cause, "shop/does-not-exist") {
		t.Errorf("findings = %+v, want the one ServiceNotFound of spec.rules[0].http.paths[0].backend.service.name", e.Findings)
	}
	if len(e.Hosts) != 1 || e.Hosts[0].Hostname != "broken.example.com" || len(e.Hosts[0].Routes) != 1 || e.Hosts[0].Routes[0].Path != (explainedPath{Type: "PREFIX", Value: "/api"}) {
		t.Errorf("hosts = %+v, want broken.example.com with the route /api", e.Hosts)
	}
	if e.Config == nil || e.Config.Epoch != "e1" || e.Config.Version != 7 {
		t.Errorf("config = %+v, want epoch e1 version 7", e.Config)
	}
	applied := map[string]bool{}
	for _, p := range e.Pushers {
		applied[p.PusherID] = p.UpToDate
	}
	if !reflect.DeepEqual(applied, map[string]bool{"pusher-a": true, "pusher-b": false}) {
		t.Errorf("pushers applied = %v, want pusher-a (on 7) yes, pusher-b (on 6) no", applied)
	}

	_, table, _ := run(t, "explain", "ingress", "shop/broken", "--addr", addr)
	for _, want := range []string{
		"Ingress shop/broken", "served:   ours", "config:   epoch e1 version 7",
		"broken.example.com", "/api",
		"ERROR ServiceNotFound spec.rules[0].http.paths[0].backend.service.name: Service shop/does-not-exist not found",
		"pusher-a (CADDY, connected=true): applied", "pusher-b (CADDY, connected=true): not applied (has epoch e1 version 6)",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("explain's table lacks %q:\n%s", want, table)
		}
	}

	_, out, _ = run(t, "explain", "ing", "shop/theirs", "--addr", addr, "-o", "json")
	var theirs explanation
	if err := json.Unmarshal([]byte(out), &theirs); err != nil {
		t.Fatal(err)
	}
	if theirs.Served || len(theirs.Hosts) != 0 || len(theirs.Findings) != 0 {
		t.Errorf("an Ingress of another class is explained as %+v, want not served", theirs)
	}
}

// config --watch follows a complete state sent in chunks: one version, printed once it is
// whole and verified, with the number of chunks; a chunk missing is an error, not a version.
func TestConfigWatchFollowsAChunkedCompleteState(t *testing.T) {
	st := fixtureStatus(t)
	addr := startFakeTranslator(t, &fakeTranslator{st: st, chunkLimit: 400})
	code, out, errs := run(t, "config", "--addr", addr, "--watch", "--count", "1")
	if code != exitOK || !regexp.MustCompile(`version 7 complete in [2-9][0-9]* chunks, hash `).MatchString(out) {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, "config", "--addr", addr, "--watch", "--count", "1", "-o", "json")
	if code != exitOK || !strings.Contains(out, `"configStart"`) || !strings.Contains(out, `"configEnd"`) {
		t.Fatalf("-o json: exit %d, want every message of the chunked state:\n%s", code, out)
	}
	broken := startFakeTranslator(t, &fakeTranslator{st: st, chunkLimit: 400, broken: true})
	code, out, errs = run(t, "config", "--addr", broken, "--watch", "--count", "1")
	if code == exitOK || strings.Contains(out, "version 7 complete") || !strings.Contains(out+errs, "chunk 1 of version 7 where chunk 0 is due") {
		t.Fatalf("a chunk missing: exit %d:\n%s%s", code, out, errs)
	}
}

// One JSON shape per field across commands: a field name has one JSON type in every
// command's output (version, revision, counts are numbers everywhere, never protojson's
// strings), no enum value is printed with its enum's prefix (ERROR, not
// FINDING_SEVERITY_ERROR), and PEM is text, not base64.
func TestOneJSONShapePerFieldAcrossCommands(t *testing.T) {
	st := fixtureStatus(t)
	certPEM, keyPEM, err := pki.SelfSigned("tls.example.com")
	if err != nil {
		t.Fatal(err)
	}
	// A certificate in the status, as GetStatus sends it (keys removed), to see PEM printed.
	st.Current.Resources.Certificates = append(st.Current.Resources.Certificates, &configv1.Certificate{Name: "shop/tls", CertificatePem: certPEM})
	st.Current.Hash = translate.Hash(st.Current.Resources)
	addr := startFake(t, st)
	dir := t.TempDir()
	secret := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: shop}
type: kubernetes.io/tls
data: {tls.crt: %s, tls.key: %s}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: tls, namespace: shop}
spec:
  ingressClassName: sluice
  tls: [{hosts: [tls.example.com], secretName: tls}]
  rules:
  - host: tls.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
`, base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM))
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(fixtureManifests+"---\n"+secret), 0o644); err != nil {
		t.Fatal(err)
	}

	commands := [][]string{
		{"config", "--addr", addr},
		{"config", "--addr", addr, "--watch", "--count", "1"},
		{"explain", "ingress", "shop/broken", "--addr", addr},
		{"translate", "-f", dir},
		{"watch", "--addr", addr, "--until-synced"},
		{"version", "--addr", addr},
		{"health", "--addr", addr},
	}
	// Every enum prefix of both protocols.
	var prefixes []string
	for _, fd := range []protoreflect.FileDescriptor{configv1.File_sluice_config_v1_config_proto, watchv1.File_sluice_watch_v1_watch_proto, watchv1.File_sluice_watch_v1_status_proto} {
		for i := range fd.Enums().Len() {
			prefixes = append(prefixes, shortEnumPrefix(string(fd.Enums().Get(i).Name())))
		}
	}
	type seen struct{ kind, where string }
	shapes := map[string]seen{}
	pem := 0
	var walkJSON func(cmd, path string, v any)
	walkJSON = func(cmd, path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, fv := range x {
				kind := fmt.Sprintf("%T", fv)
				if fv == nil {
					continue
				}
				if s, ok := shapes[k]; ok && s.kind != kind {
					t.Errorf("field %q is %s in %s but %s in %s", k, kind, cmd+" "+path+"."+k, s.kind, s.where)
				} else if !ok {
					shapes[k] = seen{kind, cmd + " " + path + "." + k}
				}
				walkJSON(cmd, path+"."+k, fv)
			}
		case []any:
			for _, e := range x {
				walkJSON(cmd, path+"[]", e)
			}
		case string:
			for _, p := range prefixes {
				if strings.HasPrefix(x, p) {
					t.Errorf("%s %s = %q: an enum value with its prefix %s", cmd, path, x, p)
				}
			}
			if strings.HasPrefix(x, "-----BEGIN CERTIFICATE-----") {
				pem++
			}
		}
	}
	for _, args := range commands {
		code, out, errs := run(t, append(args, "-o", "json")...)
		if code != exitOK {
			t.Fatalf("sluicectl %v: exit %d:\n%s", args, code, errs)
		}
		stream := args[0] == "watch" || slices.Contains(args, "--watch")
		for _, v := range decodeJSON(t, out, stream) {
			walkJSON(strings.Join(args[:1], " "), "", v)
		}
	}
	for _, k := range []string{"version", "revision", "watcherRevision", "count"} {
		if s, ok := shapes[k]; !ok || s.kind != "float64" {
			t.Errorf("field %q: %+v, want a number", k, s)
		}
	}
	if pem < 2 { // config's certificate and translate's
		t.Errorf("%d PEM certificates printed as text, want config's and translate's", pem)
	}
}
