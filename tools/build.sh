#!/usr/bin/env bash
# Builds the pinned tools Sluice's tests and demo run (kube-apiserver, kubectl, etcd, caddy) and
# its developer tools (buf, protoc plugins, staticcheck) into .tools/, one folder per tool keyed
# by its pinned version and the hash of its module files, and links the current ones into
# .tools/bin. A tool whose folder is complete is not built again.
#
# Usage: tools/build.sh [dev|kube|etcd|caddy ...]   (default: all)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${SLUICE_TOOLS_DIR:-$root/.tools}
mkdir -p "$cache/bin"

# The versions here must match the tools modules; build() checks that they do.
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
CADDY_VERSION=v2.11.9

key() { # module dir -> short hash of its go.mod and go.sum
	cat "$root/tools/$1/go.mod" "$root/tools/$1/go.sum" | sha256sum | cut -c1-12
}

fail() { # tool, log file
	echo "" >&2
	echo "error: building tool '$1' failed (log: $2); last lines:" >&2
	tail -n 15 "$2" | sed 's/^/    /' >&2
	echo "what to do: check that the Go module proxy is reachable (go env GOPROXY) and that" >&2
	echo "tools/$1/go.mod still pins the version above, then run 'make tools' again." >&2
	exit 1
}

# build NAME VERSION MODULE_PATH_TO_CHECK LDFLAGS PKG:BIN ...
build() {
	local name=$1 version=$2 modpath=$3 ldflags=$4
	shift 4
	if [ -n "$modpath" ] && ! grep -q "$modpath $version" "$root/tools/$name/go.mod"; then
		echo "error: tools/$name/go.mod does not pin $modpath $version; update tools/build.sh or the module" >&2
		exit 1
	fi
	local dir="$cache/$name-$version-$(key "$name")"
	if [ -f "$dir/.complete" ]; then
		echo "tools: $name $version is current ($dir)"
	else
		echo "tools: building $name $version into $dir (kube-apiserver takes about 10 minutes on 2 cores)"
		local start=$SECONDS log="$cache/$name-build.log"
		rm -rf "$dir" && mkdir -p "$dir"
		: >"$log"
		local spec pkg bin
		for spec in "$@"; do
			pkg=${spec%%:*} bin=${spec##*:}
			(cd "$root/tools/$name" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$bin" "$pkg") >>"$log" 2>&1 || fail "$name" "$log"
		done
		touch "$dir/.complete"
		echo "tools: built $name in $((SECONDS - start))s"
	fi
	local spec
	for spec in "$@"; do
		ln -sfn "$dir/${spec##*:}" "$cache/bin/${spec##*:}"
	done
}

kube_ldflags="-s -w"
for kv in gitVersion=$KUBE_VERSION gitMajor=1 gitMinor=37 gitTreeState=clean gitCommit=release-$KUBE_VERSION buildDate=1970-01-01T00:00:00Z; do
	kube_ldflags+=" -X k8s.io/component-base/version.$kv"
done

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(dev etcd caddy kube)
for t in "${targets[@]}"; do
	case $t in
	dev) build dev pinned "" "-s -w" \
		github.com/bufbuild/buf/cmd/buf:buf \
		google.golang.org/protobuf/cmd/protoc-gen-go:protoc-gen-go \
		google.golang.org/grpc/cmd/protoc-gen-go-grpc:protoc-gen-go-grpc \
		honnef.co/go/tools/cmd/staticcheck:staticcheck ;;
	kube) build kube $KUBE_VERSION k8s.io/kubernetes "$kube_ldflags" \
		k8s.io/kubernetes/cmd/kube-apiserver:kube-apiserver \
		k8s.io/kubernetes/cmd/kubectl:kubectl ;;
	etcd) build etcd $ETCD_VERSION go.etcd.io/etcd/server/v3 "-s -w" go.etcd.io/etcd/server/v3:etcd ;;
	caddy) build caddy $CADDY_VERSION github.com/caddyserver/caddy/v2 "-s -w" github.com/caddyserver/caddy/v2/cmd/caddy:caddy ;;
	*) echo "error: unknown tool '$t' (dev, kube, etcd, caddy)" >&2; exit 2 ;;
	esac
done
