"""Every platform implements the one `Platform` Protocol: the components call
only what it names, with the parameters it names."""
import inspect

import pytest

from mirrorstack.platforms.base import Platform
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.platforms.local.platform import LocalPlatform

PLATFORMS = [LocalPlatform, DockerPlatform, KubernetesPlatform]
METHODS = [name for name, member in vars(Platform).items() if inspect.isfunction(member) and not name.startswith("_")]


def parameters(function) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("platform", PLATFORMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("method", METHODS)
def test_each_platform_takes_exactly_the_parameters_the_protocol_names(platform, method):
    assert parameters(getattr(platform, method)) == parameters(getattr(Platform, method))


@pytest.mark.parametrize("platform", PLATFORMS, ids=lambda p: p.__name__)
def test_each_platform_names_itself_and_its_listen_host(platform):
    assert set(Platform.__annotations__) == {"name", "listen_host"}
    assert platform.name in ("local", "docker", "kubernetes") and isinstance(platform.listen_host, str)


def test_a_platform_made_by_the_factory_is_a_platform(tmp_path):
    from mirrorstack.platforms import make_platform
    assert isinstance(make_platform("local", "dev", local_dir=str(tmp_path)), Platform)


def test_the_protocol_names_every_platform_method_a_component_calls():
    """What components/ calls on a platform object is in the Protocol (no duck-typed extras)."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "components"
    called = set()
    for path in root.rglob("*.py"):
        if "platforms" not in path.parts:
            called |= set(re.findall(r"\bplatform\.([a-z_]+)\b", path.read_text()))
    assert called - {"py"} <= set(METHODS) | {"name", "listen_host"}, called - set(METHODS)


def test_no_platform_method_is_named_for_what_it_runs_and_a_platform_refuses_a_kind_it_does_not_run(tmp_path):
    """Kafka, Connect, Prometheus, Grafana, the supervisor and the extras are described in their own
    folders and run through `run_set`, `run` or `run_job`: no method names a kind of service."""
    from mirrorstack.platforms import make_platform
    from mirrorstack.platforms.descriptions import ImageService
    runs = sorted(m for m in METHODS if m.startswith("run"))
    assert runs == ["run", "run_job", "run_set"]
    kinds = ("kafka", "java", "spark", "prometheus", "grafana", "python", "image", "extra", "exporter", "ui")
    assert not [m for m in METHODS if any(kind in m.split("_") for kind in kinds)]
    local = make_platform("local", "dev", local_dir=str(tmp_path))
    with pytest.raises(ValueError, match="kafka-ui: the local platform runs no images; fix: platform docker or kubernetes"):
        local.run(ImageService("kafka-ui", "kafka_ui", 8080))
