"""What each platform can do, as the model's rules ask it: never a platform's
name compared with a string; and the registry of platforms by name.

A platform is registered with its name, its Capabilities and a factory (what
builds it: a callable, or a "module:attribute" reference imported only when a
stack runs on it), so the model can check a topology's `platform` and ask what
it can do without importing any platform. The three built-in platforms are
registered here by reference; an installed package adds one through the
`mirrorstack.platforms` entry point group (docs/layout.md, adding a platform),
no file of mirrorstack touched.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module, metadata
from typing import Any

ENTRY_POINT_GROUP = "mirrorstack.platforms"
NAME = r"^[a-z][a-z0-9-]*$"  # what a topology's `platform` may be: lower case, as a stack file writes it


@dataclass(frozen=True)
class Capabilities:
    node_ports: bool  # publishes a cluster's brokers on the nodes' ports (`node_ports`)
    scheduled_jobs: bool  # runs the validation job on a schedule (`validation.schedule`, a CronJob)
    uploads_files: bool  # puts the project's files beside what it runs; False: the images must carry them
    runs_containers: bool  # runs the extras that exist only as images (kafka-ui, kafka-exporter)
    kubernetes_section: bool = False  # reads the topology's `kubernetes:` section (storage, pods, NetworkPolicy)
    needs_extra: bool = False  # its Python client is an extra of the package (pip install 'mirrorstack[name]')
    runs_job_in_program: bool = False  # the validation job runs inside `up` (needs the `spark` extra there)
    # runs the validation job's driver in the cluster, which starts its executors as pods (`validation.master:
    # k8s://https://kubernetes.default.svc`, Spark's Kubernetes scheduler)
    spark_executor_pods: bool = False
    # runs the continuous validator (`validation.mode: continuous`, a Spark streaming query) as a service
    # with a folder that keeps its checkpoint across restarts
    continuous_validation: bool = False
    # runs a Grafana server when `monitoring.grafana` asks (a generated admin password); False: Grafana's
    # dashboards and datasource are always written as files for a Grafana of the user's (no server, no URL)
    serves_grafana: bool = True


@dataclass(frozen=True)
class RegisteredPlatform:
    name: str
    capabilities: Capabilities
    # (stack, *, local_dir, port_base, namespace, rest_access, images, kubernetes, docker_host) -> Platform;
    # a factory takes the options it uses and `**_` for the others.
    factory: Callable[..., Any] | str

    def make(self, stack: str, **options) -> Any:
        factory = self.factory
        if isinstance(factory, str):
            module, _, attribute = factory.partition(":")
            factory = getattr(import_module(module), attribute)
        return factory(stack, **options)


BUILT_IN: dict[str, RegisteredPlatform] = {p.name: p for p in (
    RegisteredPlatform("local", Capabilities(node_ports=False, scheduled_jobs=False, uploads_files=True,
                                             runs_containers=False, runs_job_in_program=True, serves_grafana=False,
                                             continuous_validation=True),
                       "mirrorstack.platforms.factories:local"),
    RegisteredPlatform("docker", Capabilities(node_ports=False, scheduled_jobs=False, uploads_files=True,
                                              runs_containers=True, needs_extra=True, continuous_validation=True),
                       "mirrorstack.platforms.factories:docker"),
    RegisteredPlatform("kubernetes", Capabilities(node_ports=True, scheduled_jobs=True, uploads_files=False,
                                                  runs_containers=True, kubernetes_section=True, needs_extra=True,
                                                  spark_executor_pods=True, continuous_validation=True),
                       "mirrorstack.platforms.factories:kubernetes"),
)}
_registered: dict[str, RegisteredPlatform] = dict(BUILT_IN)
_entry_points_read = False


class PlatformRegistryError(ValueError):
    pass


def register_platform(name: str, capabilities: Capabilities, factory: Callable[..., Any] | str) -> None:
    """Make `name` a platform a topology may name. Registering the same name
    again replaces the entry (a package reloaded); a built-in cannot be replaced."""
    if not re.fullmatch(NAME, name):
        raise PlatformRegistryError(f"platform name {name!r} does not match {NAME}: lower case letters, digits, '-'")
    if name in BUILT_IN and factory != BUILT_IN[name].factory:
        raise PlatformRegistryError(f"platform {name!r} is built in; register yours under another name")
    if not isinstance(capabilities, Capabilities):
        raise PlatformRegistryError(f"platform {name!r}: capabilities must be a "
                                    f"mirrorstack.model.capabilities.Capabilities, not {type(capabilities).__name__}")
    _registered[name] = RegisteredPlatform(name, capabilities, factory)


def _read_entry_points() -> None:
    """Each `mirrorstack.platforms` entry point names a function of no arguments
    that calls register_platform (its name: the platform's, by convention)."""
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {entry.name} = {entry.value} ({ENTRY_POINT_GROUP}"
        where += f", of {entry.dist.name})" if entry.dist is not None else ")"
        try:
            entry.load()()
        except Exception as error:  # a broken plugin is named, not a traceback from deep inside it
            raise PlatformRegistryError(f"{where} failed: {type(error).__name__}: {error}; "
                                        f"fix: repair or uninstall {_package(entry)}") from error
        if entry.name not in _registered:
            raise PlatformRegistryError(f"{where} registered no platform named {entry.name!r}; fix: its function "
                                        f"calls register_platform({entry.name!r}, ...), or rename the entry point")


def _package(entry: metadata.EntryPoint) -> str:
    return f"the package {entry.dist.name}" if entry.dist is not None else "the package that holds it"


def registered() -> dict[str, RegisteredPlatform]:
    """name → RegisteredPlatform: the built-in platforms, then those installed packages add."""
    _read_entry_points()
    return dict(_registered)


def how_to_add() -> str:
    return (f"a package adds one by calling mirrorstack.model.capabilities.register_platform from a "
            f"`{ENTRY_POINT_GROUP}` entry point (docs/layout.md, adding a platform)")


def unknown(name: str) -> str | None:
    """What is wrong with `name` as a platform (None: it is registered), with the fix."""
    known = registered()
    if name in known:
        return None
    names = [repr(n) for n in known]
    either = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
    return (f"{name!r} is not a registered platform, registered are {either}; fix: use one of {', '.join(names)}, "
            f"or install the package that registers {name!r}: {how_to_add()}")


def platform(name: str) -> RegisteredPlatform:
    """The registered platform `name`; refused with the registered names and how to add one."""
    if (problem := unknown(name)) is not None:
        raise PlatformRegistryError(f"platform: {problem}")
    return _registered[name]


def capabilities(name: str) -> Capabilities:
    return platform(name).capabilities


def offering(capability: str) -> list[str]:
    """The platforms that can do `capability` (a Capabilities field), for a fix's words."""
    return [name for name, entry in registered().items() if getattr(entry.capabilities, capability)]
