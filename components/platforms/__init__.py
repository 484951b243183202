"""Platforms run services; they know how to run a process or container, never what Kafka is.

Every platform offers the same interface (see local/platform.py): `address`,
`host_address`, `listen_host`, `service_dir`, `data_dir`, `run_kafka_java`.
"""
from __future__ import annotations


def fill_dir(content, folder: str):
    """`{dir}` in a file's content replaced by `folder`; the content may be an
    Output (a file generated from other resources' outputs)."""
    if isinstance(content, str):
        return content.replace("{dir}", folder)
    import pulumi
    return pulumi.Output.from_input(content).apply(lambda text: text.replace("{dir}", folder))


def make_platform(name: str, stack: str, *, local_dir: str, port_base: int | None = None,
                  namespace: str | None = None, rest_access: str | None = None, images=None):
    """The platform a topology names, with its stack-level options; `images`:
    the topology's `images:` (docker and kubernetes)."""
    if name == "local":
        from components.platforms.local.platform import LocalPlatform
        return LocalPlatform(stack, local_dir, port_base=port_base)
    if name == "docker":
        from components.platforms.docker import DockerPlatform
        return DockerPlatform(stack, images=images, port_base=port_base)
    if name == "kubernetes":
        from components.platforms.kubernetes import KubernetesPlatform
        return KubernetesPlatform(stack, namespace=namespace, rest_access=rest_access or "port-forward",
                                  images=images, port_base=port_base)
    raise ValueError(f"unknown platform {name!r}: use local, docker or kubernetes")
