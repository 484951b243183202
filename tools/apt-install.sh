#!/usr/bin/env bash
# Installs Debian packages for a `make` step, as root or through sudo, failing
# with the step's name and what to do. The callers decide what is missing.
#   usage: tools/apt-install.sh STEP PACKAGE...
set -euo pipefail
step="$1"; shift
fail() { echo "$step: $*" >&2; exit 1; }
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || fail "need root or sudo to install $* with apt-get"
  sudo=sudo
fi
command -v apt-get >/dev/null || fail "no apt-get: install $* (Debian/Ubuntu package names) yourself"
echo "$step: installing $* (Debian packages) ..."
$sudo apt-get update -qq || fail "step \`apt-get update\` failed (see above)"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
  || fail "step \`apt-get install $*\` failed (see above)"
