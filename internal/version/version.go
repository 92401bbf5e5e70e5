// Package version holds what the build says about itself: the version and the source
// revision, stamped by the Makefile and the image build with -ldflags, and the Go release it
// was built with. Every process prints them for --version, logs them at start and exposes
// them as sluice_build_info.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the software version of this build ("dev" when not stamped).
var Version = "dev"

// Revision is the source revision of this build, stamped with -ldflags; when not stamped it
// is the VCS revision the go command recorded, or "unknown".
var Revision = ""

// GoVersion is the Go release the binary was built with.
func GoVersion() string { return runtime.Version() }

// Rev returns Revision, or the go command's vcs.revision (with "-dirty" for a modified
// tree), or "unknown".
func Rev() string {
	if Revision != "" {
		return Revision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// String is the one-line answer to --version of the program name.
func String(name string) string {
	return fmt.Sprintf("%s %s (revision %s, %s)", name, Version, Rev(), GoVersion())
}
