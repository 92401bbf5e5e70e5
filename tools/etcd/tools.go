//go:build tools

// Package etcd pins the etcd server main package.
package etcd

import _ "go.etcd.io/etcd/server/v3"
