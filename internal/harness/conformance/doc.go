// Package conformance runs the Gateway API's own conformance suite (GATEWAY-HTTP profile, at
// the version the project pins) against Sluice on the cluster in a box: the real apiserver,
// kube-controller-manager and pod runner for the suite's echo-basic Deployments, the three
// binaries, and Caddy with Sluice's module. The suite itself is in the tools/gateway module, so
// that its dependencies stay out of the main module; the test here starts everything, runs it
// there with `go test`, and judges the ConformanceReport it writes. `make test` runs the Core
// tests and those of the Extended features Sluice declares; `make conformance` runs the same
// and writes the report to docs/conformance/.
package conformance
