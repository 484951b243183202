"""What a running process of this machine started with, read from /proc."""
from __future__ import annotations

from pathlib import Path


def environment(pid: int) -> dict[str, str]:
    """Process `pid`'s environment as it started."""
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)
