//go:build tools

// Package kube pins the kube-apiserver, kube-controller-manager and kubectl main packages so
// that `go mod tidy` keeps their dependencies.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
