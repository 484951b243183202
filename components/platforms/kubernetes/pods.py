"""Why a pod of the stack cannot run, read from its status, and what to change.

A pod the scheduler cannot place (`PodScheduled` False, reason
`Unschedulable`: CPU, memory, an unbound claim, a zone without a node) or
whose image the kubelet cannot pull (a container waiting in `ErrImagePull`,
`ImagePullBackOff`, ...) will not run without a change, yet Kubernetes keeps
trying and a plain wait for "ready" waits out its whole timeout in silence.
Whoever waits for pods of the stack (rollout.py: StatefulSets and
Deployments; job_run.py: the validation Job; the failover switch's Job)
hands their status to `PodWatch`, which says when a pod has been held that
way for STUCK_SECONDS, and `explain` turns that into one message: the pod, the
scheduler's or kubelet's own words, what the pod asks for, and the topology
field to change (`fields`, given by the platform that made the pod).

Pure but for `list_pods` (one kubectl call)."""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

# A pod held this long (by this watcher's clock) fails the wait: a claim being provisioned or a
# registry's hiccup passes within it; a pod that cannot fit does not.
STUCK_SECONDS = 45.0
# While a cluster autoscaler adds a node for the pod (its TriggeredScaleUp event), wait this long.
SCALE_UP_SECONDS = 600.0
UNSCHEDULABLE, IMAGE = "unschedulable", "image"
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
                 "RegistryUnavailable", "SignatureValidationFailed")
SCALING_UP = ("TriggeredScaleUp", "Nominated")  # cluster-autoscaler's and Karpenter's event reasons

# The scheduler's words → which of a pod's fields decides it.
_CAUSES = (
    (re.compile(r"Insufficient cpu", re.I), "cpu"),
    (re.compile(r"Insufficient memory", re.I), "memory"),
    (re.compile(r"PersistentVolumeClaim|persistent volume|volume node affinity|StorageClass|"
                r"volume.*(zone|topology)", re.I), "storage"),
)
_NODES = re.compile(r"taint|node affinity|node selector|Too many pods|didn't have free ports|"
                    r"Insufficient (?!cpu|memory)", re.I)


class PodCannotRun(RuntimeError):
    """`blocked` (a Blocked) held `pod` (as the API returned it) past its bound."""

    def __init__(self, message: str, blocked: "Blocked | None" = None, pod: dict | None = None):
        super().__init__(message)
        self.blocked, self.pod = blocked, pod


@dataclass(frozen=True)
class Blocked:
    """What keeps `pod` from running: `kind` UNSCHEDULABLE or IMAGE, `reason`
    Kubernetes' (Unschedulable, ErrImagePull, ...), `message` its own words."""
    pod: str
    kind: str
    reason: str
    message: str
    container: str | None = None
    image: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.pod, self.kind


def blocked(pod: dict) -> list[Blocked]:
    """What keeps `pod` (a Pod as the API returns it) from running, if anything."""
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    found = []
    for condition in status.get("conditions") or []:
        if (condition.get("type"), condition.get("status"), condition.get("reason")) == (
                "PodScheduled", "False", "Unschedulable"):
            found.append(Blocked(name, UNSCHEDULABLE, "Unschedulable", (condition.get("message") or "").strip()))
    images = {c.get("name"): c.get("image") for key in ("initContainers", "containers")
              for c in (pod.get("spec") or {}).get(key) or []}
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in PULL_FAILURES:
                found.append(Blocked(name, IMAGE, waiting["reason"], (waiting.get("message") or "").strip(),
                                     container.get("name"), images.get(container.get("name")) or container.get("image")))
    return found


def requests(pod: dict) -> dict[str, str]:
    """What the pod's containers request (cpu, memory), summed as Kubernetes writes them when one asks."""
    asked: dict[str, list[str]] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for resource, quantity in ((container.get("resources") or {}).get("requests") or {}).items():
            asked.setdefault(resource, []).append(str(quantity))
    return {resource: "+".join(quantities) for resource, quantities in sorted(asked.items())}


class PodWatch:
    """Which pods have been held (continuously, by the times it is given) for
    `seconds`. Feed it each poll's pods; `overdue` returns the blocks to fail on."""

    def __init__(self, seconds: float | None = None):
        self.seconds = STUCK_SECONDS if seconds is None else seconds
        self.since: dict[tuple[str, str], float] = {}
        self.extended: set[tuple[str, str]] = set()  # pods a cluster autoscaler is adding a node for

    def observe(self, pods: list[dict], now: float) -> list[Blocked]:
        """The blocks seen now; a pod no longer held starts over."""
        current = [b for pod in pods for b in blocked(pod)]
        keys = {b.key for b in current}
        self.since = {k: t for k, t in self.since.items() if k in keys}
        for b in current:
            self.since.setdefault(b.key, now)
        return current

    def overdue(self, current: list[Blocked], now: float) -> list[Blocked]:
        def limit(b: Blocked) -> float:
            return SCALE_UP_SECONDS if b.key in self.extended else self.seconds
        return [b for b in current if now - self.since[b.key] >= limit(b)]

    def scaling_up(self, b: Blocked) -> None:
        """A cluster autoscaler is adding a node for `b`'s pod: wait SCALE_UP_SECONDS for it."""
        self.extended.add(b.key)


