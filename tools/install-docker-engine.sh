#!/usr/bin/env bash
# `make docker-engine`: what `make images` and the engine tests need, from Debian's packages,
# installed only when missing: mmdebstrap (builds the images' root file systems), and
# docker.io (dockerd, containerd, runc) when no engine answers and dockerd is missing
# (tools/docker_engine.py then starts a private dockerd when needed).
# Usage: tools/install-docker-engine.sh <venv python>
set -euo pipefail
python="$1"
fail() { echo "docker-engine: $*" >&2; exit 1; }

packages=()
command -v mmdebstrap >/dev/null || packages+=(mmdebstrap)
if ! command -v dockerd >/dev/null; then
  if engine=$(PYTHONPATH="$(dirname "$0")/.." "$python" -m tools.docker_engine status); then
    echo "docker-engine: $engine (no dockerd needed)"
  else
    packages+=(docker.io)
  fi
fi
[ ${#packages[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || fail "need root or sudo to install ${packages[*]} with apt-get"
  sudo=sudo
fi
command -v apt-get >/dev/null || fail "no apt-get: install ${packages[*]} (Debian/Ubuntu package names) yourself"
echo "docker-engine: installing ${packages[*]} (Debian packages) ..."
$sudo apt-get update -qq || fail "step \`apt-get update\` failed (see above)"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null \
  || fail "step \`apt-get install ${packages[*]}\` failed (see above)"
for package in "${packages[@]}"; do
  tool=${package/docker.io/dockerd}
  command -v "$tool" >/dev/null || fail "step \`apt-get install $package\` left no $tool on PATH"
done
echo "docker-engine: installed ${packages[*]}"
