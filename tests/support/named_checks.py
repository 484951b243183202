"""Checks a health spec names (platforms/descriptions.py: CHECK, ONCE_HEALTHY),
as a concept folder's would be: the local platform imports them by name where
it runs them (tests/unit/test_launcher.py)."""
from __future__ import annotations

from pathlib import Path


def marker_written(spec: dict, since_ms: int = 0) -> bool:
    """Ready once the service wrote the spec's `marker` file."""
    return Path(spec["marker"]).exists()


def refuse(name: str, spec: dict, secrets: dict[str, str], *, alive, log_file: str) -> None:
    """A readiness the running service fails, saying what it was given."""
    raise RuntimeError(f"{name} refused: users {sorted(secrets)}, alive {alive()}, log {Path(log_file).name}")
