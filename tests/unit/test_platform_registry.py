"""Platforms by name: the built-in three, and those a package registers (its
`mirrorstack.platforms` entry point) without a file of mirrorstack touched."""
import textwrap

import pytest

from mirrorstack.model import capabilities as registry
from mirrorstack.model.capabilities import Capabilities, PlatformRegistryError, register_platform
from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.platforms import make_platform

CAN_ALL = Capabilities(node_ports=True, scheduled_jobs=True, uploads_files=True, runs_containers=True)


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Each test registers into its own copy; entry points are read again."""
    monkeypatch.setattr(registry, "_registered", dict(registry.BUILT_IN))
    monkeypatch.setattr(registry, "_entry_points_read", False)


def _topology(platform: str, **cluster):
    return {"platform": platform, "clusters": {"a": {"brokers": 1, **cluster}, "b": {"brokers": 1}},
            "flows": [{"source": "a", "target": "b", "topics": ["orders"]}]}


def test_an_unknown_platform_is_refused_with_the_registered_names_and_how_to_add_one():
    with pytest.raises(TopologyError) as refused:
        load_topology(_topology("nomad"))
    said = str(refused.value)
    assert ("platform: 'nomad' is not a registered platform, registered are 'local', 'docker' or 'kubernetes'; "
            "fix: use one of 'local', 'docker', 'kubernetes', or install the package that registers 'nomad'") in said
    assert "`mirrorstack.platforms` entry point" in said and "register_platform" in said


def test_a_registered_platform_is_accepted_asked_for_its_capabilities_and_built_by_its_factory():
    made = []
    register_platform("nomad", CAN_ALL, lambda stack, **options: made.append((stack, options)) or "a nomad platform")
    topology = load_topology(_topology("nomad", node_ports=31000))  # node_ports: the capability, not the name
    assert topology.platform == "nomad"
    assert "nomad" in registry.offering("node_ports")
    assert make_platform("nomad", "s", local_dir="/x", namespace="ns") == "a nomad platform"
    assert made == [("s", {"local_dir": "/x", "port_base": None, "namespace": "ns", "rest_access": None,
                           "images": None, "kubernetes": None, "docker_host": None})]


def test_a_factory_may_be_a_reference_imported_when_used():
    register_platform("later", CAN_ALL, "mirrorstack.platforms.factories:local")
    assert type(make_platform("later", "s", local_dir="/x")).__name__ == "LocalPlatform"


def test_a_built_in_cannot_be_replaced_and_a_name_is_lower_case():
    with pytest.raises(PlatformRegistryError, match="'docker' is built in"):
        register_platform("docker", CAN_ALL, lambda stack, **_: None)
    with pytest.raises(PlatformRegistryError, match="does not match"):
        register_platform("Nomad", CAN_ALL, lambda stack, **_: None)


def _installed(folder, dist: str, entry: str, module_text: str, monkeypatch) -> None:
    """A distribution as pip leaves it in a target folder: its module and its
    dist-info with the entry point; the folder on sys.path."""
    (folder / f"{dist}.py").write_text(textwrap.dedent(module_text))
    info = folder / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[mirrorstack.platforms]\n{entry}\n")
    monkeypatch.syspath_prepend(str(folder))


def test_an_installed_package_registers_through_its_entry_point(tmp_path, monkeypatch):
    _installed(tmp_path, "nomad_platform", "nomad = nomad_platform:register", """
        from mirrorstack.model.capabilities import Capabilities, register_platform

        def register():
            register_platform("nomad", Capabilities(node_ports=False, scheduled_jobs=True, uploads_files=True,
                                                    runs_containers=True), lambda stack, **_: ("nomad", stack))
    """, monkeypatch)
    assert load_topology(_topology("nomad")).platform == "nomad"
    assert registry.capabilities("nomad").scheduled_jobs
    assert make_platform("nomad", "s", local_dir="/x") == ("nomad", "s")


def test_a_broken_entry_point_is_named_with_its_distribution(tmp_path, monkeypatch):
    _installed(tmp_path, "broken_platform", "broken = broken_platform:register", """
        def register():
            raise RuntimeError("no nomad client")
    """, monkeypatch)
    with pytest.raises(TopologyError, match=r"platform: entry point broken = broken_platform:register "
                       r"\(mirrorstack.platforms, of broken_platform\) failed: RuntimeError: no nomad client; "
                       r"fix: repair or uninstall the package broken_platform$"):
        load_topology(_topology("local"))


def test_an_entry_point_that_registers_another_name_is_named(tmp_path, monkeypatch):
    _installed(tmp_path, "quiet_platform", "quiet = quiet_platform:register", """
        def register():
            pass
    """, monkeypatch)
    with pytest.raises(PlatformRegistryError, match="registered no platform named 'quiet'"):
        registry.registered()
