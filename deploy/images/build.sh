#!/usr/bin/env bash
# Builds the images (sluice/<component>:TAG) from static binaries: Sluice's own, and the
# pinned tools from .tools/bin. Usage: deploy/images/build.sh [BASE] [TAG]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
base=${1:-gcr.io/distroless/static-debian12:nonroot}
tag=${2:-dev}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cd "$root"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ctx/" ./watcher ./translator ./pusher ./cmd/backend
for t in caddy etcd kube-apiserver; do cp -L ".tools/bin/$t" "$ctx/$t"; done
for c in watcher translator pusher caddy etcd kube-apiserver backend; do
	docker build -q --build-arg "BASE=$base" -t "sluice/$c:$tag" -f "deploy/images/$c/Dockerfile" "$ctx" >/dev/null
	echo "images: built sluice/$c:$tag on $base"
done
