#!/usr/bin/env bash
# Builds the pieces of the private single-node cluster (tools/kube_cluster.py)
# into CACHE/kube-VERSION: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy, kubectl (k8s.io/kubernetes), etcd,
# CoreDNS and the pause binary. From the Go module proxy only; cached outside
# the checkout, keyed by version, so another clone on this machine reuses it.
#   usage: tools/build-kube.sh CACHE KUBERNETES_VERSION ETCD_VERSION COREDNS_VERSION LOCAL_PATH_VERSION
set -euo pipefail
cache="$1" k8s="$2" etcd="$3" coredns="$4" local_path="$5"
out="$cache/kube-$k8s-etcd-$etcd-coredns-$coredns"
if [ -e "$out/.built" ] && [ -e "$out/local-path-provisioner-$local_path" ]; then echo "kube: cached in $out"; exit 0; fi
command -v go >/dev/null || { echo "kube: Go not found; install Go (Debian: apt-get install golang)" >&2; exit 1; }
command -v gcc >/dev/null || { echo "kube: gcc not found (the pause binary); apt-get install gcc" >&2; exit 1; }
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
build="$out.build"
rm -rf "$build" && mkdir -p "$build/bin"
started=$SECONDS
# `go get` lists every module it adds: kept in a log, shown only when it fails.
quiet() { "$@" >"$build/go.log" 2>&1 || { cat "$build/go.log" >&2; return 1; }; }
step() { echo "kube: [$(( (SECONDS - started) / 60 ))m$(( (SECONDS - started) % 60 ))s] $*"; }

step "local-path-provisioner v$local_path (about 1 min)"
mkdir -p "$build/local-path" && (cd "$build/local-path"
  go mod init mirrorstack.local/local-path >/dev/null 2>&1
  quiet go get "github.com/rancher/local-path-provisioner@v$local_path"
  go build -trimpath -ldflags "-s -w" -o "$build/bin/local-path-provisioner-$local_path" github.com/rancher/local-path-provisioner)
if [ -e "$out/.built" ]; then  # the rest is cached: add the provisioner only
  mv "$build/bin/local-path-provisioner-$local_path" "$out/" && rm -rf "$build"; step "added to $out"; exit 0
fi

step "etcd v$etcd (about 30 s)"
mkdir -p "$build/etcd" && (cd "$build/etcd"
  go mod init mirrorstack.local/etcd >/dev/null 2>&1
  quiet go get "go.etcd.io/etcd/server/v3@v$etcd"
  go build -trimpath -ldflags "-s -w" -o "$build/bin/etcd" go.etcd.io/etcd/server/v3)

step "CoreDNS v$coredns (about 2 min)"
mkdir -p "$build/coredns" && (cd "$build/coredns"
  go mod init mirrorstack.local/coredns >/dev/null 2>&1
  quiet go get "github.com/coredns/coredns@v$coredns"
  go build -trimpath -ldflags "-s -w" -o "$build/bin/coredns" github.com/coredns/coredns)

# k8s.io/kubernetes replaces its staging modules (k8s.io/api, client-go, ...) with
# folders of its own repo, absent from its module zip: point each at the served v0.x.y.
step "Kubernetes v$k8s: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl (about 5 min on 2 idle cores)"
mkdir -p "$build/kubernetes" && (cd "$build/kubernetes"
  go mod init mirrorstack.local/kubernetes >/dev/null 2>&1
  go mod download -json "k8s.io/kubernetes@v$k8s" > module.json
  dir=$(sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p' module.json)
  staging="v0.${k8s#1.}"
  replaces=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$dir/go.mod" | sort -u)
  [ -n "$replaces" ] || { echo "kube: no staging replaces found in $dir/go.mod" >&2; exit 1; }
  for m in $replaces; do go mod edit -replace="$m=$m@$staging"; done
  go mod edit -require="k8s.io/kubernetes@v$k8s"
  cmds="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
  for c in $cmds; do quiet go get "k8s.io/kubernetes/cmd/$c@v$k8s"; done
  version_flags="-X k8s.io/component-base/version.gitVersion=v$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$k8s" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
  for c in $cmds; do step "  $c"; go build -trimpath -ldflags "-s -w $version_flags" -o "$build/bin/$c" "k8s.io/kubernetes/cmd/$c"; done
  step "pause (gcc -static)"
  gcc -static -O2 -o "$build/bin/pause" "$dir/build/pause/linux/pause.c")

rm -rf "$out" && mv "$build/bin" "$out" && rm -rf "$build"
touch "$out/.built"
step "built into $out ($(du -sh "$out" | cut -f1))"
