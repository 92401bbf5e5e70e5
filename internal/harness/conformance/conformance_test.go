package conformance_test

import (
	"context"
	"fmt"
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
	"github.com/sluice-io/sluice/translator/translate"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// core are the GATEWAY-HTTP profile's Core features; every other feature Sluice declares on
// its GatewayClasses (translate.SupportedFeatures) is an Extended one, whose tests must all
// pass too (docs/conformance.md says how each was decided).
var core = map[string]bool{"Gateway": true, "HTTPRoute": true, "ReferenceGrant": true}

// extended are the Extended features Sluice declares.
func extended() []string {
	var out []string
	for _, f := range translate.SupportedFeatures {
		if !core[f] {
			out = append(out, f)
		}
	}
	return out
}

// skipped are the tests left out of the run, each with the reason; a skipped Core test is a
// gap, and docs/conformance.md lists it.
var skipped = map[string]string{
	// Every Gateway of a Sluice fleet is served by the same proxies on the same addresses, so
	// two Gateways with hostname-less listeners on one port share their routes for any host;
	// this test gives two such Gateways a "/" route each and expects each address to serve its
	// own. Per-Gateway addresses need the proxies to listen on an address per Gateway and to
	// key routes by it (docs/conformance.md).
	"HTTPRouteMultipleGateways": "all Gateways share the fleet's addresses; no per-Gateway address yet",
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
	// A documentation address (RFC 5737) as every Gateway's: the suite's round tripper sends
	// what it addresses there to Caddy's listeners.
	st, err := stack.Start(ctx, stack.Config{Cluster: c, BinDir: bin, Dir: t.TempDir(), LogLevel: "info",
		TranslatorArgs: []string{"--publish-address", "192.0.2.10"}})
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
	ext := strings.Join(extended(), ",")
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
		"SLUICE_CONFORMANCE_HTTP="+st.HTTPAddr(), "SLUICE_CONFORMANCE_HTTPS="+st.HTTPSAddr(),
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
