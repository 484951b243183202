"""mirrorstack as a library: a wheel built from the repo, installed without
extras into the example project's own venv (examples/edge-to-core), run through the real engine
against a stack of the repo's own program, found by StackReference."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from mirrorstack import toolchain
from tests.support.kafka_clients import create_topic, produce, topic_names, wait_for_count
from tests.support.leftovers import leftover_processes
from tests.support.pulumi_cli import PulumiProject
from tests.support.services import _parallel
from tests.support.stacks import REPO, stack_project

pytestmark = pytest.mark.integration


def run(*argv, cwd=None) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def installed(report: Path) -> set[str]:
    """The distributions a `pip install --report` installed (or would install)."""
    return {canonicalize_name(item["metadata"]["name"]) for item in json.loads(report.read_text())["install"]}


@pytest.fixture(scope="module")
def example_venv(tmp_path_factory):
    """The wheel (with the Spark job inside) installed into an empty venv of its
    own, without extras, at the lock's versions (`-c requirements.txt`)."""
    work = tmp_path_factory.mktemp("library")
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(REPO), "-w", str(work / "dist"))
    (wheel,) = (work / "dist").glob("mirrorstack-*.whl")
    run(sys.executable, "-m", "venv", str(work / "venv"))
    python = work / "venv" / "bin" / "python"
    run(str(python), "-m", "pip", "install", "--quiet", "-c", str(REPO / "requirements.txt"),
        "--report", str(work / "base.json"), str(wheel))
    return work, python, wheel


def test_the_wheel_carries_the_package_the_spark_job_and_the_schema(example_venv):
    work, python, wheel = example_venv
    names = set(zipfile.ZipFile(wheel).namelist())
    folders = sorted(p.parent for p in [*(REPO / "components").rglob("__init__.py"), REPO / "spark" / "__init__.py"])
    for folder in folders:  # every package of the tree, under the import name
        package = "mirrorstack/spark" if folder.name == "spark" and folder.parent == REPO else \
            "/".join(["mirrorstack", *folder.relative_to(REPO / "components").parts])
        assert f"{package}/__init__.py" in names, folder
    assert {"mirrorstack/spark/validate_replication.py", "mirrorstack/schema/topology.schema.json",
            "mirrorstack/versions.env"} <= names
    assert not [n for n in names if n.startswith(("components/", "spark/", "tests/", "tools/"))]
    out = run(str(python), "-c", "import mirrorstack, mirrorstack.validation.package as v, pathlib; "
              "print(pathlib.Path(mirrorstack.__file__).parent); print(v.ENTRY_SCRIPT.read_text().splitlines()[0]); "
              "print(v.ENTRY_SCRIPT.is_symlink()); print(v.PACKAGE_DIR); "
              "print(len(v.job_zip()) > 0)", cwd=work)  # not the checkout's folder: the installed copy
    package, head, link, job_package, zipped = out.splitlines()[:5]
    assert "site-packages" in package and str(REPO) not in package  # the installed copy, not the checkout
    assert head.startswith("#!/usr/bin/env python3") and link == "False"
    assert "site-packages" in job_package and zipped == "True"  # the job's package is installed too


# What only an extra may bring: no test runner, Spark, Docker SDK, manifest checker or docs tool by default.
NOT_AT_RUNTIME = {"pytest", "pyspark", "py4j", "docker", "pulumi-docker", "pulumi-kubernetes",
                  "kubernetes-validate", "jsonschema", "mkdocs", "mkdocs-material"}


def test_an_empty_venv_gets_only_the_runtime_ranges_and_each_extra_only_what_it_needs(example_venv):
    work, python, wheel = example_venv
    base = installed(work / "base.json")
    print(f"\nwheel without extras: {len(base)} distributions installed")
    assert {"mirrorstack", "pulumi", "pydantic", "confluent-kafka", "cryptography"} <= base
    assert not base & NOT_AT_RUNTIME, base & NOT_AT_RUNTIME
    expected = {"spark": {"pyspark", "py4j"}, "docker": {"pulumi-docker", "docker"},  # docker: a remote engine's tunnel "kubernetes": {"pulumi-kubernetes"},
                "tests": {"pytest", "pytest-xdist", "pytest-timeout", "docker", "kubernetes-validate", "jsonschema",
                          "pyspark", "py4j", "pulumi-docker", "pulumi-kubernetes"},  # every platform's too
                "docs": {"mkdocs", "mkdocs-material"}}
    for extra, brings in expected.items():
        report = work / f"{extra}.json"
        run(str(python), "-m", "pip", "install", "--quiet", "--dry-run", "--report", str(report),
            "-c", str(REPO / "requirements.txt"), f"{wheel}[{extra}]")
        added = installed(report) - {"mirrorstack"}
        print(f"extra {extra}: +{len(added)} {sorted(added)}")
        assert brings <= added, (extra, added)
        assert added & NOT_AT_RUNTIME <= brings, (extra, added)  # nothing another extra is for


def test_a_platform_whose_extra_is_missing_is_refused_naming_the_extra(example_venv):
    work, python, _ = example_venv
    done = subprocess.run([str(python), "-c", "from mirrorstack.platforms import make_platform; "
                           "make_platform('kubernetes', 's', local_dir='.')"], cwd=work, capture_output=True, text=True)
    assert done.returncode == 1
    assert "platform: kubernetes" in done.stderr and "pip install 'mirrorstack[kubernetes]'" in done.stderr


def _dev_copy_copies_only_the_selected_topics(out: dict) -> None:
    """The repo's dev-copy stack (the core stack here, up anyway): orders and customers of prod
    copied to dev under their own names, payroll not, and no heartbeats or checkpoints."""
    prod, dev = out["clusters"]["prod"], out["clusters"]["dev"]
    for topic in ("orders", "customers", "payroll"):
        create_topic(prod, topic, 2, 1)
    sent = {topic: produce(prod, topic, 300, topic) for topic in ("orders", "customers", "payroll")}
    copies = _parallel([lambda t=t: wait_for_count(dev, t, 300) for t in ("orders", "customers")])
    for topic, copied in zip(("orders", "customers"), copies):
        assert sorted(r.value for r in copied) == sorted(r.value for r in sent[topic])
    names = topic_names(dev)
    assert "payroll" not in names
    assert "heartbeats" not in names and not any(n.endswith(".checkpoints.internal") for n in names)
    assert set(out["flows"]["prod->dev"]) == {"prod->dev.MirrorSourceConnector"}


def test_example_project_mirrors_its_edge_cluster_into_another_stacks_cluster(example_venv, tmp_path):
    """Through the engine with the wheel and no extra: the local platform needs none."""
    work, python, _ = example_venv
    with stack_project("dev-copy", tmp_path) as core:
        core.run("up", "--yes", "--skip-preview", timeout=900)
        dev = core.outputs()["clusters"]["dev"]
        _dev_copy_copies_only_the_selected_topics(core.outputs())
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
