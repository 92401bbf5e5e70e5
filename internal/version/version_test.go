package version

import (
	"strings"
	"testing"
)

// --version names the program, the stamped version and revision, and the Go release.
func TestStringNamesVersionRevisionAndGo(t *testing.T) {
	oldV, oldR := Version, Revision
	t.Cleanup(func() { Version, Revision = oldV, oldR })
	Version, Revision = "v1.2.3", "abc123"
	got := String("watcher")
	for _, want := range []string{"watcher", "v1.2.3", "revision abc123", GoVersion()} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, want it to contain %q", got, want)
		}
	}
	Revision = ""
	if Rev() == "" {
		t.Error("Rev() is empty without a stamp: want the VCS revision or \"unknown\"")
	}
}
