package conformance_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/pusher/caddy"
	"github.com/sluice-io/sluice/translator/translate"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// core are the GATEWAY-HTTP profile's Core features; every other feature Sluice declares on
// its GatewayClasses (translate.Features) is an Extended one, whose tests must all pass too
// (docs/conformance.md says how each was decided).
var core = map[string]bool{"Gateway": true, "HTTPRoute": true, "ReferenceGrant": true}

// extended are the Extended features the translator declares with the fleet's settings.
func extended(opts translate.Options) []string {
	var out []string
	for _, f := range translate.Features(opts) {
		if !core[f] {
			out = append(out, f)
		}
	}
	return out
}

// skipped are the tests left out of the run, each with the reason; a skipped Core test is a
// gap, and docs/conformance.md lists it.
var skipped = map[string]string{}

// The fleet the suite runs against (docs/design.md, "Gateway addresses and ports"): a pool of
// documentation addresses (RFC 5737), one per Gateway, on the main ports and the further
// ones the suite's Gateways use. Every address and port is a listener of its own in Caddy,
// on a loopback port; the suite's round tripper sends what it addresses to ADDRESS:PORT
// there, as a Service in front of the fleet would.
const (
	sharedAddress   = "192.0.2.10" // every Ingress's (none in this suite)
	poolFirst       = 21           // 192.0.2.21 ...
	poolSize        = 16           // more than the suite's Gateways at any time
	unusableAddress = "198.51.100.1"
	// reservedAddress is the one GatewayStaticAddresses asks for: reserved, so that no
	// Gateway of another test holds it by chance.
	reservedAddress = "192.0.2.40"
)

var furtherPorts = []struct {
	port  int
	https bool
}{{8080, false}, {8090, false}, {8443, true}}

// fleet returns the translator's and the pusher's arguments for the pool and the further
// ports, the suite's map of ADDRESS:PORT to the loopback address that serves it, and the
// translator's options that those arguments give (for the features it declares).
func fleet(t *testing.T) (translatorArgs, pusherArgs []string, listeners map[string]string, opts translate.Options) {
	t.Helper()
	ports := append([]struct {
		port  int
		https bool
	}{{80, false}, {443, true}}, furtherPorts...)
	var portFlags []string
	for _, p := range furtherPorts {
		portFlags = append(portFlags, fmt.Sprintf("%d/%s", p.port, map[bool]string{false: "HTTP", true: "HTTPS"}[p.https]))
		opts.GatewayPorts = append(opts.GatewayPorts, translate.GatewayPort{Port: int32(p.port), HTTPS: p.https})
	}
	translatorArgs = []string{"--publish-address", sharedAddress, "--gateway-port", strings.Join(portFlags, ",")}
	listeners = map[string]string{}
	binds := testenv.Addrs(t, (poolSize+1)*len(ports))
	for i := range poolSize + 1 {
		addr := fmt.Sprintf("192.0.2.%d", poolFirst+i)
		if i == poolSize {
			addr = reservedAddress
			translatorArgs = append(translatorArgs, "--gateway-reserved-address", addr)
			opts.GatewayReservedAddresses = append(opts.GatewayReservedAddresses, addr)
		} else {
			translatorArgs = append(translatorArgs, "--gateway-address", addr)
			opts.GatewayAddresses = append(opts.GatewayAddresses, addr)
		}
		for j, p := range ports {
			name := net.JoinHostPort(addr, fmt.Sprint(p.port))
			bind := binds[i*len(ports)+j]
			listeners[name] = bind
			pusherArgs = append(pusherArgs, "--proxy-listener", caddy.Listener{Name: name, HTTPS: p.https, Listen: bind}.Flag())
		}
	}
	return translatorArgs, pusherArgs, listeners, opts
}

// report is the part of the suite's ConformanceReport this test judges.
type report struct {
	GatewayAPIVersion string `json:"gatewayAPIVersion"`
	Profiles          []struct {
		Name string `json:"name"`
		Core struct {
			Result     string `json:"result"`
			Statistics struct {
				Passed, Skipped, Failed int
			} `json:"statistics"`
			SkippedTests []string `json:"skippedTests"`
			FailedTests  []string `json:"failedTests"`
		} `json:"core"`
		Extended *struct {
			Result     string `json:"result"`
			Statistics struct {
				Passed, Skipped, Failed int
			} `json:"statistics"`
			SkippedTests        []string `json:"skippedTests"`
			FailedTests         []string `json:"failedTests"`
			SupportedFeatures   []string `json:"supportedFeatures"`
			UnsupportedFeatures []string `json:"unsupportedFeatures"`
		} `json:"extended"`
	} `json:"profiles"`
}

