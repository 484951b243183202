#!/usr/bin/env bash
# Builds the Pulumi kubernetes provider (pulumi-resource-kubernetes) from the
# Go module proxy, for machines that cannot reach get.pulumi.com: the provider
# module at MODULE_VERSION (the commit release VERSION was tagged from), its
# SDK module at VERSION, stamped VERSION. Cached in CACHE/kubernetes-provider-VERSION
# (outside the checkout, keyed by version); prints the binary's path last.
#   usage: tools/build-kube-provider.sh CACHE VERSION MODULE_VERSION
set -euo pipefail
cache="$1" version="$2" module_version="$3"
out="$cache/kubernetes-provider-$version"
binary="$out/pulumi-resource-kubernetes"
if [ -e "$out/.built" ]; then echo "kubernetes provider: cached in $out" >&2; echo "$binary"; exit 0; fi
command -v go >/dev/null || { echo "kubernetes provider: Go not found; install Go (Debian: apt-get install golang)" >&2; exit 1; }
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
provider=github.com/pulumi/pulumi-kubernetes/provider/v4
sdk=github.com/pulumi/pulumi-kubernetes/sdk/v4
build="$out.build"
rm -rf "$build" && mkdir -p "$build"
echo "kubernetes provider: building v$version from $provider@$module_version (about 13 min on 2 cores, then cached)" >&2
dir=$(go mod download -json "$provider@$module_version" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
cp -r "$dir" "$build/src" && chmod -R u+w "$build/src"
# Its go.mod points the SDK at ../sdk, which its module zip does not hold: use the served release.
(cd "$build/src"
  go mod edit -dropreplace="$sdk" -require="$sdk@v$version"
  go mod download "$sdk@v$version"
  # The release's schema, stamped with its version, is embedded: made by the module's own generator.
  (cd cmd/pulumi-resource-kubernetes && VERSION="$version" go run generate.go >&2)
  (while sleep 60; do echo "kubernetes provider: still compiling ($(date +%H:%M))" >&2; done) & ticker=$!
  trap 'kill $ticker 2>/dev/null' EXIT
  go build -trimpath -ldflags "-s -w -X $provider/pkg/version.Version=v$version" \
    -o "$build/pulumi-resource-kubernetes" ./cmd/pulumi-resource-kubernetes >&2)
mkdir -p "$out" && mv "$build/pulumi-resource-kubernetes" "$binary" && rm -rf "$build"
touch "$out/.built"
echo "kubernetes provider: built $binary ($(du -h "$binary" | cut -f1))" >&2
echo "$binary"
