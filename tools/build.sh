#!/usr/bin/env bash
# Builds the pinned tools Sluice's tests and demo run (kube-apiserver, kubectl, etcd, caddy,
# helm) and its developer tools (buf, protoc plugins, staticcheck) into .tools/, one folder per
# tool keyed by its pinned version and the hash of its module files, and links the current ones
# into .tools/bin. A tool whose folder is complete is not built again.
#
# Usage: tools/build.sh [dev|kube|etcd|caddy|caddy-stock|caddy-sluicetest|helm|gateway ...]   (default: all)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${SLUICE_TOOLS_DIR:-$root/.tools}
mkdir -p "$cache/bin"

# The versions here must match the tools modules; build() checks that they do.
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
CADDY_VERSION=v2.11.9
HELM_VERSION=v4.3.2
GATEWAY_VERSION=v1.6.3

key() { # module dir, then source paths it builds from -> short hash of its go.mod, go.sum and those sources
	local dir=$1
	shift
	{
		cat "$dir/go.mod" "$dir/go.sum"
		[ $# -eq 0 ] || find "$@" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | LC_ALL=C sort | xargs cat
	} | sha256sum | cut -c1-12
}

fail() { # tool, log file
	echo "" >&2
	echo "error: building tool '$1' failed (log: $2); last lines:" >&2
	tail -n 15 "$2" | sed 's/^/    /' >&2
	echo "what to do: check that the Go module proxy is reachable (go env GOPROXY) and that" >&2
	echo "tools/$1/go.mod still pins the version above, then run 'make tools' again." >&2
	exit 1
}

# progress WHAT LOG PID: while PID runs, every 5 seconds, how long it has run, how many
# packages it compiled (the lines go build -v wrote to LOG) and the newest one.
progress() {
	local what=$1 log=$2 pid=$3 start=$SECONDS
	while kill -0 "$pid" 2>/dev/null; do
		sleep 5
		kill -0 "$pid" 2>/dev/null || break
		echo "tools: building $what: $((SECONDS - start))s, $(grep -c . "$log") packages compiled, now $(tail -n 1 "$log" | cut -c1-80)"
	done
}

# build NAME VERSION MODULE_PATH_TO_CHECK LDFLAGS PKG:BIN ...
# The module is tools/NAME unless SRC names another; SOURCES are further paths whose content
# keys the build (a tool built from the repository's own code).
build() {
	local name=$1 version=$2 modpath=$3 ldflags=$4
	shift 4
	local src=${SRC:-$root/tools/$name}
	if [ -n "$modpath" ] && ! grep -q "$modpath $version" "$src/go.mod"; then
		echo "error: ${src#$root/}/go.mod does not pin $modpath $version; update tools/build.sh or the module" >&2
		exit 1
	fi
	# shellcheck disable=SC2086 # SOURCES is a list of paths
	local dir="$cache/$name-$version-$(key "$src" ${SOURCES:-})"
	local complete=true spec
	[ -f "$dir/.complete" ] || complete=false
	for spec in "$@"; do
		[ -x "$dir/${spec##*:}" ] || complete=false
	done
	if $complete; then
		echo "tools: $name $version is current ($dir)"
	else
		echo "tools: building $name $version into $dir (on 2 cores kube-apiserver takes about 10 minutes, helm 8)"
		local start=$SECONDS log="$cache/$name-build.log"
		rm -rf "$dir" && mkdir -p "$dir"
		: >"$log"
		local spec pkg bin
		if [ -n "${ONE_BUILD:-}" ]; then
			# One go build for every main package: the packages they share (most of
			# k8s.io/kubernetes for kube-apiserver and kube-controller-manager) compile once.
			# Each binary is named after its package's last element, as SPEC's BIN must be.
			local pkgs=()
			for spec in "$@"; do pkgs+=("${spec%%:*}"); done
			(cd "$src" && CGO_ENABLED=0 go build -v -trimpath -ldflags "$ldflags" -o "$dir/" "${pkgs[@]}") >>"$log" 2>&1 &
			local pid=$!
			progress "$name" "$log" "$pid"
			wait "$pid" || fail "$name" "$log"
		else
			for spec in "$@"; do
				pkg=${spec%%:*} bin=${spec##*:}
				# -v lists each package as it is compiled; the build runs in the background while
				# progress says what it is doing every few seconds (a first build takes minutes).
				(cd "$src" && CGO_ENABLED=0 go build -v -trimpath -ldflags "$ldflags" -o "$dir/$bin" "$pkg") >>"$log" 2>&1 &
				local pid=$!
				progress "$name/$bin" "$log" "$pid"
				wait "$pid" || fail "$name" "$log"
			done
		fi
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
[ ${#targets[@]} -gt 0 ] || targets=(dev etcd caddy caddy-stock caddy-sluicetest helm gateway kube)
for t in "${targets[@]}"; do
	case $t in
	dev) build dev pinned "" "-s -w" \
		github.com/bufbuild/buf/cmd/buf:buf \
		google.golang.org/protobuf/cmd/protoc-gen-go:protoc-gen-go \
		google.golang.org/grpc/cmd/protoc-gen-go-grpc:protoc-gen-go-grpc \
		honnef.co/go/tools/cmd/staticcheck:staticcheck ;;
	# kube-controller-manager runs the workload controllers of the tests' cluster in a box
	# (internal/harness/cluster); it shares most of its packages with kube-apiserver.
	kube) ONE_BUILD=1 build kube $KUBE_VERSION k8s.io/kubernetes "$kube_ldflags" \
		k8s.io/kubernetes/cmd/kube-apiserver:kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager:kube-controller-manager \
		k8s.io/kubernetes/cmd/kubectl:kubectl ;;
	# echo-basic, the Gateway API conformance suite's backend, served by the pod runner.
	gateway) build gateway $GATEWAY_VERSION sigs.k8s.io/gateway-api/conformance "-s -w" \
		sigs.k8s.io/gateway-api/conformance/echo-basic:echo-basic ;;
	etcd) build etcd $ETCD_VERSION go.etcd.io/etcd/server/v3 "-s -w" go.etcd.io/etcd/server/v3:etcd ;;
	# Caddy with Sluice's module (pusher/caddymod), what the system runs; and stock Caddy, to
	# test the pusher's POST /load target against.
	caddy) SRC=$root/pusher/caddymod SOURCES="$root/pusher/caddymod $root/internal/contract $root/internal/parallel $root/proto/gen/sluice/config $root/go.mod $root/go.sum" \
		build caddy $CADDY_VERSION github.com/caddyserver/caddy/v2 "-s -w" ./cmd/caddy:caddy ;;
	caddy-stock) build caddy $CADDY_VERSION github.com/caddyserver/caddy/v2 "-s -w" github.com/caddyserver/caddy/v2/cmd/caddy:caddy-stock ;;
	# Caddy with the module and its test-only rule (build tag sluicetest: it refuses routes
	# the translator accepts, so the end-to-end tests can force a NACK). Never deployed.
	caddy-sluicetest) GOFLAGS="-tags=sluicetest" SRC=$root/pusher/caddymod SOURCES="$root/pusher/caddymod $root/internal/contract $root/internal/parallel $root/proto/gen/sluice/config $root/go.mod $root/go.sum" \
		build caddy-sluicetest $CADDY_VERSION github.com/caddyserver/caddy/v2 "-s -w" ./cmd/caddy:caddy-sluicetest ;;
	# Helm, to lint and render deploy/helm/sluice; its version is stamped as its release build does
	# (otherwise `helm version` and .Capabilities.HelmVersion say only v4.3).
	helm) build helm $HELM_VERSION helm.sh/helm/v4 "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
		helm.sh/helm/v4/cmd/helm:helm ;;
	*) echo "error: unknown tool '$t' (dev, kube, etcd, caddy, caddy-stock, caddy-sluicetest, helm, gateway)" >&2; exit 2 ;;
	esac
done
