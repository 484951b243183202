"""A failover switch run as a Job in the stack's Kubernetes namespace.

The switch reads and writes both clusters of the pair (confluent_kafka), whose
bootstrap addresses are in-cluster names: from where `pulumi up` runs, outside
the cluster, they do not resolve, and a port-forward cannot stand in for
Kafka (clients go on to every broker's advertised address). So the provider
starts the switch inside: a Secret with the spec (it holds the Connect REST
credentials) and the code it runs (a zip of the pure modules in_pod imports), a Job in
the spark image (python3, confluent_kafka, urllib3) mounting it and the
pair's client Secrets where their `${file:...}` references point. Its log is
the switch's progress, shown as it comes, then its report. The Secret and
the Job are deleted whatever happened. kubectl authenticates as the user's
own does, in the provider's context: a remote cluster works the same.

Rights (docs/operations/platforms.md): create and delete Secrets and Jobs,
list pods, get pods/log."""
from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid

from mirrorstack.failover import elsewhere
from mirrorstack.failover.elsewhere import MOUNT, SWITCH_SECONDS, code_zip
from mirrorstack.platforms.kubernetes import pods as kube_pods, tunnel as kube_tunnel

START_SECONDS = 300  # for the pod to be scheduled and its container to start
# What sizes the switch's pod, for a message about a pod that cannot run (its requests are fixed).
FIELDS = {"what": "the failover switch", "image": "images.spark"}
POLL_SECONDS = 1.0
# A container waiting for one of these will not start without a change: fail at once, not at the deadline.
STUCK = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
         "CreateContainerConfigError", "CreateContainerError")
SwitchJobFailed = elsewhere.SwitchRunFailed


def in_cluster_spec(spec: dict, cluster_domain: str) -> dict:
    """The spec with each Connect URL as a pod reaches it (a kube:// address → the Service's name)."""
    out = json.loads(json.dumps(spec))
    for key in ("flow", "back_flow"):
        connect = (out.get(key) or {}).get("connect")
        if connect:
            connect["connect_url"] = kube_tunnel.inside(connect["connect_url"], cluster_domain)
            if connect.get("connect_urls"):
                connect["connect_urls"] = [kube_tunnel.inside(u, cluster_domain) for u in connect["connect_urls"]]
    return out


def manifests(name: str, spec: dict, runner: dict, code: bytes, deadline_seconds: int) -> list[dict]:
    """The Secret (spec and code) and the Job that runs the switch once."""
    namespace, uid = runner["namespace"], int(runner["uid"])
    labels = {"app.kubernetes.io/name": "failover-switch", "app.kubernetes.io/instance": name,
              "app.kubernetes.io/part-of": "mirrorstack", "app.kubernetes.io/managed-by": "mirrorstack"}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta,
              "data": {"spec.json": base64.b64encode(json.dumps(spec).encode()).decode(),
                       "switch.zip": base64.b64encode(code).decode()}}
    clients = sorted((runner.get("clients") or {}).items())
    volumes = [{"name": "switch", "secret": {"secretName": name, "defaultMode": 0o400}},
               *({"name": f"client-{i}", "secret": {"secretName": c["secret"], "defaultMode": 0o400}}
                 for i, (_, c) in enumerate(clients))]
    mounts = [{"name": "switch", "mountPath": MOUNT, "readOnly": True},
              *({"name": f"client-{i}", "mountPath": c["dir"], "readOnly": True} for i, (_, c) in enumerate(clients))]
    container = {
        "name": "switch", "image": runner["image"], "imagePullPolicy": "IfNotPresent",
        "command": elsewhere.command(),
        "env": [{"name": k, "value": v} for k, v in elsewhere.ENVIRONMENT.items()],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": mounts,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "readOnlyRootFilesystem": True}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "backoffLimit": 0,  # a switch runs once: a second try would meet a half-done first one
        "activeDeadlineSeconds": deadline_seconds, "ttlSecondsAfterFinished": 3600,
        "template": {"metadata": {"labels": labels}, "spec": {
            "restartPolicy": "Never", "automountServiceAccountToken": False,
            # fsGroup: the 0400 Secret files are group-readable for the switch's user
            "securityContext": {"runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": True, "fsGroup": uid,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container], "volumes": volumes}}}}
    return [secret, job]


