// Package e2e proves docs/design.md's reliability scenarios on the whole system: a real
// kube-apiserver and etcd, the watcher, translator and pusher as separate processes, a real
// Caddy, and backends in a network namespace. A route keeper polls Caddy during every fault
// and fails the test if a route whose objects still exist ever stops answering from its
// backend.
package e2e
