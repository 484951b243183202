"""mirrorstack as a library: a wheel built from the repo, installed into the
example project's own venv (examples/edge-to-core), run through the real engine
against a stack of the repo's own program, found by StackReference."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from mirrorstack import toolchain
from tests.support.kafka_clients import create_topic, produce, wait_for_count
from tests.support.leftovers import leftover_processes
from tests.support.pulumi_cli import PulumiProject
from tests.support.stacks import REPO, stack_project

pytestmark = pytest.mark.integration


def run(*argv, cwd=None) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def example_venv(tmp_path_factory):
    """The wheel (with the Spark job inside) installed into a venv of its own."""
    work = tmp_path_factory.mktemp("library")
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(REPO), "-w", str(work / "dist"))
    (wheel,) = (work / "dist").glob("mirrorstack-*.whl")
    run(sys.executable, "-m", "venv", str(work / "venv"))
    python = work / "venv" / "bin" / "python"
    run(str(python), "-m", "pip", "install", "--quiet", str(wheel))
    return work, python


def test_the_wheel_carries_the_components_and_the_spark_job(example_venv):
    work, python = example_venv
    out = run(str(python), "-c", "import mirrorstack, mirrorstack.validation.package as v, pathlib; "
              "print(pathlib.Path(mirrorstack.__file__).parent); print(v.ENTRY_SCRIPT.read_text().splitlines()[0]); "
              "print(v.ENTRY_SCRIPT.is_symlink()); print(v.PACKAGE_DIR); "
              "print(len(v.job_zip()) > 0)", cwd=work)  # not the checkout's folder: the installed copy
    package, head, link, job_package, zipped = out.splitlines()[:5]
    assert "site-packages" in package and str(REPO) not in package  # the installed copy, not the checkout
    assert head.startswith("#!/usr/bin/env python3") and link == "False"
    assert "site-packages" in job_package and zipped == "True"  # the job's package is installed too


def test_example_project_mirrors_its_edge_cluster_into_another_stacks_cluster(example_venv, tmp_path):
    work, python = example_venv
    with stack_project("dev-copy", tmp_path) as core:
        core.run("up", "--yes", "--skip-preview", timeout=900)
        dev = core.outputs()["clusters"]["dev"]
        example = PulumiProject.__new__(PulumiProject)
        example.dir = tmp_path / "edge-to-core"
        shutil.copytree(REPO / "examples" / "edge-to-core", example.dir)
        (example.dir / "Pulumi.yaml").write_text((example.dir / "Pulumi.yaml").read_text().replace(
            "virtualenv: venv", f"virtualenv: {python.parent.parent}"))
        example.env = {**core.env, "PULUMI_PYTHON_CMD": str(python),
                       "MIRRORSTACK_TOOLS_DIR": str(toolchain.tools_dir())}
        example.local_dir = tmp_path / "edge-local"
        example.run("stack", "init", "edge")
        example.run("config", "set", "coreStack", "organization/mirrorstack/dev-copy")
        example.run("config", "set", "coreCluster", "dev")
        example.run("config", "set", "localDir", str(example.local_dir))
        example.run("config", "set", "portBase", str(int(core.run("config", "get", "mirrorstack:portBase").stdout) + 1000))
        try:
            example.run("up", "--yes", "--skip-preview", timeout=900)
            out = example.outputs()
            assert out["clusters"]["core"] == dev  # the other stack's cluster, by reference
            create_topic(out["clusters"]["edge"], "sensors.temperature", 2, 1)
            sent = produce(out["clusters"]["edge"], "sensors.temperature", 300)
            arrived = wait_for_count(dev, "edge.sensors.temperature", 300)
            assert sorted(r.value for r in arrived) == sorted(r.value for r in sent)
        finally:
            example.run("destroy", "--yes", "--skip-preview", timeout=600, check=False)
        assert leftover_processes(str(example.local_dir)) == []
        core.run("destroy", "--yes", "--skip-preview", timeout=600)
