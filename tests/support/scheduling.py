"""How `make test` shares the suite between pytest-xdist workers.

A work unit is a test module (its module-scoped stack comes up once, on one
worker), except modules that share a machine-wide resource, which form one unit:
the docker modules start and stop the one Docker engine. Units go out longest
first (the measured seconds in suite_weights.json), so the last unit to start
is a short one and neither worker idles long at the end.
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