// TestGatewayAPIConformance runs the suite (Core, and the Extended features Sluice declares)
// against the whole system and fails on any failed test and on any skipped test without its
// reason in skipped. With SLUICE_CONFORMANCE_OUT set (make conformance) it copies the report
// there;
// SLUICE_CONFORMANCE_RUN_TEST runs one test (by its short name), for a developer.
func TestGatewayAPIConformance(t *testing.T) {
	ctx := context.Background()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := testenv.StartCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	c.Workloads(t)
	if err := c.InstallGatewayAPI(ctx); err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	translatorArgs, pusherArgs, listeners, fleetOpts := fleet(t)
	st, err := stack.Start(ctx, stack.Config{Cluster: c, BinDir: bin, Dir: t.TempDir(), LogLevel: "info",
		TranslatorArgs: translatorArgs, PusherArgs: pusherArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stack logs:\n%s", st.Logs(60))
		}
		st.Stop()
	})
	if err := applyClass(ctx, c, root); err != nil {
		t.Fatal(err)
	}

	out := os.Getenv("SLUICE_CONFORMANCE_OUT")
	// The declared Extended features run in make test too: the whole suite takes well under
	// a minute here, and a declared feature that stops passing must fail CI.
	ext := strings.Join(extended(fleetOpts), ",")
	var skip []string
	for name := range skipped {
		skip = append(skip, name)
	}
	sort.Strings(skip)
	reportPath := filepath.Join(t.TempDir(), "report.yaml")
	logPath := filepath.Join(t.TempDir(), "suite.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("go", "test", "-count=1", "-timeout=50m", "-run", "^TestSluiceConformance$", "-v", ".")
	cmd.Dir = filepath.Join(root, "tools", "gateway")
	cmd.Env = append(os.Environ(),
		"SLUICE_CONFORMANCE_KUBECONFIG="+c.AdminKubeconfig,
		"SLUICE_CONFORMANCE_LISTENERS="+listenerList(listeners),
		"SLUICE_CONFORMANCE_USABLE_ADDRESS="+reservedAddress,
		"SLUICE_CONFORMANCE_UNUSABLE_ADDRESS="+unusableAddress,
		"SLUICE_CONFORMANCE_GATEWAY_CLASS=sluice",
		"SLUICE_CONFORMANCE_EXTENDED="+ext,
		"SLUICE_CONFORMANCE_SKIP="+strings.Join(skip, ","),
		"SLUICE_CONFORMANCE_RUN_TEST="+os.Getenv("SLUICE_CONFORMANCE_RUN_TEST"),
		"SLUICE_CONFORMANCE_REPORT="+reportPath,
		"SLUICE_CONFORMANCE_VERSION="+version(root),
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("the suite ran for %s (its log: %s)", time.Since(start).Round(time.Second), logPath)
	raw, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatalf("the suite wrote no report (%v; run: %v); its log ends:\n%s", err, runErr, tail(logPath, 80))
	}
	var rep report
	if err := yaml.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("the suite's report: %v", err)
	}
	if out != "" {
		name := fmt.Sprintf("sluice-%s-gateway-http-report.yaml", rep.GatewayAPIVersion)
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", filepath.Join(out, name))
	}
	if len(rep.Profiles) != 1 {
		// No profile: the suite's set up failed (a base Gateway never Accepted and Programmed,
		// a Pod never Ready), and its log says which.
		t.Fatalf("the report has %d profiles, want GATEWAY-HTTP alone:\n%s\nthe suite's log ends:\n%s", len(rep.Profiles), raw, tail(logPath, 60))
	}
	p := rep.Profiles[0]
	t.Logf("%s core: %s, %d passed, %d skipped, %d failed", p.Name, p.Core.Result, p.Core.Statistics.Passed, p.Core.Statistics.Skipped, p.Core.Statistics.Failed)
	if len(p.Core.FailedTests) > 0 {
		t.Errorf("core tests failed: %v", p.Core.FailedTests)
	}
	for _, s := range p.Core.SkippedTests {
		if _, ok := skipped[s]; !ok && os.Getenv("SLUICE_CONFORMANCE_RUN_TEST") == "" {
			t.Errorf("core test %s was skipped without a reason in this test's skipped list", s)
		}
	}
	if e := p.Extended; e != nil {
		t.Logf("%s extended: %s, %d passed, %d skipped, %d failed; supported %v", p.Name, e.Result, e.Statistics.Passed, e.Statistics.Skipped, e.Statistics.Failed, e.SupportedFeatures)
		if len(e.FailedTests) > 0 {
			t.Errorf("extended tests of declared features failed: %v", e.FailedTests)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Errorf("the suite failed (%v) though its report shows no failure; its log ends:\n%s", runErr, tail(logPath, 80))
	}
	if t.Failed() {
		t.Logf("the suite's log ends:\n%s", tail(logPath, 150))
	}
}

// listenerList is the suite's form of the listeners: ADDRESS:PORT=BIND, comma-separated.
func listenerList(m map[string]string) string {
	var out []string
	for name, bind := range m {
		out = append(out, name+"="+bind)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// applyClass creates the GatewayClass the suite runs against, Sluice's.
func applyClass(ctx context.Context, c *testenv.Cluster, root string) error {
	kubectl, err := testenv.ToolPath("kubectl")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.AdminKubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader("apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: sluice}\nspec: {controllerName: sluice.io/gateway-controller}\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apply the GatewayClass: %v: %s", err, out)
	}
	return nil
}

// version is what the report names as Sluice's version: the repository's description.
func version(root string) string {
	cmd := exec.Command("git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
		return strings.TrimSpace(string(out))
	}
	return "dev"
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
