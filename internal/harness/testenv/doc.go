// Package testenv starts the real things Sluice's tests run against, on this machine: etcd and
// kube-apiserver on loopback (one per test package, shared through RunMain), and on demand the
// rest of a cluster in a box (kube-controller-manager, a Ready Node and the pod runner, so that
// Deployments become Pods and EndpointSlices; see StartWorkloads), restricted
// identities with exactly the RBAC rules a test names, a cuttable TCP proxy, Caddy with its
// admin API, HTTP backends in a network namespace (the apiserver refuses loopback endpoint
// addresses), the Sluice binaries as separate processes, and a fresh namespace per test. It
// cleans up every process it started, also when a test fails or times out.
//
// The tool binaries come from `make tools` (tools/build.sh); the helper finds them through
// $SLUICE_TOOLS_BIN or the repository's .tools/bin, and fails with what to run when they are
// missing.
package testenv
