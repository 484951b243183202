"""Deploy one of the repo's stacks through the real engine on the local platform."""
from __future__ import annotations

import itertools
import os
import random
from contextlib import contextmanager
from pathlib import Path

import yaml

from mirrorstack.platforms.base import PORT_SPAN
from mirrorstack.spark.spark_io import C1_ONLY
from tests.support.leftovers import kill_leftovers, leftover_processes
from tests.support.ports import STACK_PORTS, worker_share
from tests.support.pulumi_cli import PulumiProject, engine_env

REPO = Path(__file__).resolve().parents[2]
TEST_REFRESH_SECONDS = 5


def fast_discovery(topology: dict) -> None:
    """Tests create topics after `up`: MM2 looks for them every 5 s, not the default 60 s."""
    for flow in topology.get("flows", []):
        flow.setdefault("refresh_seconds", TEST_REFRESH_SECONDS)


def fast_first_rebalance(topology: dict) -> None:
    """Tests start a consumer group (and every Connect group) on an empty group
    over and over: the broker's 3 s wait for more members before a group's
    first rebalance is only waiting here (Kafka's docs suggest 0 for tests)."""
    for cluster in topology.get("clusters", {}).values():
        if cluster.get("external") is None:
            cluster.setdefault("settings", {}).setdefault("group.initial.rebalance.delay.ms", "0")


def on_platform(topology: dict, platform: str) -> dict:
    """A local stack file's topology on another platform."""
    return {**topology, "platform": platform}


def on_c1_only(topology: dict) -> dict:
    """`topology` (a stack file's, as a dict) with `jvm_options: [C1_ONLY]` on every deployed cluster,
    Connect group and the validation job, the flows' implied groups declared (a group is its flows' `connect`, else their
    target): containers' and pods' JVMs on C1 only, as the suite's own (tests/conftest.py)."""
    groups = topology.setdefault("connect", {})
    for flow in topology.get("flows", []):
        groups.setdefault(flow.get("connect", flow["target"]), {"kafka": flow["target"]})
    for part in [*topology.get("clusters", {}).values(), *groups.values()]:
        if part.get("external") is None:
            part["resources"] = {**part.get("resources", {}), "jvm_options": [C1_ONLY]}
    if topology.get("validation") is not None:  # spark-submit's driver, which cannot pick C1 by itself
        topology["validation"] = {**topology["validation"], "jvm_options": [C1_ONLY]}
    return topology


# Five ranges, all below Linux's ephemeral ports: the four of a stack's default
# base (10000-29999) and 5000-9999 below them, so that with three workers the two
# that open several stacks at once own two each (the waiting lane, whose modules
# open one at a time, one). Under pytest-xdist each worker owns its own share
# (every n-th from its index), so stacks of two workers never meet; a worker hands its share out in turn from a random
# start: stacks opened one after another get different ranges. (Refilling a
# shuffled list instead could hand the last base of one round out again as the
# first of the next: two stacks of one test then shared their ports.)
_ALL_BASES = list(range(STACK_PORTS.start, STACK_PORTS.stop, PORT_SPAN))


def worker_bases(worker: str | None, workers: int) -> list[int]:
    """The port bases a test process may use (tests.support.ports.worker_share)."""
    return worker_share(_ALL_BASES, "stack port ranges", worker, workers)


_BASES = worker_bases(os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
_NEXT_BASE = itertools.count(random.randrange(len(_BASES)))


def port_base() -> int:
    """A port range of its own for each stack open at once in this test process
    (at most len(_BASES) at once): a stack spreads its ports over PORT_SPAN from
    its base, so bases PORT_SPAN apart never share a port. Every stack a test
    deploys takes one, on any platform (a stack's default base may be in another
    worker's share)."""
    return _BASES[next(_NEXT_BASE) % len(_BASES)]


@contextmanager
def stack_project(stack: str, tmp_path: Path, topology: dict | None = None, change=None):
    """An initialised stack of the repo's program, with its own state, service
    folder and port range; destroyed afterwards if anything still runs.
    `topology` replaces the stack file's (a test's own topology); `change`
    edits it in place (e.g. a faster self-healing schedule)."""
    project = PulumiProject.of_repo(REPO, stack, tmp_path, engine_env(tmp_path / "pulumi"))
    stack_file = project.dir / "stacks" / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(stack_file.read_text())
    if topology is not None:
        document["config"]["mirrorstack:topology"] = topology
    if change is not None:
        change(document["config"]["mirrorstack:topology"])
    fast_discovery(document["config"]["mirrorstack:topology"])
    fast_first_rebalance(document["config"]["mirrorstack:topology"])
    stack_file.write_text(yaml.safe_dump(document))
    project.local_dir = tmp_path / "local"
    project.run("stack", "init", stack)
    # one CLI call (each one derives the passphrase's key: about 0.25 s of CPU)
    project.run("config", "set-all", "--plaintext", f"mirrorstack:localDir={project.local_dir}",
                "--plaintext", f"mirrorstack:portBase={port_base()}")
    try:
        yield project
    except BaseException:
        _tear_down(project)
        raise
    _tear_down(project, test_passed=True)


def _tear_down(project: PulumiProject, test_passed: bool = False) -> None:
    """`pulumi destroy` if anything still runs; what even that leaves is killed, as it would
    hold this worker's port range: the next stack given it failed on "port … already in
    use" (CI, 2026-11-29: a failed CA rotation's stack broke two later modules)."""
    if leftover_processes(str(project.local_dir)):
        project.run("destroy", "--yes", "--skip-preview", check=False, timeout=600)
    killed = kill_leftovers(str(project.local_dir))
    if killed and test_passed:
        raise AssertionError("`pulumi destroy` left these running (now killed): "
                             + "; ".join(f"pid {proc.pid}: {proc.args}" for proc in killed))


@contextmanager
def deployed_stack(stack: str, tmp_path: Path, change=None):
    """`pulumi up`, yield (project, outputs), then `pulumi destroy` and check
    that no service process is left."""
    with stack_project(stack, tmp_path, change=change) as project:
        project.up_output = project.run("up", "--yes", "--skip-preview", timeout=900).stdout
        yield project, project.outputs()
        project.run("destroy", "--yes", "--skip-preview", timeout=600)
        assert leftover_processes(str(project.local_dir)) == []


def self_healing(backoff_seconds: int, max_restarts: int, check_seconds: int = 1):
    """A `change` giving every deployed Connect group a schedule a test can watch
    run through (seconds, where users have Strimzi's minutes)."""
    def change(topology: dict) -> None:
        for group in topology.get("connect", {}).values():
            if "external" not in group:
                group["self_healing"] = {"backoff_seconds": backoff_seconds, "max_restarts": max_restarts,
                                         "check_seconds": check_seconds}
    return change
