"""The built-in platforms' factories, which mirrorstack.model.capabilities
registers by reference ("mirrorstack.platforms.factories:local"): each takes the
stack's name and the options `make_platform` passes, and uses those it needs."""
from __future__ import annotations

from mirrorstack.platforms.base import Platform


def local(stack: str, *, local_dir: str, port_base: int | None = None, **_) -> Platform:
    from mirrorstack.platforms.local.platform import LocalPlatform
    return LocalPlatform(stack, local_dir, port_base=port_base)


def docker(stack: str, *, images=None, port_base: int | None = None, rest_access: str | None = None,
           docker_host: str | None = None, **_) -> Platform:
    from mirrorstack.platforms.docker.platform import DockerPlatform
    return DockerPlatform(stack, images=images, port_base=port_base, rest_access=rest_access, docker_host=docker_host)


def kubernetes(stack: str, *, namespace: str | None = None, rest_access: str | None = None, kubernetes=None,
               images=None, port_base: int | None = None, **_) -> Platform:
    from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
    return KubernetesPlatform(stack, namespace=namespace, rest_access=rest_access or "port-forward",
                              settings=kubernetes, images=images, port_base=port_base)
