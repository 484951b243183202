"""Platforms run services; they know how to run a process or container, never what Kafka is.

Each one implements the `Platform` Protocol of base.py; `make_platform` picks one.
"""
from __future__ import annotations

from mirrorstack import extras
from mirrorstack.platforms.base import Platform


def make_platform(name: str, stack: str, *, local_dir: str, port_base: int | None = None,
                  namespace: str | None = None, rest_access: str | None = None, images=None,
                  kubernetes=None, docker_host: str | None = None) -> Platform:
    """The platform a topology names, with its stack-level options; `images`:
    the topology's `images:` (docker and kubernetes), `kubernetes` its
    `kubernetes:` section (storage, shutdown, NetworkPolicy; None: the defaults);
    `rest_access`: how the program reaches Connect (kubernetes, docker);
    `docker_host`: the engine's URL (None: `docker:host`, else DOCKER_HOST)."""
    if name == "local":
        from mirrorstack.platforms.local.platform import LocalPlatform
        return LocalPlatform(stack, local_dir, port_base=port_base)
    if name in ("docker", "kubernetes"):
        extras.require(name)
    if name == "docker":
        from mirrorstack.platforms.docker import DockerPlatform
        return DockerPlatform(stack, images=images, port_base=port_base, rest_access=rest_access,
                              docker_host=docker_host)
    if name == "kubernetes":
        from mirrorstack.platforms.kubernetes import KubernetesPlatform
        return KubernetesPlatform(stack, namespace=namespace, rest_access=rest_access or "port-forward",
                                  settings=kubernetes, images=images, port_base=port_base)
    raise ValueError(f"unknown platform {name!r}: use local, docker or kubernetes")
