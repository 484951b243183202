"""How `make test` shares the suite between pytest-xdist workers.

A work unit is a test module (its module-scoped stack comes up once, on one
worker), except modules that share a machine-wide resource, which form one unit:
the docker modules start and stop the one Docker engine. Units go out longest
first (the measured seconds in suite_weights.json), so the last unit to start
is a short one and neither worker idles long at the end.

With three workers or more, the last one is a waiting lane: it takes the
modules that mostly wait (WAITING: Prometheus `for:` windows, the supervisor's
back-offs, MM2's checkpoints, Spark job starts; their wall time is twice their
CPU or more) before any other, so the CPU the two others leave idle is used,
and runs at a lower priority (LANE_NICE), so that what it computes gives way to
theirs. Then it takes what is left in order, except modules that run stacks side by
side (SIDE_BY_SIDE): it owns one port range (tests.support.stacks). The others
take the rest first, then any WAITING unit the lane has not started.
"""
from __future__ import annotations

import json
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

WEIGHTS_FILE = Path(__file__).with_name("suite_weights.json")

# Modules that run on one worker, one after the other: the docker modules
# start and stop the one Docker engine, which sets the host's iptables FORWARD
# policy when it starts; the cluster test compares the host's iptables before
# and after its cluster, so it must not meet an engine starting meanwhile.
DOCKER_ENGINE = "docker engine"  # the one unit whose modules run containers and pods
SHARED_UNITS = {
    "tests/integration/test_images.py": DOCKER_ENGINE,
    "tests/integration/test_docker_platform.py": DOCKER_ENGINE,
    "tests/integration/test_kubernetes_platform.py": DOCKER_ENGINE,
}
# Modules using the session's shared services (tests/integration/conftest.py: clusters a and
# b, Connect b, Prometheus) run on one worker: each worker process starts its own set, so
# spread over two they were started twice (a dozen JVMs) and both sets idled to the end.
SESSION_SERVICES = "session services"
SHARED_UNITS.update({f"tests/integration/{module}.py": SESSION_SERVICES for module in (
    "test_kafka", "test_connect_mm2", "test_monitoring", "test_spark_kafka", "test_mirror_resource",
    "test_validation_job")})


# Measured in a fresh-clone run (0761da0, wall / CPU s of what each started): connect faults
# 410 / 164, the validation job 450 / 228, failover 174 (alone 203 / 96), failover ops 85 alone.
WAITING = {SESSION_SERVICES, *(f"tests/integration/{module}.py" for module in (
    "test_connect_faults", "test_failover", "test_failover_ops"))}
# CFS weight 526 against 1024. Fresh clones, 2026-11-29: at 0 the run took 41:32 (every module slower,
# 16 % more CPU), at 5 39:33 but starved the lane's bounded waits, at 3 35:00.
LANE_NICE = 3

# Modules with two stacks deployed at once (each needs a port range of its own), and the docker
# engine's unit (the kubernetes module's three stacks): never on the lane.
SIDE_BY_SIDE = {DOCKER_ENGINE, *(f"tests/integration/{module}.py" for module in (
    "test_existing_connect", "test_library_example", "test_preview_diffs"))}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    module = module_of(nodeid)
    return SHARED_UNITS.get(module, module)


def unit_weights(weights: dict[str, float]) -> dict[str, float]:
    """Seconds per work unit: a shared unit weighs what its modules weigh together."""
    units: dict[str, float] = {}
    for module, seconds in weights.items():
        unit = unit_of(module)
        units[unit] = units.get(unit, 0.0) + seconds
    return units


def longest_first(units: list[str], weights: dict[str, float]) -> list[str]:
    """Units by measured weight, heaviest first; a unit never measured (a new
    module) goes first too, as it may be long."""
    return sorted(units, key=lambda unit: -weights.get(unit, float("inf")))


def is_waiting_lane(worker: str, workers: int) -> bool:
    """Whether xdist worker `worker` (gw<k>) of `workers` is the waiting lane: the last of three or more."""
    return workers >= 3 and worker == f"gw{workers - 1}"


def next_unit(queue: list[str], waiting_lane: bool) -> str | None:
    """The unit a worker takes from `queue` (in the order they go out). The waiting lane: the
    first WAITING one, else the first not SIDE_BY_SIDE, else none. The others: the first of any
    other kind, else the first of all."""
    if waiting_lane:
        own = [unit for unit in queue if unit in WAITING] or [unit for unit in queue if unit not in SIDE_BY_SIDE]
        return own[0] if own else None
    return ([unit for unit in queue if unit not in WAITING] or queue)[0]


class ModuleScheduling(LoadScopeScheduling):
    """xdist's load-scope scheduling with our units and order."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self._weights = unit_weights(json.loads(WEIGHTS_FILE.read_text()))
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the queue is complete before the first unit goes out
            for unit in longest_first(list(self.workqueue), self._weights):
                self.workqueue.move_to_end(unit)
            self._ordered = True
        unit = next_unit(list(self.workqueue), is_waiting_lane(node.workerinput["workerid"],
                                                                node.workerinput["workercount"]))
        if unit is None:  # nothing left for the waiting lane: it ends after what it has
            node.shutdown()
            return
        self.workqueue.move_to_end(unit, last=False)
        super()._assign_work_unit(node)


def still_needed(item, nextitem) -> bool:
    """Whether a test this process runs after `item` may use the session services. Under xdist
    they serve one unit, sent to one worker whole: the unit is over when the next item is not
    in it. Run in one process, any later item may use them."""
    if hasattr(item.config, "workerinput"):
        return nextitem is not None and unit_of(nextitem.nodeid) == SESSION_SERVICES
    items = item.session.items
    later = items[items.index(item) + 1:]
    return any(unit_of(later_item.nodeid) == SESSION_SERVICES for later_item in later)
