"""The failover switch as a container on a docker stack's network
(components/failover/docker_container.py), without an engine: the runner the
docker platform gives the switch (its network, the Spark image, the pair's
client files as a secret, Connect's in-network names), the spec as the
container reaches Connect, the files written into it, and the dispatch. On a
real engine: tests/integration/test_docker_platform.py (a cutover)."""
from __future__ import annotations

import io
import json
import tarfile

import pytest
import yaml

from mirrorstack.failover import docker_container, elsewhere
from mirrorstack.failover.in_pod import REPORT_MARK
from mirrorstack.model.messages import TopologyError
from mirrorstack.model.spec import load_topology
from mirrorstack.platforms.docker.platform import DockerPlatform
from tests.support.pulumi_mocks import DYNAMIC, ROOT, SECRET_SIG, deploy, leaks, unwrap_secrets
from tests.support.stacks import on_platform

SPARK = "mirrorstack/spark:test"
INSIDE = {"127.0.0.1:18083": "connect-central-0:8083",
          "mirrorstack-secure-connect-central-0:8083": "connect-central-0:8083"}
CLIENTS = {"edge": {"dir": "/etc/mirrorstack/clients/edge", "files": {"ca.pem": "CA", "secrets.properties": "pw"}}}


def failover_topology(platform: str, images: dict | None = None):
    """The secure stack (SASL, mTLS, Connect's REST behind basic auth) as a one-way move edge → central."""
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.secure.yaml").read_text())["config"]["mirrorstack:topology"]
    return load_topology({**on_platform(document, platform), "images": images or {},
                          "failover": {"primary": "edge", "standby": "central", "active": "edge", "cutover": True}})


@pytest.fixture(scope="module")
def switch_inputs():
    topology = failover_topology("docker", {"spark": SPARK})
    mocks, built = deploy(lambda: DockerPlatform("secure", images=topology.images), topology=topology, stack="secure")
    (inputs,) = [r.inputs for r in mocks.resources if r.typ.startswith(DYNAMIC) and r.name == "failover"]
    return mocks, built, inputs


def test_a_docker_stacks_switch_runs_on_its_network_in_the_spark_image(switch_inputs):
    _, built, inputs = switch_inputs
    runner = unwrap_secrets(inputs["runner"])
    assert runner["kind"] == "docker-container"
    assert runner["network"] == "mirrorstack-secure" and runner["image"] == SPARK and runner["stack"] == "secure"
    # both sides' client files, where the clusters' `${file:...}` references point
    assert sorted(runner["clients"]) == ["central", "edge"]
    for alias, client in runner["clients"].items():
        assert client["dir"] == f"/etc/mirrorstack/clients/{alias}"
        referenced = json.dumps(unwrap_secrets(inputs["clusters"])[alias]["client"])
        assert all(f"{client['dir']}/{name}" in referenced for name in client["files"]), (alias, referenced)
    # Connect, at its published address in the flow's piece, has its in-network name in the runner
    url = unwrap_secrets(inputs["forward"])["connect"]["connect_url"]
    assert docker_container.in_network_url(url, runner["inside"]) == "http://connect-central-0:8083"


def test_the_runners_client_files_are_a_secret_in_state(switch_inputs):
    mocks, _, inputs = switch_inputs
    assert SECRET_SIG in json.dumps(inputs["runner"])
    assert leaks(mocks) == []


def test_the_spec_reaches_connect_by_its_in_network_names():
    tunnel = "docker://mirrorstack-secure-connect-central-0:8083?host=tcp%3A%2F%2F10.0.0.5%3A2376"
    spec = {"flow": {"connect": {"connect_url": "http://127.0.0.1:18083",
                                 "connect_urls": ["http://127.0.0.1:18083", tunnel, "https://connect.example.com"]}},
            "back_flow": None}
    out = docker_container.in_network_spec(spec, INSIDE)
    assert out["flow"]["connect"] == {"connect_url": "http://connect-central-0:8083", "connect_urls": [
        "http://connect-central-0:8083", "http://connect-central-0:8083", "https://connect.example.com"]}
    assert spec["flow"]["connect"]["connect_url"] == "http://127.0.0.1:18083"  # the caller's spec is its own


def test_the_container_gets_spec_code_and_client_files_readable_by_its_user_only():
    written = docker_container.archive({"from": "edge"}, b"zip", CLIENTS, 185)
    with tarfile.open(fileobj=io.BytesIO(written)) as tar:
        entries = {m.name: (oct(m.mode), m.uid, m.gid, tar.extractfile(m).read()) for m in tar.getmembers()}
    assert entries == {
        "switch/spec.json": ("0o400", 185, 185, b'{"from": "edge"}'),
        "switch/switch.zip": ("0o400", 185, 185, b"zip"),
        "etc/mirrorstack/clients/edge/ca.pem": ("0o600", 185, 185, b"CA"),
        "etc/mirrorstack/clients/edge/secrets.properties": ("0o600", 185, 185, b"pw")}


def test_the_switch_runs_in_a_container_when_the_runner_says_docker(monkeypatch):
    from mirrorstack.failover import kube_job, procedure, switch
    ran = []
    monkeypatch.setattr(procedure, "run_switch", lambda spec, progress: pytest.fail("ran in the program"))
    monkeypatch.setattr(kube_job, "run_switch_job", lambda *a, **k: pytest.fail("ran as a Job"))
    monkeypatch.setattr(docker_container, "run_switch_container", lambda spec, runner, progress: ran.append(
        runner) or {"from": spec["from"], "to": spec["to"], "mode": "planned", "at": "2026-12-02T16:00:00+00:00",
                    "gate": None, "notes": [], "groups": {}})
    runner = {"kind": "docker-container", "network": "mirrorstack-dr"}
    flow = {"description": {"name": "primary->standby", "source": "primary", "target": "standby", "topics": [".*"]},
            "connectors": {"source": "s"}, "connect_name": "standby", "connect": {"connect_url": "http://127.0.0.1:1"}}
    olds = {"primary": "primary", "standby": "standby", "active": "primary", "forward": flow, "runner": runner}
    result = switch.FailoverSwitchProvider().update("id", olds, {**olds, "active": "standby"})
    assert ran == [runner] and result.outs["report"]["kind"] == "failover"


def test_what_the_container_printed_reads_back_as_the_report():
    lines = ["mirrorstack: failover: gate passed", REPORT_MARK + json.dumps({"groups": {}})]
    assert elsewhere.outcome("container c", lines) == {"groups": {}}
    with pytest.raises(elsewhere.SwitchRunFailed, match="(?s)container c ended without a report.*exit code 124"):
        elsewhere.outcome("container c", ["(exit code 124 (it ran out of time and was stopped))"])


@pytest.mark.parametrize("platform", ["docker", "kubernetes"])
def test_failover_in_containers_needs_a_spark_image_with_the_kafka_client(platform):
    with pytest.raises(TopologyError, match=rf"images\.spark: failover on {platform} runs its switch in a "
                                            r"container of the Spark image.*confluent_kafka.*make images"):
        failover_topology(platform)
    failover_topology("local")  # the switch runs in the program there
