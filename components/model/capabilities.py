"""What each platform can do, as the model's rules ask it: never a platform's
name compared with a string. A new platform is one entry here (what it can
do) plus its own folder under platforms/ (how)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    node_ports: bool  # publishes a cluster's brokers on the nodes' ports (`node_ports`)
    scheduled_jobs: bool  # runs the validation job on a schedule (`validation.schedule`, a CronJob)
    uploads_files: bool  # puts the project's files beside what it runs; False: the images must carry them
    runs_containers: bool  # runs the extras that exist only as images (kafka-ui, kafka-exporter)
    kubernetes_section: bool = False  # reads the topology's `kubernetes:` section (storage, pods, NetworkPolicy)
    needs_extra: bool = False  # its Python client is an extra of the package (pip install 'mirrorstack[name]')
    runs_job_in_program: bool = False  # the validation job runs inside `up` (needs the `spark` extra there)


PLATFORMS: dict[str, Capabilities] = {
    "local": Capabilities(node_ports=False, scheduled_jobs=False, uploads_files=True, runs_containers=False,
                          runs_job_in_program=True),
    "docker": Capabilities(node_ports=False, scheduled_jobs=False, uploads_files=True, runs_containers=True,
                           needs_extra=True),
    "kubernetes": Capabilities(node_ports=True, scheduled_jobs=True, uploads_files=False, runs_containers=True,
                               kubernetes_section=True, needs_extra=True),
}


def capabilities(platform: str) -> Capabilities:
    return PLATFORMS[platform]


def offering(capability: str) -> list[str]:
    """The platforms that can do `capability` (a Capabilities field), for a fix's words."""
    return [name for name, can in PLATFORMS.items() if getattr(can, capability)]
