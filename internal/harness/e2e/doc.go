// Package e2e proves docs/design.md's reliability scenarios on the whole system: a real
// kube-apiserver and etcd, the watcher, translator and pusher as separate processes, a real
// Caddy, and backends that are Deployments run by the cluster in a box (kube-controller-
// manager and the pod runner), so their EndpointSlices are the real controller's. A route
// keeper polls Caddy during every fault and fails the test if a route whose objects still
// exist ever stops answering from its backend; a request keeper counts every request lost
// while a Deployment rolls.
package e2e
