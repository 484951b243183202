"""A pod of the stack that cannot run fails `up` within a bound, naming the pod,
Kubernetes' message and the field to change (components/platforms/kubernetes/pods.py),
whoever waits for it: a StatefulSet's or Deployment's roll (kube_rollout) or
the validation Job (kube_job_run), whose outcome is said as on the local
platform (mirrorstack.validation.outcome). Pure code on pod statuses as the
API server returns them, the waits against a stand-in kubectl. On a real
cluster: tests/integration/test_kubernetes_platform.py."""
from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from mirrorstack.platforms.kubernetes import job_run as kube_job_run, pods as kube_pods, rollout as kube_rollout
from mirrorstack.platforms.base import ServiceGroup
from mirrorstack.spark.report import summary_text
from mirrorstack.mm2.validation_reports import PRINTED_MARK, printed_line, printed_report
from mirrorstack.validation.job_config import validation_summary
from mirrorstack.validation.outcome import JOB_OUTPUT, failed_message, is_progress, printed_outcome

from tests.support.job_reports import report

# What kube-scheduler 1.34 writes on a pod asking more CPU than the node has.
NO_CPU = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption "
          "victims found for incoming pod.")
NO_CLAIM = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are available"
TAINTED = "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: kafka}."


def pod(name="central-broker-0-0", *, unschedulable: str | None = None, waiting: str | None = None,
        phase="Pending", cpu="64", init=False, image="apache/kafka:4.3.1") -> dict:
    status: dict = {"phase": phase, "conditions": []}
    if unschedulable is not None:
        status["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": unschedulable, "lastTransitionTime": "2026-01-01T00:00:00Z"})
    if waiting is not None:
        status["initContainerStatuses" if init else "containerStatuses"] = [{
            "name": "kafka", "image": image, "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": waiting, "message": f'Back-off pulling image "{image}"'}}}]
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "kafka", "image": image,
                                     "resources": {"requests": {"cpu": cpu, "memory": "2304Mi"}}}]},
            "status": status}


BROKER = {**ServiceGroup.brokers("central").sizing, "image": "images.kafka",
          "storage": "kubernetes.storage.class_name"}


def test_an_unschedulable_pod_and_a_failing_pull_are_read_from_its_status():
    assert kube_pods.blocked(pod(unschedulable=NO_CPU)) == [
        kube_pods.Blocked("central-broker-0-0", kube_pods.UNSCHEDULABLE, "Unschedulable", NO_CPU)]
    (pull,) = kube_pods.blocked(pod(phase="Pending", waiting="ImagePullBackOff", init=True))
    assert (pull.kind, pull.reason, pull.container, pull.image) == (
        kube_pods.IMAGE, "ImagePullBackOff", "kafka", "apache/kafka:4.3.1")
    # a container merely starting, or a running pod, keeps nothing from running
    assert kube_pods.blocked(pod(waiting="ContainerCreating")) == []
    assert kube_pods.blocked(pod(phase="Running")) == []
    assert kube_pods.blocked({}) == []


def test_a_pod_fails_the_wait_only_once_held_for_the_bound():
    watch = kube_pods.PodWatch(seconds=45)
    stuck = [pod(unschedulable=NO_CPU)]
    assert watch.overdue(watch.observe(stuck, 100.0), 100.0) == []
    assert watch.overdue(watch.observe(stuck, 144.0), 144.0) == []
    (late,) = watch.overdue(watch.observe(stuck, 145.0), 145.0)
    assert late.pod == "central-broker-0-0"
    # scheduled in between (a claim provisioned, a node freed): its clock starts over
    watch.observe([pod(phase="Running")], 146.0)
    assert watch.overdue(watch.observe(stuck, 150.0), 150.0) == []
    # a cluster autoscaler adding a node for it: it may take SCALE_UP_SECONDS
    watch.scaling_up(late)
    assert watch.overdue(watch.observe(stuck, 200.0), 200.0) == []
    assert kube_pods.scaling_up([{"reason": "TriggeredScaleUp"}]) and not kube_pods.scaling_up([{"reason": "x"}])


@pytest.mark.parametrize("message, field", [
    (NO_CPU, "lower `clusters.central.resources.cpus`"),
    ("0/3 nodes are available: 3 Insufficient memory.", "lower `clusters.central.resources.memory_mib`"),
    (NO_CLAIM, "check `kubernetes.storage.class_name`"),
    ("0/2 nodes are available: 2 node(s) had volume node affinity conflict.", "check `kubernetes.storage.class_name`"),
    (TAINTED, "the cluster's nodes cannot take the pod"),
])
def test_the_fix_names_the_field_that_decides_the_schedulers_reason(message, field):
    (b,) = kube_pods.blocked(pod(unschedulable=message))
    assert kube_pods.fix(b, BROKER).startswith(field)


