#!/usr/bin/env bash
# `make kube`: what the private cluster runs from Debian's packages, installed
# only when missing: containerd and runc (its own containerd instance, never
# Docker's), the CNI plugins (bridge, host-local, portmap, loopback), iptables, and
# busybox-static (the shell of the volume provisioner's helper pods).
set -euo pipefail
fail() { echo "kube: $*" >&2; exit 1; }
packages=()
command -v containerd >/dev/null || packages+=(containerd)
command -v runc >/dev/null || packages+=(runc)
[ -x /usr/lib/cni/bridge ] || packages+=(containernetworking-plugins)
command -v iptables >/dev/null || packages+=(iptables)
[ -x /bin/busybox ] || packages+=(busybox-static)  # the storage provisioner's helper image
[ ${#packages[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || fail "need root or sudo to install ${packages[*]} with apt-get"
  sudo=sudo
fi
command -v apt-get >/dev/null || fail "no apt-get: install ${packages[*]} (Debian/Ubuntu package names) yourself"
echo "kube: installing ${packages[*]} (Debian packages) ..."
$sudo apt-get update -qq || fail "step \`apt-get update\` failed (see above)"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null \
  || fail "step \`apt-get install ${packages[*]}\` failed"
