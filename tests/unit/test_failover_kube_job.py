"""The failover switch as a Kubernetes Job (components/failover/kube_job.py),
without a cluster: the code it ships imports with nothing but what the spark
image has, the spec reaches Connect by in-cluster names, the manifests hold no
credential outside the Secret and validate strictly, the log is read back into
the report or the gate's refusal. On a real cluster:
tests/integration/test_kubernetes_platform.py (a planned failover)."""
from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import zipfile

import kubernetes_validate
import pytest

from mirrorstack.failover import kube_job
from mirrorstack.failover.in_pod import REFUSED_MARK, REPORT_MARK
from mirrorstack.failover.procedure import GateFailed
from mirrorstack.platforms.kubernetes.manifests import KUBERNETES_VERSION
from tools.images import switch_packages

RUNNER = {"kind": "kubernetes-job", "namespace": "mirrorstack-dr", "context": None, "image": "mirrorstack/spark:4",
          "uid": 185, "cluster_domain": "cluster.local",
          "clients": {"standby": {"secret": "standby-client", "dir": "/etc/mirrorstack/clients/standby"},
                      "primary": {"secret": "primary-client", "dir": "/etc/mirrorstack/clients/primary"}}}
PASSWORD = "rest-Pa55-word"
SPEC = {"from": "primary", "to": "standby", "mode": "planned",
        "clusters": {"primary": {"bootstrap": "primary-broker-0.mirrorstack-dr.svc.cluster.local:9092", "client": {}}},
        "flow": {"description": {"name": "primary->standby", "source": "primary", "target": "standby"}, "connect": {
            "connect_url": "kube://mirrorstack-dr/service/connect-standby-0:8083?context=prod",
            "connect_urls": ["kube://mirrorstack-dr/service/connect-standby-0:8083?context=prod",
                             "kube://mirrorstack-dr/service/connect-standby-1:8083"],
            "connect_auth": {"username": "mirrorstack", "password": PASSWORD}}},
        "back_flow": None, "groups": None, "gate": {"in_flight": 0, "wait_seconds": 90.0}}


def test_the_shipped_code_imports_with_only_what_the_spark_image_has(tmp_path):
    """No site-packages (-S): only the zip and the packages tools/images.py copies into the image;
    every mirrorstack module comes from the zip, and neither pulumi nor pydantic is needed."""
    archive = tmp_path / "switch.zip"
    archive.write_bytes(kube_job.code_zip())
    image_site = tmp_path / "site"
    image_site.mkdir()
    for name, folder in switch_packages():
        (image_site / name.removeprefix("python-packages/")).symlink_to(folder)
    probe = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
             "import mirrorstack.failover.in_pod, mirrorstack.failover.procedure, mirrorstack.connect.api\n"
             "import confluent_kafka.admin\n"
             "mods = {n: getattr(m, '__file__', '') or '' for n, m in sys.modules.items() if n.startswith('mirrorstack')}\n"
             "print(sorted(n for n, f in mods.items() if not f.startswith(sys.argv[1])))\n"
             "print(sorted(n for n in sys.modules if n.split('.')[0] in ('pulumi', 'pydantic', 'requests')))")
    done = subprocess.run([sys.executable, "-S", "-c", probe, str(archive), str(image_site)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "[]"], done.stdout


def test_the_code_zip_is_the_same_bytes_each_time_and_fits_a_secret():
    first = kube_job.code_zip()
    assert first == kube_job.code_zip()
    names = zipfile.ZipFile(io.BytesIO(first)).namelist()
    assert "mirrorstack/failover/procedure.py" in names and "mirrorstack/mm2/flows.py" in names
    assert len(base64.b64encode(first)) < 900_000  # a Secret holds at most 1 MiB


def test_connect_is_reached_by_its_in_cluster_name():
    spec = kube_job.in_cluster_spec(SPEC, "cluster.local")
    connect = spec["flow"]["connect"]
    assert connect["connect_url"] == "http://connect-standby-0.mirrorstack-dr.svc.cluster.local:8083"
    assert connect["connect_urls"][1] == "http://connect-standby-1.mirrorstack-dr.svc.cluster.local:8083"
    assert SPEC["flow"]["connect"]["connect_url"].startswith("kube://")  # the caller's spec is left alone


def test_the_manifests_keep_credentials_in_the_secret_and_validate():
    secret, job = kube_job.manifests("mirrorstack-switch-1", kube_job.in_cluster_spec(SPEC, "cluster.local"),
                                     RUNNER, kube_job.code_zip(), 900)
    for manifest in (secret, job):
        kubernetes_validate.validate(manifest, desired_version=KUBERNETES_VERSION, strict=True)
    assert PASSWORD not in json.dumps(job)
    assert PASSWORD in base64.b64decode(secret["data"]["spec.json"]).decode()
    pod = job["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"]}
    # each client Secret where the spec's ${file:...} references point, as in the Connect workers
    assert {path: secrets[name] for path, name in mounts.items()} == {
        "/switch": "mirrorstack-switch-1", "/etc/mirrorstack/clients/primary": "primary-client",
        "/etc/mirrorstack/clients/standby": "standby-client"}
    assert job["spec"]["backoffLimit"] == 0 and pod["automountServiceAccountToken"] is False
    assert pod["containers"][0]["command"][-1] == "/switch/spec.json"


def test_the_log_gives_the_report_or_the_gates_refusal():
    report = {"from": "primary", "to": "standby", "groups": {}}
    assert kube_job.outcome("j", "ns", ["mirrorstack: failover: gate passed", REPORT_MARK + json.dumps(report)]) \
        == report
    with pytest.raises(GateFailed, match="records in flight"):
        kube_job.outcome("j", "ns", [REFUSED_MARK + json.dumps("3 records in flight; nothing was changed")])
    with pytest.raises(kube_job.SwitchJobFailed, match="(?s)ended without a report.*Traceback"):
        kube_job.outcome("j", "ns", ["mirrorstack: failover: gate passed", "Traceback (most recent call last):",
                                     "(exit code 1)"])


def test_the_switch_runs_as_a_job_when_the_props_carry_a_runner(monkeypatch):
    from mirrorstack.failover import procedure, switch
    ran = []
    monkeypatch.setattr(procedure, "run_switch", lambda spec, progress: pytest.fail("ran in the program"))
    monkeypatch.setattr(kube_job, "run_switch_job", lambda spec, runner, progress: ran.append(runner) or {
        "from": spec["from"], "to": spec["to"], "mode": "planned", "at": "2026-11-27T04:00:00+00:00", "gate": None, "notes": [], "groups": {}})
    flow = {"description": {"name": "primary->standby", "source": "primary", "target": "standby", "topics": [".*"]},
            "connectors": {"source": "s"}, "connect_name": "standby",
            "connect": {"connect_url": "kube://mirrorstack-dr/service/connect-standby-0:8083"}}
    olds = {"primary": "primary", "standby": "standby", "active": "primary", "forward": flow, "runner": RUNNER}
    result = switch.FailoverSwitchProvider().update("id", olds, {**olds, "active": "standby"})
    assert ran == [RUNNER] and result.outs["report"]["kind"] == "failover"