def test_the_message_names_the_pod_the_reason_what_it_asks_and_the_field():
    (b,) = kube_pods.blocked(pod(unschedulable=NO_CPU))
    said = kube_pods.explain(b, pod(unschedulable=NO_CPU), BROKER, "mirrorstack-lab", 46)
    assert said == (
        f"pod mirrorstack-lab/central-broker-0-0 (a broker of cluster central) cannot be scheduled (46s): {NO_CPU}; "
        "it requests cpu 64, memory 2304Mi; fix: lower `clusters.central.resources.cpus`, or give the cluster a "
        "node with that much cpu free, then run `pulumi up` again (`kubectl describe pod -n mirrorstack-lab "
        "central-broker-0-0` shows its events)")
    (pull,) = kube_pods.blocked(pod(waiting="ErrImagePull", image="apache/kafka:9.9"))
    said = kube_pods.explain(pull, None, BROKER, "mirrorstack-lab", 45)
    assert "cannot pull image apache/kafka:9.9 of container kafka (ErrImagePull for 45s)" in said
    assert "fix: `images.kafka` must name an image the cluster's nodes can pull" in said
    # a controller's and the validation Job's CPU request is mirrorstack's own: no field to lower
    controller = ServiceGroup.controllers("central").sizing
    assert controller == {"what": "a controller of cluster central"}
    assert "its cpu request is fixed" in kube_pods.fix(b, controller)
    assert ServiceGroup.workers("eu", "central").sizing["cpu"] == "connect.eu.resources.cpus"


# ------------------------------------------------------------------ the job's outcome, as local says it

def test_the_printed_report_gives_the_summary_a_report_record_gives_even_when_trimmed():
    big = report(failures=())
    big["groups"][0]["samples"] = {"extras": [{"topic": "orders", "partition": 0, "target_offset": i,
                                               "key": "k" * 40} for i in range(400)]}  # ~30 kB
    line = printed_line(big)
    assert len(line.encode()) <= 15_000 + len(PRINTED_MARK)
    lines = ["validate_replication: done", *summary_text(big).splitlines(), line]
    assert printed_report(lines)["trimmed"] == ["lag", "samples"]
    summary = JOB_OUTPUT.printed_summary(lines)
    assert summary == validation_summary(big)  # what a run whose report came by its topic shows
    assert summary["flows"]["us->central"]["duplicates"] == 27 and summary["records_checked"] == 650
    # no printed report (a job of an older image): the summary lines still say how it went
    assert JOB_OUTPUT.printed_summary(lines[:-1]) == {"status": "passed", "passed": True, "failures": []}
    assert printed_report([line[:-10]]) is None  # cut short on its way


def test_the_printed_summary_is_read_back_with_its_failures():
    lines = ["26/01/01 INFO SparkContext: Running Spark", "validate_replication: snapshot taken",
             *summary_text(report()).splitlines(), "26/01/01 INFO SparkContext: Successfully stopped SparkContext"]
    outcome = printed_outcome(lines)
    assert (outcome["status"], outcome["passed"]) == ("failed", False)
    assert outcome["failures"] == ["central.orders on c:9092: duplicates 27 > tolerance 0"]
    assert outcome["summary"] == summary_text(report()).splitlines()
    assert all(is_progress(line) for line in outcome["summary"]) and not is_progress(lines[0])
    assert printed_outcome(summary_text(report(failures=())).splitlines())["passed"] is True
    assert printed_outcome(["error: the validation could not run: boom"]) is None


# ------------------------------------------------------------------ the waits, against a stand-in kubectl

