"""What an optional part of mirrorstack needs installed (pyproject.toml's
extras), checked before any resource is created, so a missing one is named
with the command that installs it instead of an ImportError deep in a run."""
from __future__ import annotations

import importlib.util

from mirrorstack.model.capabilities import capabilities

# extra → (the module it brings, what needs it)
EXTRAS = {
    "spark": ("pyspark", "the validation job on the local platform (Spark runs from the pyspark package)"),
    "docker": ("pulumi_docker", "platform: docker (the pulumi-docker SDK)"),
    "kubernetes": ("pulumi_kubernetes", "platform: kubernetes (the pulumi-kubernetes SDK)"),
}


class MissingExtra(RuntimeError):
    pass


def require(extra: str) -> None:
    module, needed_by = EXTRAS[extra]
    if importlib.util.find_spec(module) is None:
        raise MissingExtra(f"mirrorstack: {needed_by} needs the `{extra}` extra, which is not installed; "
                           f"fix: pip install 'mirrorstack[{extra}]' (from a checkout: make venv)")


def required_by(platform: str, validation: bool) -> list[str]:
    """The extras a topology on `platform` needs (validation: a `validation:` section)."""
    can = capabilities(platform)
    return [*([platform] if can.needs_extra and platform in EXTRAS else []), *(["spark"] if validation and can.runs_job_in_program else [])]
