// Command watcher lists and watches the cluster objects Sluice translates and streams them,
// ordered and revisioned, with an explicit InitialSyncComplete marker. See docs/design.md.
package main

import (
	"os"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/watcher/app"
)

func main() {
	var s app.Settings
	os.Exit(cli.Main(cli.Spec{Name: "watcher", Settings: &s, Run: s.Run}, os.Args[1:], os.Stderr))
}
