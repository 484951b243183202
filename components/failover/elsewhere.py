"""What a switch run outside the program shares, wherever it runs (a
Kubernetes Job: kube_job.py; a container on the stack's Docker network:
docker_container.py): the code it ships, the lines it prints and how they
read back into the report or the gate's refusal."""
from __future__ import annotations

import json

from mirrorstack.failover.in_pod import REFUSED_MARK, REPORT_MARK
from mirrorstack.shipping import module_sources, project_imports
from mirrorstack.validation.package import deterministic_zip

ENTRY = "mirrorstack.failover.in_pod"  # what runs there; it ships with every module it imports
MOUNT = "/switch"  # where the spec and the code are
PROGRESS = "mirrorstack: failover: "
SWITCH_SECONDS = 600  # beyond the gate's wait: stopping connectors, reading and writing offsets


class SwitchRunFailed(RuntimeError):
    pass


def code_zip() -> bytes:
    """The modules the switch runs, from this installation, byte for byte the same for the same files."""
    return deterministic_zip(module_sources(project_imports(ENTRY)).items())


def command(spec_path: str = f"{MOUNT}/spec.json") -> list[str]:
    return ["python3", "-m", ENTRY, spec_path]


ENVIRONMENT = {"PYTHONPATH": f"{MOUNT}/switch.zip", "PYTHONDONTWRITEBYTECODE": "1"}


def progress_of(line: str) -> str | None:
    """The progress a printed line says, or None."""
    return line[len(PROGRESS):].rstrip("\n") if line.startswith(PROGRESS) else None


def finished(lines: list[str]) -> bool:
    """Whether the lines hold the report or the refusal (nothing more to wait for)."""
    return any(line.startswith((REPORT_MARK, REFUSED_MARK)) for line in lines)


def outcome(where: str, lines: list[str]) -> dict:
    """The report, or the refusal as GateFailed, or what the log says went wrong
    (`where`: the run's name for the message, e.g. "Job ns/name")."""
    from mirrorstack.failover.procedure import GateFailed
    for line in lines:
        if line.startswith(REPORT_MARK):
            return json.loads(line[len(REPORT_MARK):])
        if line.startswith(REFUSED_MARK):
            raise GateFailed(json.loads(line[len(REFUSED_MARK):]))
    tail = "\n".join(line for line in lines if not line.startswith(PROGRESS))[-2000:]
    raise SwitchRunFailed(f"the switch's {where} ended without a report or a gate's refusal; "
                          f"what it printed:\n{tail or '(nothing)'}\n"
                          "what it did before is in the progress lines above; fix the cause and run `pulumi up` "
                          "again: a switch that stopped half way is taken up where the offsets stand")
