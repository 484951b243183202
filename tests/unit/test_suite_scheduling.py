"""How `pytest -n 2` shares the suite (tests/support/scheduling.py): whole
modules, the docker modules as one unit, heaviest first."""
import json

from tests.support.scheduling import SHARED_UNITS, WEIGHTS_FILE, longest_first, still_needed, unit_of, unit_weights


def test_a_module_is_one_unit_and_the_docker_modules_share_one():
    assert unit_of("tests/integration/test_failover.py::test_x[a]") == "tests/integration/test_failover.py"
    assert {unit_of(f"{m}::t") for m in SHARED_UNITS} == {"docker engine", "session services"}
    assert unit_of("tests/integration/test_kubernetes_platform.py::t") == "docker engine"


def test_every_module_using_the_session_services_is_in_their_unit():
    """A module asking for a session fixture of tests/integration/conftest.py outside the unit
    would start a second set of services on the other worker."""
    import ast
    folder = WEIGHTS_FILE.parents[1] / "integration"

    def requested(path) -> set[str]:
        """The fixtures a module's tests and fixtures ask for."""
        functions = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)]
        return {a.arg for f in functions if f.name.startswith("test_") or any(
            "fixture" in ast.unparse(d) for d in f.decorator_list) for a in f.args.args}

    shared = {n.name for n in ast.parse((folder / "conftest.py").read_text()).body
              if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    users = {f"tests/integration/{p.name}" for p in folder.glob("test_*.py") if requested(p) & shared}
    assert users == {m for m, unit in SHARED_UNITS.items() if unit == "session services"}


def test_units_go_out_heaviest_first_and_an_unmeasured_module_before_all():
    weights = unit_weights({"tests/integration/test_images.py": 30.0, "tests/integration/test_docker_platform.py": 300.0,
                            "tests/integration/test_failover.py": 320.0, "tests/unit/test_model.py": 2.0})
    assert weights["docker engine"] == 330.0
    order = longest_first(["tests/unit/test_model.py", "tests/integration/test_failover.py", "docker engine",
                           "tests/integration/test_new.py"], weights)
    assert order == ["tests/integration/test_new.py", "docker engine", "tests/integration/test_failover.py",
                     "tests/unit/test_model.py"]


def test_the_committed_weights_cover_every_integration_module():
    weights = json.loads(WEIGHTS_FILE.read_text())
    modules = {f"tests/integration/{p.name}" for p in (WEIGHTS_FILE.parents[1] / "integration").glob("test_*.py")}
    assert modules <= set(weights), sorted(modules - set(weights))
    assert all(seconds >= 0 for seconds in weights.values())


def test_the_session_services_stop_once_no_later_test_of_the_process_needs_them():
    """They idle at 13 % of a core: stopped after their unit's last test, not at the session's end."""
    from types import SimpleNamespace

    def item(module: str, on_worker: bool, items: list | None = None):
        config = SimpleNamespace(workerinput={}) if on_worker else SimpleNamespace()
        return SimpleNamespace(nodeid=f"tests/integration/{module}.py::t", config=config,
                               session=SimpleNamespace(items=items if items is not None else []))

    # under xdist the unit reaches one worker whole: it ends where the next item is another unit's
    kafka, mirror, failover = (item(m, True) for m in ("test_kafka", "test_mirror_resource", "test_failover"))
    assert still_needed(kafka, mirror) and not still_needed(mirror, failover) and not still_needed(mirror, None)
    # in one process the unit's modules are spread over the file order: any later one keeps them
    order: list = []
    order += [item(m, False, order) for m in ("test_kafka", "test_kubernetes_platform", "test_mirror_resource",
                                                 "test_push_placement")]
    first, between, last, after = order
    assert still_needed(first, between) and still_needed(between, last)
    assert not still_needed(last, after)


def test_the_third_worker_is_a_waiting_lane_and_takes_the_waiting_modules_first():
    from tests.support.scheduling import WAITING, is_waiting_lane, next_unit
    assert [w for w in ("gw0", "gw1", "gw2") if is_waiting_lane(w, 3)] == ["gw2"]
    assert not any(is_waiting_lane(w, 2) for w in ("gw0", "gw1"))
    faults, kube, unit = "tests/integration/test_connect_faults.py", "docker engine", "tests/unit/test_model.py"
    assert faults in WAITING and "session services" in WAITING and kube not in WAITING
    queue = [kube, "tests/integration/test_secure_stack.py", faults, "session services", unit]
    assert next_unit(queue, waiting_lane=True) == faults
    assert next_unit(queue, waiting_lane=False) == kube
    # the others take a waiting module the lane has not started once nothing else is left
    assert next_unit([faults, "session services"], waiting_lane=False) == faults
    # the lane then takes what is left in order, except modules with two stacks at once (one port range)
    topology, example = "tests/integration/test_topology_stacks.py", "tests/integration/test_library_example.py"
    assert next_unit([kube, example, topology, unit], waiting_lane=True) == topology
    assert next_unit([kube, example], waiting_lane=True) is None


def test_every_waiting_module_exists_and_is_measured():
    weights = json.loads(WEIGHTS_FILE.read_text())
    from tests.support.scheduling import SIDE_BY_SIDE, WAITING
    assert all(unit in unit_weights(weights) for unit in WAITING | SIDE_BY_SIDE), \
        (WAITING | SIDE_BY_SIDE) - set(unit_weights(weights))

