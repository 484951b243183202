"""Platforms run services; they know how to run a process or container, never what Kafka is.

Each one implements the `Platform` Protocol of base.py and is registered by
name (mirrorstack.model.capabilities: the built-in ones there, others from
installed packages' `mirrorstack.platforms` entry points); `make_platform`
builds the one a topology names.
"""
from __future__ import annotations

from mirrorstack import extras
from mirrorstack.model.capabilities import platform as registered_platform
from mirrorstack.platforms.base import Platform


def make_platform(name: str, stack: str, *, local_dir: str, port_base: int | None = None,
                  namespace: str | None = None, rest_access: str | None = None, images=None,
                  kubernetes=None, docker_host: str | None = None) -> Platform:
    """The platform a topology names, with its stack-level options; `images`:
    the topology's `images:` (docker and kubernetes), `kubernetes` its
    `kubernetes:` section (storage, shutdown, NetworkPolicy; None: the defaults);
    `rest_access`: how the program reaches Connect (kubernetes, docker);
    `docker_host`: the engine's URL (None: `docker:host`, else DOCKER_HOST).
    An unregistered name raises ValueError naming the registered ones."""
    entry = registered_platform(name)
    if name in extras.required_by(name, validation=False):
        extras.require(name)
    return entry.make(stack, local_dir=local_dir, port_base=port_base, namespace=namespace,
                      rest_access=rest_access, images=images, kubernetes=kubernetes, docker_host=docker_host)
