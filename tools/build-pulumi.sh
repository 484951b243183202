#!/usr/bin/env bash
# Provides the Pulumi engine in BIN_DIR: `pulumi` at VERSION, the Python
# language host, and the two scripts the host runs (program exec, dynamic
# providers). Uses a `pulumi` of VERSION found on PATH; otherwise builds from
# the Go module proxy through the wrapper modules in tools/pulumi/.
#   usage: tools/build-pulumi.sh VERSION BIN_DIR BUILD_DIR
set -euo pipefail
version="$1" bin="$2" build="$3"
here=$(cd "$(dirname "$0")" && pwd)
version_var=github.com/pulumi/pulumi/sdk/v3/go/common/version.Version
mkdir -p "$bin" "$build"

found=$(PATH=$(echo "$PATH" | tr ':' '\n' | grep -vxF "$bin" | paste -sd: -) command -v pulumi || true)
if [ -n "$found" ] && [ "$("$found" version 2>/dev/null)" = "v$version" ]; then
  echo "engine: using $found (v$version)"
  dir=$(dirname "$(readlink -f "$found")")
  for f in "$dir"/pulumi "$dir"/pulumi-language-python*; do
    [ -e "$f" ] && ln -sf "$f" "$bin/"
  done
  [ -e "$bin/pulumi-language-python" ] && [ -e "$bin/pulumi-language-python-exec" ] && exit 0
fi

# Built once per machine: kept in the cache (MIRRORSTACK_CACHE, as the kube pieces), keyed by the
# version and the wrapper modules, so a fresh clone copies it (~1 s) instead of linking it again (~25 s).
key=$(cat "$here/build-pulumi.sh" "$here"/pulumi/*/go.mod "$here"/pulumi/*/tools.go 2>/dev/null | sha256sum | cut -c1-12)
cache="${MIRRORSTACK_CACHE:-$HOME/.cache/mirrorstack}/pulumi-$version-$key"
files="pulumi pulumi-language-python pulumi-language-python-exec pulumi-resource-pulumi-python"
if (cd "$cache" 2>/dev/null && ls $files >/dev/null 2>&1); then
  echo "engine: pulumi v$version cached in $cache"
  for f in $files; do cp -p "$cache/$f" "$bin/$f"; done
  exit 0
fi

command -v go >/dev/null || { echo "engine: Go not found; install Go (Debian: apt-get install golang) or put pulumi v$version on PATH" >&2; exit 1; }
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

echo "engine: building pulumi v$version from Go modules (first build ~7 min on 2 cores, then cached)"
rm -rf "$build/cli" && cp -r "$here/pulumi/cli" "$build/cli"
(cd "$build/cli"
 go mod edit -require="github.com/pulumi/pulumi/pkg/v3@v$version" -require="github.com/pulumi/pulumi/sdk/v3@v$version"
 go mod tidy
 GOBIN="$bin" go install -ldflags "-s -w -X $version_var=v$version" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)

echo "engine: building pulumi-language-python"
rm -rf "$build/langhost" && cp -r "$here/pulumi/langhost" "$build/langhost"
(cd "$build/langhost"
 host_version=$(go list -m -f '{{.Version}}' github.com/pulumi/pulumi/sdk/v3)
 go mod tidy
 GOBIN="$bin" go install -ldflags "-s -w -X $version_var=$host_version" github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python)

# The scripts come from the sdk/v3 module of the pinned release itself.
sdk=$(cd "$build/cli" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$sdk/python/dist/pulumi-resource-pulumi-python" "$bin/"
"$bin/pulumi" version
mkdir -p "$cache.tmp" && for f in $files; do cp -p "$bin/$f" "$cache.tmp/$f"; done
rm -rf "$cache" && mv "$cache.tmp" "$cache"
