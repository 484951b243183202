#!/usr/bin/env bash
# Prometheus and promtool from Debian's packages, installed only when missing.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-prometheus: need root or sudo for apt-get" >&2; exit 1; }
  sudo=sudo
fi
command -v apt-get >/dev/null || { echo "install-prometheus: no apt-get; install Prometheus 2.x (prometheus, promtool) on PATH" >&2; exit 1; }
echo "installing prometheus (Debian package) ..."
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
prometheus --version | head -1
