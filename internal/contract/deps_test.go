package contract

import (
	"os/exec"
	"strings"
	"testing"
)

// docs/design.md, "Components": the processes share rules only through this package and the
// protocol; the watcher and the pusher never link the translator, nor the translator them.
// (Tools such as sluicectl may: `sluicectl translate` is the translator, offline.)
func TestProcessesShareRulesOnlyThroughTheContract(t *testing.T) {
	const mod = "github.com/sluice-io/sluice/"
	for _, c := range []struct {
		pkgs      string
		forbidden []string
	}{
		{"../../watcher/...", []string{mod + "translator", mod + "pusher"}},
		{"../../pusher/...", []string{mod + "translator", mod + "watcher"}},
		{"../../translator/...", []string{mod + "watcher", mod + "pusher"}},
	} {
		out, err := exec.Command("go", "list", "-deps", c.pkgs).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", c.pkgs, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range c.forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s links %s: what the processes share belongs in internal/contract", c.pkgs, dep)
				}
			}
		}
	}
}