def scaling_up(events: list[dict]) -> bool:
    """Whether a pod's events say a cluster autoscaler is adding a node for it."""
    return any(e.get("reason") in SCALING_UP for e in events)


def cause(b: Blocked) -> str | None:
    """Which field kind decides `b`: cpu, memory, storage or image; "nodes" when only the
    cluster's nodes can (taints, node selectors, pod count); None when the message says nothing known."""
    if b.kind == IMAGE:
        return "image"
    for pattern, field in _CAUSES:
        if pattern.search(b.message):
            return field
    return "nodes" if _NODES.search(b.message) else None


def fix(b: Blocked, fields: dict[str, str]) -> str:
    """What to change for `b`: the field of the topology `fields` names for its cause."""
    kind = cause(b)
    field = fields.get(kind) if kind else None
    if kind == "image":
        return (f"`{field}` must name an image the cluster's nodes can pull (or already hold)" if field
                else "give the pod an image the cluster's nodes can pull")
    if kind in ("cpu", "memory"):
        if field:
            return f"lower `{field}`, or give the cluster a node with that much {kind} free"
        return (f"its {kind} request is fixed: free {kind} on a node (lower the requests of the stack's other "
                f"pods: `clusters.<alias>.resources`, `connect.<name>.resources`) or add a node")
    if kind == "storage":
        return (f"check `{field}` (a StorageClass that exists and provisions in a zone with nodes; "
                "`kubectl get storageclass,pvc`)" if field else "check the pod's claims (`kubectl get pvc`)")
    if kind == "nodes":
        return "the cluster's nodes cannot take the pod (taints, labels, pod count): add or free a node"
    return "see `kubectl describe pod` for what the pod waits for"


def explain(b: Blocked, pod: dict | None, fields: dict[str, str], namespace: str, waited: float) -> str:
    """One message for a pod that will not run: which, why (Kubernetes' words), what it asks, what to change."""
    what = fields.get("what")
    where = f"{namespace}/{b.pod}" + (f" ({what})" if what else "")
    asked = requests(pod or {})
    asks = f"; it requests {', '.join(f'{k} {v}' for k, v in asked.items())}" if asked and b.kind == UNSCHEDULABLE else ""
    if b.kind == UNSCHEDULABLE:
        head = f"pod {where} cannot be scheduled ({waited:.0f}s): {b.message or 'the scheduler gave no reason'}"
    else:
        head = (f"pod {where} cannot pull image {b.image} of container {b.container} ({b.reason} for "
                f"{waited:.0f}s): {b.message or 'the kubelet gave no reason'}")
    return (f"{head}{asks}; fix: {fix(b, fields)}, then run `pulumi up` again "
            f"(`kubectl describe pod -n {namespace} {b.pod}` shows its events)")


def list_pods(kubectl: list[str], selector: str) -> list[dict]:
    """The pods `selector` picks, through `kubectl` (its command line up to the verb, in the namespace)."""
    done = subprocess.run([*kubectl, "get", "pods", "-l", selector, "-o", "json"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    if done.returncode != 0:
        return []  # a failed look is not a finding: the next poll looks again
    return json.loads(done.stdout).get("items") or []


def events_of(kubectl: list[str], name: str) -> list[dict]:
    """The events about the object `name` (a pod, a Job) in the namespace."""
    done = subprocess.run([*kubectl, "get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    if done.returncode != 0:
        return []
    return json.loads(done.stdout).get("items") or []


def check(watch: PodWatch, kubectl: list[str], selector: str, namespace: str, fields: dict[str, str],
          now: float, pods: list[dict] | None = None) -> list[dict]:
    """One poll: the pods (`pods`, else those `selector` picks); raises PodCannotRun for the
    first held past its bound (unless a cluster autoscaler is adding a node for it). Returns the pods."""
    pods = list_pods(kubectl, selector) if pods is None else pods
    current = watch.observe(pods, now)
    for b in watch.overdue(current, now):
        if b.kind == UNSCHEDULABLE and b.key not in watch.extended and scaling_up(events_of(kubectl, b.pod)):
            watch.scaling_up(b)
            continue
        pod = next((p for p in pods if p["metadata"]["name"] == b.pod), None)
        raise PodCannotRun(explain(b, pod, fields, namespace, now - watch.since[b.key]), b, pod)
    return pods
