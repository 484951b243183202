"""Prometheus' own checker (from .tools, see mirrorstack.toolchain): the unit
tests run generated configs, alert rules and rule tests through it."""
from __future__ import annotations

import subprocess

from mirrorstack import toolchain


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([toolchain.promtool_binary(), *args], capture_output=True, text=True, timeout=60)
