"""A deployed Connect group's self-healing supervisor, run by the platform
(mirrorstack.connect.supervisor: a process, a container, a Deployment) beside
the workers, so it keeps restarting failed connectors when `up` is not running.
Its config is the group's workers (as the supervisor reaches them), the stack's
connectors with the state the topology wants each in, and the schedule."""
from __future__ import annotations

import pulumi

from mirrorstack.model.spec import SelfHealing
from mirrorstack.platforms.descriptions import PythonModuleService, ScrapeTarget
from mirrorstack.shipping import project_imports

MODULE = "mirrorstack.connect.supervisor"


def __getattr__(name: str):
    """SHIPS: what the supervisor imports (containers get their source), nothing of the model or
    pulumi. Derived (an ast walk, about 0.1 s) when first asked, not on every program's start."""
    if name == "SHIPS":
        return project_imports(MODULE)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def supervisor_service(connect: str) -> str:
    return f"supervisor-{connect}"  # not connect-*: the workers' folders and names


def supervisor_config(connect: str, urls: list[str], connectors: dict[str, str], settings: SelfHealing) -> dict:
    """What the supervisor reads (its listen address and secrets file are the platform's)."""
    return {"connect": connect, "urls": urls, "ca_file": None, "connectors": dict(sorted(connectors.items())),
            "check_seconds": settings.check_seconds,
            "schedule": {"unit_seconds": float(settings.backoff_seconds),
                         "max_delay_seconds": float(settings.max_backoff_seconds),
                         "max_restarts": settings.max_restarts}}


def run_supervisor(name: str, *, spec, kafka_alias: str, platform, connectors, rest_credentials,
                   opts: pulumi.ResourceOptions) -> tuple[object, ScrapeTarget]:
    """The supervisor of Connect group `name` (its ConnectCluster spec): `connectors`
    an Output of connector name → flow state. Returns (resource, its scrape target)."""
    urls = ["http://%s:%d" % platform.address(f"connect-{name}-{i}", "rest") for i in range(spec.workers)]
    config = pulumi.Output.from_input(connectors).apply(
        lambda c: supervisor_config(name, urls, c, spec.self_healing))
    secret = None if rest_credentials is None else pulumi.Output.secret(rest_credentials).apply(
        lambda auth: {"connect_auth": auth})
    service = supervisor_service(name)
    ran = platform.run(PythonModuleService(service, MODULE, project_imports(MODULE), config, secret), opts=opts)
    return ran.resource, ScrapeTarget(service, "%s:%d" % ran.address,
                                  {"cluster": kafka_alias, "role": "supervisor", "connect": name})
