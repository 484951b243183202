#!/usr/bin/env bash
# `make kube`: what the private cluster runs from Debian's packages, installed
# only when missing: containerd and runc (its own containerd instance, never
# Docker's), the CNI plugins (bridge, host-local, portmap, loopback), iptables, and
# busybox-static (the shell of the volume provisioner's helper pods).
set -euo pipefail
packages=()
command -v containerd >/dev/null || packages+=(containerd)
command -v runc >/dev/null || packages+=(runc)
[ -x /usr/lib/cni/bridge ] || packages+=(containernetworking-plugins)
command -v iptables >/dev/null || packages+=(iptables)
[ -x /bin/busybox ] || packages+=(busybox-static)  # the storage provisioner's helper image
command -v ip >/dev/null || packages+=(iproute2)       # the pods' bridge
command -v modprobe >/dev/null || packages+=(kmod)     # br_netfilter
command -v sysctl >/dev/null || packages+=(procps)     # the cluster test reads the host's sysctls
[ ${#packages[@]} -eq 0 ] && exit 0
"$(dirname "$0")/apt-install.sh" kube "${packages[@]}"
