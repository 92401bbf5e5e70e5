//go:build tools

// Package caddy pins Caddy's standard main package.
package caddy

import _ "github.com/caddyserver/caddy/v2/cmd/caddy"