# Answers from files in its folder: `get pods` → pods.json, `get job/..` → job.json, `get pod/..` → pod.json,
# `get statefulset/..` → statefulset.json, `logs` → log.txt, `rollout status` waits, `delete` does nothing;
# every call is recorded in calls.txt.
KUBECTL = """#!{python}
import json, os, sys, time
folder = {folder!r}
args = sys.argv[1:]
open(os.path.join(folder, "calls.txt"), "a").write(" ".join(args) + "\\n")
verb = args[args.index("--namespace") + 2]
rest = args[args.index("--namespace") + 3:]
def read(name, default):
    path = os.path.join(folder, name)
    return open(path).read() if os.path.exists(path) else default
if verb == "rollout":
    time.sleep(30)
elif verb == "logs":
    sys.stdout.write(read("log.txt", ""))
elif verb == "get" and rest[0] == "pods":
    print(json.dumps({{"items": json.loads(read("pods.json", "[]"))}}))
elif verb == "get" and rest[0].startswith("job/"):
    print(read("job.json", "{{}}"))
elif verb == "get" and rest[0].startswith("pod/"):
    print(read("pod.json", "{{}}"))
elif verb == "get" and rest[0] == "events":
    print(json.dumps({{"items": []}}))
elif verb == "get" and rest[0].startswith("statefulset/"):
    print(read("statefulset.json", "{{}}"))
"""


@pytest.fixture
def kubectl(tmp_path, monkeypatch):
    script = tmp_path / "kubectl"
    script.write_text(KUBECTL.format(python=sys.executable, folder=str(tmp_path)))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(kube_pods, "STUCK_SECONDS", 0.5)
    monkeypatch.setattr(kube_rollout, "POLL_SECONDS", 0.2)
    monkeypatch.setattr(kube_job_run, "POLL_SECONDS", 0.2)
    monkeypatch.setattr(kube_job_run, "RUNNING_POLL_SECONDS", 0.2)
    return tmp_path


def test_a_roll_whose_pod_cannot_be_scheduled_fails_at_once_naming_pod_reason_and_field(kubectl, capsys):
    (kubectl / "pods.json").write_text(json.dumps([pod(unschedulable=NO_CPU)]))
    props = {"namespace": "mirrorstack-lab", "name": "central-broker-0", "context": None, "kind": "statefulset",
             "selector": "app.kubernetes.io/instance=central-broker-0", "fields": BROKER, "generation": 2}
    with pytest.raises(kube_rollout.RolloutFailed) as failed:
        kube_rollout.wait_rolled(props)
    said = str(failed.value)
    assert said.startswith("statefulset mirrorstack-lab/central-broker-0 did not roll: pod mirrorstack-lab/"
                           "central-broker-0-0 (a broker of cluster central) cannot be scheduled")
    assert NO_CPU in said and "fix: lower `clusters.central.resources.cpus`" in said
    calls = (kubectl / "calls.txt").read_text()
    assert "get pods -l app.kubernetes.io/instance=central-broker-0 -o json" in calls
    assert "rollout status statefulset/central-broker-0 --watch" in calls


def test_a_pod_of_the_previous_spec_that_never_ran_is_made_again_from_the_current_one(kubectl, capsys):
    """A StatefulSet waits for its pod to become Ready before it replaces it: after the field is fixed,
    the pod the failed `up` left (Pending, of the previous revision) would hold the roll for ever."""
    left = pod(unschedulable=NO_CPU)
    left["metadata"]["labels"] = {"controller-revision-hash": "central-broker-0-7d9f"}
    (kubectl / "pods.json").write_text(json.dumps([left]))
    (kubectl / "statefulset.json").write_text(json.dumps({"status": {"updateRevision": "central-broker-0-5c4b"}}))
    props = {"namespace": "mirrorstack-lab", "name": "central-broker-0", "context": None, "kind": "statefulset",
             "fields": BROKER, "generation": 3}
    with pytest.raises(kube_rollout.RolloutFailed, match="cannot be scheduled"):  # the stand-in makes no new pod
        kube_rollout.wait_rolled(props)
    calls = (kubectl / "calls.txt").read_text().splitlines()
    assert sum(c.endswith("delete pod/central-broker-0-0 --wait=false") for c in calls) == 1  # once, at once
    assert ("mirrorstack: pod central-broker-0-0 was made from the previous spec and never ran (Unschedulable): "
            "deleting it") in capsys.readouterr().err


JOB_PROPS = {"name": "validation-job", "namespace": "mirrorstack-lab", "job": "validation-job", "context": None,
             "uid": "0c1d", "timeout_seconds": "60",
             "fields": {"what": "the validation Job", "memory": "validation.driver_memory", "image": "images.spark"},
             "where": {"platform": "kubernetes", "namespace": "mirrorstack-lab", "job": "validation-job",
                       "cron_job": None, "logs": "kubectl logs --namespace mirrorstack-lab job/validation-job"}}


def _ended(code: int, reason: str = "Error") -> dict:
    return {"metadata": {"name": "validation-job-x7k2p"}, "status": {"phase": "Failed" if code else "Succeeded",
            "containerStatuses": [{"name": "validate", "state": {"terminated": {"exitCode": code, "reason": reason}}}]}}


