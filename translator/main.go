// Command translator turns the watcher's stream into complete, versioned proxy configs and
// serves them to pushers, never before the watcher's InitialSyncComplete. See docs/design.md.
package main

import (
	"os"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/translator/app"
)

func main() {
	var s app.Settings
	os.Exit(cli.Main(cli.Spec{Name: "translator", Settings: &s, Run: s.Run}, os.Args[1:], os.Stderr))
}
