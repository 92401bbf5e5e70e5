// Command watcher lists and watches the cluster objects Sluice translates and streams them,
// ordered and revisioned, with an explicit InitialSyncComplete marker. See docs/design.md.
package main

import (
	"os"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/watcher/app"
)

func main() {
	// What the Pod tells the watcher (host name, $POD_NAMESPACE, $POD_IP) is read here, once,
	// so that the settings' defaults and their validation read no environment.
	s := app.Settings{Env: app.EnvFromOS()}
	os.Exit(cli.Main(cli.Spec{Name: "watcher", Settings: &s, Run: s.Run}, os.Args[1:], os.Stderr))
}
