"""A new platform is one folder: tests/support/recording_platform, a package of
its own that registers itself through the `mirrorstack.platforms` entry point
as any installed package would, runs the aggregation stack through the real
Pulumi engine (`preview`, `up`, an `up` with no change, `destroy`) by
recording what it is asked to run, with no file of mirrorstack naming it."""
import inspect
import json
import shutil
import subprocess
import sys

import pytest

from mirrorstack.platforms.base import Platform
from tests.support.stacks import REPO, stack_project

pytestmark = pytest.mark.integration

FOLDER = REPO / "tests" / "support" / "recording_platform"
THIS = "tests/integration/test_platform_plugin.py"
BROKER_MAIN, CONNECT_MAIN = "kafka.Kafka", "org.apache.kafka.connect.cli.ConnectDistributed"


def _installed(tmp_path):
    """The folder installed into a target folder as a package of its own: its
    metadata (the entry point) made by setuptools from its pyproject.toml (the
    venv has no `wheel` to build one, and the suite installs nothing), its
    modules beside it; the folder goes on the program's PYTHONPATH."""
    source, site = tmp_path / "source", tmp_path / "site"
    shutil.copytree(FOLDER, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    site.mkdir()
    made = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "egg_info", "--egg-base",
                           str(site)], cwd=source, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    info = next(site.glob("*.egg-info"))
    for package in (info / "top_level.txt").read_text().split():
        shutil.copytree(source / package, site / package)
    return site


def _git_status() -> set[str]:
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          capture_output=True, text=True, check=True)
    return {line[3:] for line in done.stdout.splitlines()}


def _records(project) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((project.local_dir / "recording").glob("*.json"))}


def _parameters(function) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


def test_the_aggregation_stack_runs_on_a_platform_installed_from_one_folder(tmp_path, monkeypatch):
    before = _git_status()
    site = _installed(tmp_path)
    assert "recording = recording_platform:register" in next(site.glob("*.egg-info/entry_points.txt")).read_text()
    monkeypatch.syspath_prepend(str(site))  # the installed copy holds to the Protocol, method by method
    from recording_platform.platform import RecordingPlatform
    methods = [name for name, member in vars(Platform).items() if inspect.isfunction(member) and not name.startswith("_")]
    assert {m: _parameters(getattr(RecordingPlatform, m)) for m in methods} == {
        m: _parameters(getattr(Platform, m)) for m in methods}

    with stack_project("aggregation", tmp_path, change=lambda topology: topology.update(platform="recording")) as project:
        project.env = {**project.env, "PYTHONPATH": str(site)}  # the program's and its dynamic providers'
        preview = project.run("preview", timeout=120)
        assert "recorded-us-broker-0" in preview.stdout and not (project.local_dir / "recording").exists()

        project.run("up", "--yes", "--skip-preview", timeout=120)
        records, outputs = _records(project), project.outputs()
        # every member of each set, with the command line its description makes
        java = {name: r for name, r in records.items() if r["kind"] == "java"}
        assert set(java) == {f"{alias}-{role}" for alias in ("us", "uk", "central")
                             for role in ("controller", "broker-0")} | {"connect-central-0"}
        for alias in ("us", "uk", "central"):
            controller, broker = java[f"{alias}-controller"], java[f"{alias}-broker-0"]
            assert controller["group"] == {"role": "controller", "cluster": alias}
            assert broker["group"] == {"role": "broker", "cluster": alias}
            for service in (controller, broker):
                folder = project.local_dir.resolve() / service["service"]
                assert service["argv"][0] == "/opt/java/bin/java" and service["main"] == BROKER_MAIN
                assert service["argv"][-2:] == [BROKER_MAIN, f"{folder}/server.properties"]
                assert [step[step.index("kafka.tools.StorageTool"):][:2] for step in service["prepare"]] == [
                    ["kafka.tools.StorageTool", "format"]]
                assert f"log.dirs={folder}/data" in service["files"]["server.properties"]
            # the broker listens where the stack's output says, and finds its controller where it listens
            properties = broker["files"]["server.properties"]
            assert f"listeners=PLAINTEXT://{outputs['clusters'][alias]}" in properties
            assert f"controller.quorum.voters=1@127.0.0.1:{int(controller['ports']['controller'])}" in properties
        worker = java["connect-central-0"]
        assert worker["group"] == {"role": "connect", "cluster": "central", "connect": "central"}
        assert worker["argv"][-2:] == [CONNECT_MAIN, f"{project.local_dir.resolve()}/connect-central-0/worker.properties"]
        assert f"bootstrap.servers={outputs['clusters']['central']}" in worker["files"]["worker.properties"]
        assert outputs["connect"]["central"] == "http://127.0.0.1:%d" % worker["ports"]["rest"]
        # the job and the supervisor recorded, not run
        assert records["validation-job"]["kind"] == "spark-job" and "spark-submit" in " ".join(records["validation-job"]["argv"])
        assert records["supervisor-central"]["argv"][:3] == ["python3", "-m", "mirrorstack.connect.supervisor"]
        assert outputs["validation"]["status"] == "recorded"
        # the flows' connectors, given to Connect's REST API (the platform's stub) and running
        connectors = json.loads((project.local_dir / "connect" / "connectors.json").read_text())
        assert {c["config"]["source.cluster.alias"] for c in connectors.values()} == {"us", "uk"}
        assert len(connectors) == 6 and {c["state"] for c in connectors.values()} == {"RUNNING"}
        assert {s["state"] for flow in outputs["flows"].values() for s in flow.values()} == {"RUNNING"}

        # asked the same again: no change
        project.run("up", "--yes", "--skip-preview", "--expect-no-changes", timeout=120)
        assert _records(project) == records

        project.run("destroy", "--yes", "--skip-preview", "--run-program", timeout=120)  # the stub answers the deletes
        assert _records(project) == {}
        assert json.loads((project.local_dir / "connect" / "connectors.json").read_text()) == {}

    # Nothing of mirrorstack names the platform, and the runs wrote nothing into the repo.
    named = subprocess.run(["git", "grep", "-l", "-e", "recording_platform", "-e", "platform: recording", "--",
                            "components", "spark", "__main__.py", "pyproject.toml", "Pulumi.yaml", "stacks"],
                           cwd=REPO, capture_output=True, text=True)
    assert named.returncode == 1 and named.stdout == "", named.stdout
    new = {path for path in _git_status() - before
           if not path.startswith("tests/support/recording_platform/") and path != THIS}
    assert new == set(), new
