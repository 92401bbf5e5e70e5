//go:build tools

// Package gateway pins the Gateway API conformance module: its echo-basic server is the
// image the cluster in a box's pod runner serves for the suite's and the tests' backends.
package gateway

import (
	_ "sigs.k8s.io/gateway-api/conformance/echo-basic"
)
