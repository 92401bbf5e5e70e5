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
# The binaries and the images say which build they are: --version, sluice_build_info and the
# OCI labels org.opencontainers.image.version and .revision.
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=${REVISION:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
pkg=github.com/sluice-io/sluice/internal/version
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X $pkg.Version=$version -X $pkg.Revision=$revision" -o "$ctx/" ./watcher ./translator ./pusher ./cmd/backend
for t in caddy etcd kube-apiserver; do cp -L ".tools/bin/$t" "$ctx/$t"; done
for c in watcher translator pusher caddy etcd kube-apiserver backend; do
	docker build -q --build-arg "BASE=$base" --label "org.opencontainers.image.version=$version" --label "org.opencontainers.image.revision=$revision" --label "org.opencontainers.image.source=https://github.com/sluice-io/sluice" --label "org.opencontainers.image.licenses=Apache-2.0" -t "sluice/$c:$tag" -f "deploy/images/$c/Dockerfile" "$ctx" >/dev/null
	echo "images: built sluice/$c:$tag on $base"
done