def test_a_failed_validation_fails_up_with_its_report_and_failures_as_on_local(kubectl, capsys):
    text = summary_text(report())
    (kubectl / "log.txt").write_text(f"26/01/01 INFO SparkContext: stopping\nvalidate_replication: waiting\n{text}\n")
    (kubectl / "pods.json").write_text(json.dumps([_ended(1)]))
    (kubectl / "pod.json").write_text(json.dumps(_ended(1)))
    (kubectl / "job.json").write_text(json.dumps({"status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}))
    with pytest.raises(kube_job_run.ValidationFailed) as failed:
        kube_job_run.run(JOB_PROPS, JOB_OUTPUT)
    assert str(failed.value) == failed_message("validation-job", "`kubectl logs --namespace mirrorstack-lab "
                                               "job/validation-job`", report()["failures"])
    shown = capsys.readouterr().err
    # the report, line by line as local shows it (its progress), the Spark log lines left out
    assert all(f"mirrorstack: {line}\n" in shown for line in text.splitlines()) and "SparkContext" not in shown
    assert "controller-uid=0c1d" in (kubectl / "calls.txt").read_text()  # this Job's pod only


def test_a_passed_run_reports_its_status_and_a_killed_job_says_why(kubectl, capsys):
    (kubectl / "log.txt").write_text(summary_text(report(failures=())) + "\n" + printed_line(report(failures=())) + "\n")
    (kubectl / "pods.json").write_text(json.dumps([_ended(0, "Completed")]))
    (kubectl / "job.json").write_text(json.dumps({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}))
    outs = kube_job_run.run(JOB_PROPS, JOB_OUTPUT)
    assert (outs["job"], outs["status"], outs["passed"], outs["failures"]) == ("validation-job", "passed", True, [])
    assert outs["flows"]["us->central"]["matched"] == 650 and outs["records_checked"] == 650  # as local's output
    shown = capsys.readouterr().err
    assert "mirrorstack: validation-job: validation passed" in shown
    assert PRINTED_MARK not in shown  # the report line is read, not shown
    # out of memory: not a failed validation but a job that could not run, and the field that sizes it
    (kubectl / "log.txt").write_text("validate_replication: reading orders\n")
    (kubectl / "pods.json").write_text(json.dumps([_ended(137, "OOMKilled")]))
    (kubectl / "job.json").write_text(json.dumps({"status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the "
         "specified backoff limit"}]}}))
    with pytest.raises(kube_job_run.JobRunFailed, match=r"could not run \(exit 137\) \(Job BackoffLimitExceeded: "
                       r"Job has reached the specified backoff limit; the pod ran out of its memory limit "
                       r"\(OOMKilled\); fix: raise `validation.driver_memory`\)") as failed:
        kube_job_run.run(JOB_PROPS, JOB_OUTPUT)
    assert not isinstance(failed.value, kube_job_run.ValidationFailed)


def test_a_job_whose_pod_cannot_be_scheduled_fails_within_the_bound(kubectl):
    (kubectl / "pods.json").write_text(json.dumps([pod("validation-job-x7k2p", unschedulable="0/1 nodes are "
                                                       "available: 1 Insufficient memory.", cpu="250m")]))
    (kubectl / "job.json").write_text(json.dumps({"status": {}}))
    with pytest.raises(kube_job_run.JobRunFailed, match=r"validation-job: the validation Job cannot run: pod "
                       r"mirrorstack-lab/validation-job-x7k2p \(the validation Job\) cannot be scheduled .*Insufficient "
                       r"memory.*fix: lower `validation.driver_memory`"):
        kube_job_run.run(JOB_PROPS, JOB_OUTPUT)


def test_the_failover_switch_whose_pod_cannot_be_scheduled_fails_before_anything_changed(kubectl):
    from mirrorstack.failover import kube_job
    (kubectl / "pods.json").write_text(json.dumps([pod("mirrorstack-switch-1-x", unschedulable=NO_CPU, cpu="100m")]))
    runner = {"namespace": "mirrorstack-dr", "context": None}
    with pytest.raises(kube_job.SwitchJobFailed, match=r"the switch cannot run, nothing was changed: pod "
                       r"mirrorstack-dr/mirrorstack-switch-1-x \(the failover switch\) cannot be scheduled .*"
                       r"Insufficient cpu.*it requests cpu 100m.*its cpu request is fixed"):
        kube_job.wait_started(kube_job.Kubectl(runner), "mirrorstack-switch-1", progress=lambda _m: None)
