// Command caddy is Caddy (pinned in this module's go.mod) with its standard modules and
// Sluice's module: the data plane `make build` builds as bin/caddy and the images ship.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/sluice-io/sluice/pusher/caddymod"
)

func main() { caddycmd.Main() }
