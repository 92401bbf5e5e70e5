package smoke_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// docs/operations.md lists every flag of every binary and every metric the code defines, so
// that operators can trust it.
func TestOperationsDocListsEveryFlagAndMetric(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc := testenv.Doc(t, "operations.md")
	flagRE := regexp.MustCompile(`(?m)^\s+(--[a-z0-9-]+)`)
	for _, bin := range []string{"watcher", "translator", "pusher"} {
		path, err := testenv.Binary(bin)
		if err != nil {
			t.Fatal(err)
		}
		p, err := testenv.StartProcess(testenv.ProcessConfig{Name: bin, Path: path, Args: []string{"--help"}, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = p.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		flags := flagRE.FindAllStringSubmatch(p.Logs(), -1)
		if len(flags) < 5 {
			t.Fatalf("%s --help lists %d flags:\n%s", bin, len(flags), p.Logs())
		}
		for _, f := range flags {
			if !strings.Contains(doc, "`"+f[1]+"`") {
				t.Errorf("docs/operations.md does not document %s %s", bin, f[1])
			}
		}
	}
	metricRE := regexp.MustCompile(`Name: "(sluice_[a-z_]+)"`)
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "/tools/") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricRE.FindAllStringSubmatch(string(src), -1) {
			n++
			if !strings.Contains(doc, "`"+m[1]) {
				t.Errorf("docs/operations.md does not document the metric %s (%s)", m[1], path)
			}
		}
		return nil
	})
	if err != nil || n < 20 {
		t.Fatalf("found %d metrics: %v", n, err)
	}
}

// sluicectl translate checks manifests offline: the examples translate, and the broken one
// is reported with its object, field and cause.
func TestSluicectlTranslateExamples(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.Binary("sluicectl")
	if err != nil {
		t.Fatal(err)
	}
	p, err := testenv.StartProcess(testenv.ProcessConfig{Name: "sluicectl", Path: bin, Dir: t.TempDir(), Args: []string{"translate", "-f", filepath.Join(root, "examples")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("exit %d %v:\n%s", code, err, p.Logs())
	}
	out := p.Logs()
	for _, want := range []string{
		"shop.sluice.local", "EXACT   /healthz", "*.apps.sluice.local",
		"ERROR Ingress demo/broken spec.rules[0].http.paths[0].backend.service.name: Service demo/does-not-exist not found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Every object of examples/ is translator input, the Namespace too (its labels decide
	// which Gateway listeners with a namespace selector admit its routes).
	if strings.Contains(out, "skipped: ") {
		t.Errorf("sluicectl skipped part of examples/:\n%s", out)
	}
}
