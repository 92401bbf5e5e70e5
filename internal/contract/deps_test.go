package contract

import (
	"os/exec"
	"strings"
	"testing"
)

// docs/design.md, "Components" and "The house": the processes share rules only through this
// package and the protocol; the watcher and the pusher never link the translator, nor the
// translator them. (Tools such as sluicectl may: `sluicectl translate` is the translator,
// offline.) Nothing that ships (the three processes, sluicectl, the certificate generator,
// the test backend) links the test harness or the testing package; only the harness's own
// drivers (`make demo`, `make bench`) do. The public client package and its examples link
// the ground floor only.
func TestProcessesShareRulesOnlyThroughTheContract(t *testing.T) {
	const mod = "github.com/sluice-io/sluice/"
	harness := mod + "internal/harness"
	cases := []struct {
		pkgs      string
		forbidden []string
	}{
		{"../../watcher/...", []string{mod + "translator", mod + "pusher"}},
		{"../../pusher/...", []string{mod + "translator", mod + "watcher"}},
		{"../../translator/...", []string{mod + "watcher", mod + "pusher"}},
		{"../../watcher", []string{harness, "testing"}},
		{"../../translator", []string{harness, "testing"}},
		{"../../pusher", []string{harness, "testing"}},
		{"../../cmd/sluicectl", []string{harness, "testing"}},
		{"../../cmd/certs", []string{harness, "testing"}},
		{"../../cmd/backend", []string{harness, "testing"}},
		{"../../internal/contract", []string{mod + "watcher", mod + "translator", mod + "pusher", harness}},
		// The public client follows both streams with the processes' own checks, from the
		// ground floor only, so that a program importing it links no process.
		{"../../client", []string{mod + "watcher", mod + "translator", mod + "pusher", mod + "cmd", harness, "testing"}},
		{"../../examples/...", []string{mod + "watcher", mod + "translator", mod + "pusher", mod + "cmd", harness, "testing"}},
	}
	// The ground floor: every shared package under internal/ (not the harness) links none of
	// the processes, the commands or the harness.
	out, err := exec.Command("go", "list", "../../internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list ../../internal/...: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, harness) {
			cases = append(cases, struct {
				pkgs      string
				forbidden []string
			}{"../../" + strings.TrimPrefix(p, mod), []string{mod + "watcher", mod + "translator", mod + "pusher", mod + "cmd", harness}})
		}
	}
	for _, c := range cases {
		out, err := exec.Command("go", "list", "-deps", c.pkgs).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", c.pkgs, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range c.forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s links %s, which it may not (docs/design.md, \"The house\")", c.pkgs, dep)
				}
			}
		}
	}
}

// docs/design.md, "Cold start": the translator and the pusher link only the API groups they
// read. client-go's scheme of every group (and its typed clients, which import it) was
// linked and registered at start, most of a translator's binary and of its resident size
// when idle.
func TestTranslatorAndPusherLinkOnlyTheAPIGroupsTheyRead(t *testing.T) {
	read := map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/discovery/v1": true, "k8s.io/api/networking/v1": true}
	for _, pkgs := range []string{"../../translator", "../../pusher"} {
		out, err := exec.Command("go", "list", "-deps", pkgs).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkgs, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "k8s.io/client-go/kubernetes") || strings.HasPrefix(dep, "k8s.io/api/") && !read[dep] {
				t.Errorf("%s links %s, an API group (or client) it does not read", pkgs, dep)
			}
		}
	}
}

// docs/design.md, "Cold start": the watcher builds only the typed clients of the API groups it
// calls. client-go's clientset and informer factory name every group's client and informer,
// so calling either linked them all (a third of the watcher's code and read-only data).
// The packages stay in the import graph (the dynamic informer imports the factory's
// package for a type), so the linked binary is what is checked.
func TestWatcherLinksOnlyTheAPIGroupClientsItCalls(t *testing.T) {
	bin := t.TempDir() + "/watcher"
	if out, err := exec.Command("go", "build", "-o", bin, "../../watcher").CombinedOutput(); err != nil {
		t.Fatalf("go build ../../watcher: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	forbidden := []string{"k8s.io/client-go/kubernetes.NewForConfig", "k8s.io/client-go/informers.NewSharedInformerFactory",
		"k8s.io/client-go/kubernetes/typed/apps/", "k8s.io/client-go/informers/apps/", "k8s.io/client-go/applyconfigurations/apps/"}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		sym := f[len(f)-1]
		for _, p := range forbidden {
			if strings.HasPrefix(sym, p) && !seen[p] {
				seen[p] = true
				t.Errorf("the watcher links %s (%s): client-go's clientset or informer factory is called", p, sym)
			}
		}
	}
	if !strings.Contains(string(out), "k8s.io/client-go/kubernetes/typed/networking/v1.NewForConfigAndClient") {
		t.Error("the watcher does not link the networking/v1 client it reads Ingresses with: the check looks at the wrong binary")
	}
}
