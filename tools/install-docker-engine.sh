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

"$(dirname "$0")/apt-install.sh" docker-engine "${packages[@]}"
for package in "${packages[@]}"; do
  tool=${package/docker.io/dockerd}
  command -v "$tool" >/dev/null || fail "step \`apt-get install $package\` left no $tool on PATH"
done
echo "docker-engine: installed ${packages[*]}"
