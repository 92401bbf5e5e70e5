// Command pusher applies the translator's configs to a proxy (Caddy through its admin API),
// and nothing before the InitialSyncComplete of its current stream. See docs/design.md.
package main

import (
	"os"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/pusher/app"
)

func main() {
	var s app.Settings
	os.Exit(cli.Main(cli.Spec{Name: "pusher", Settings: &s, Run: s.Run}, os.Args[1:], os.Stderr))
}