class Kubectl:
    def __init__(self, runner: dict):
        self.namespace = runner["namespace"]
        self.prefix = kube_tunnel.kubectl_in(self.namespace, runner.get("context"))

    def __call__(self, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        done = subprocess.run([*self.prefix, *args], input=stdin, capture_output=True, text=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
        if done.returncode != 0:
            raise SwitchJobFailed(f"kubectl {' '.join(args[:2])}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def follow(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([*self.prefix, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL)


def _pod(kubectl: Kubectl, job: str) -> dict | None:
    pods = json.loads(kubectl("get", "pods", "-l", f"job-name={job}", "-o", "json"))["items"]
    return pods[0] if pods else None


def _waiting(pod: dict) -> tuple[str, str] | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") in STUCK:
            return waiting["reason"], waiting.get("message", "")
    return None


def wait_started(kubectl: Kubectl, job: str, progress) -> str:
    """The pod's name once its container has started (or ended); a pod that
    cannot be scheduled fails within kube_pods.STUCK_SECONDS."""
    started, said = time.monotonic(), time.monotonic()
    watch = kube_pods.PodWatch()
    while True:
        pod = _pod(kubectl, job)
        if pod is not None:
            name = pod["metadata"]["name"]
            if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
                return name
            if stuck := _waiting(pod):
                raise SwitchJobFailed(f"the switch's pod {name} cannot start: {stuck[0]}: {stuck[1][:300]}; nothing "
                                      f"was changed; fix: make the image {_image(pod)} available to the cluster "
                                      "(images: in the topology), then run `pulumi up` again")
            now = time.monotonic()
            for b in watch.overdue(watch.observe([pod], now), now):
                raise SwitchJobFailed(f"the switch cannot run, nothing was changed: "
                                      f"{kube_pods.explain(b, pod, FIELDS, kubectl.namespace, now - watch.since[b.key])}")
        waited = time.monotonic() - started
        if waited > START_SECONDS:
            why = json.dumps((pod or {}).get("status", {}).get("conditions", []))[:400] if pod else "no pod created"
            raise SwitchJobFailed(f"the switch's Job {kubectl.namespace}/{job} did not start within {START_SECONDS}s "
                                  f"({why}); nothing was changed; fix: `kubectl describe job -n {kubectl.namespace} "
                                  f"{job}`, then run `pulumi up` again")
        if time.monotonic() - said > 15:
            progress(f"waiting for the switch's pod to start ({waited:.0f}s)")
            said = time.monotonic()
        time.sleep(POLL_SECONDS)


def _image(pod: dict) -> str:
    return ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image", "?")


def follow_log(kubectl: Kubectl, pod: str, progress) -> list[str]:
    """Every line the switch printed, its progress passed on as it comes. A
    follow cut short (the kubelet's stream can end early) is read again,
    whole, once the container has ended."""
    lines: list[str] = []
    with kubectl.follow("logs", "--follow", f"pod/{pod}") as stream:
        for line in stream.stdout:
            lines.append(line.rstrip("\n"))
            if (said := elsewhere.progress_of(line)) is not None:
                progress(said)
    if elsewhere.finished(lines):
        return lines
    exit_code = wait_ended(kubectl, pod)
    whole = kubectl("logs", f"pod/{pod}").splitlines()
    for line in whole[len(lines):]:
        if (said := elsewhere.progress_of(line)) is not None:
            progress(said)
    return [*whole, f"(exit code {exit_code})"]


def wait_ended(kubectl: Kubectl, pod: str, seconds: float = SWITCH_SECONDS) -> int | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = json.loads(kubectl("get", f"pod/{pod}", "-o", "json")).get("status") or {}
        for container in status.get("containerStatuses") or []:
            ended = (container.get("state") or {}).get("terminated")
            if ended:
                return ended.get("exitCode")
        time.sleep(POLL_SECONDS)
    return None


def outcome(job: str, namespace: str, lines: list[str]) -> dict:
    """The report, or the refusal as GateFailed, or what the log says went wrong."""
    return elsewhere.outcome(f"Job {namespace}/{job}", lines)


def run_switch_job(spec: dict, runner: dict, progress) -> dict:
    """mirrorstack.failover.procedure.run_switch, run in the cluster; the same report or GateFailed."""
    job = f"mirrorstack-switch-{uuid.uuid4().hex[:10]}"
    kubectl = Kubectl(runner)
    deadline = int(float((spec.get("gate") or {}).get("wait_seconds", 120)) + START_SECONDS + SWITCH_SECONDS)
    docs = manifests(job, in_cluster_spec(spec, runner.get("cluster_domain") or "cluster.local"), runner,
                     code_zip(), deadline)
    progress(f"the switch runs in the cluster, as Job {kubectl.namespace}/{job} (the clusters' addresses "
             "resolve there only)")
    try:
        # create, not apply: no last-applied copy of the spec in an annotation
        kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        pod = wait_started(kubectl, job, progress)
        return outcome(job, kubectl.namespace, follow_log(kubectl, pod, progress))
    finally:
        # The spec holds the REST credentials: it does not outlive the switch.
        try:
            kubectl("delete", f"job/{job}", f"secret/{job}", "--ignore-not-found", "--wait=false")
        except (SwitchJobFailed, subprocess.TimeoutExpired) as exc:
            progress(f"could not delete Job and Secret {job} ({exc}); delete them by hand: they hold the "
                     "Connect REST credentials")
