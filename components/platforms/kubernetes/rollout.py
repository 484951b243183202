"""A StatefulSet's (or Deployment's) roll, waited for: the resource the next
node of a set depends on. pulumi-kubernetes can report a StatefulSet update
done before its controller has even seen it (pulumi/pulumi-kubernetes#3329: an
update of a 1-replica set "completes" in under a second), so `depends_on` the
StatefulSet alone released the next broker at once and both restarted together.

`kubectl rollout status` is the reference for "rolled": the controller has
observed this generation, the pod of the new revision exists and is Ready
(our readiness: rejoined, tasks running). It runs whenever the workload's
generation changes, with the kubeconfig and context the provider uses.

This is the only wait: the workload itself carries `pulumi.com/waitFor`
(AWAIT_OBSERVED, the provider returns once its controller has seen the
spec), because the provider's own wait sat out 600 s in silence on a pod that
could never run. Meanwhile the pods are watched (kube_pods): one that cannot
be scheduled or cannot pull its image fails the roll within
kube_pods.STUCK_SECONDS, naming the pod, Kubernetes' message and the field to
change (`fields`, from the platform)."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming

ROLL_TIMEOUT_MINUTES = 30  # a broker catching up a large backlog before it is Ready again
POLL_SECONDS = 5.0  # between two looks at the pods while the roll goes on
# The workload's annotation: the provider's wait ends once the controller has observed the spec
# (a jsonpath condition checks status.observedGeneration first); this resource waits the rest.
AWAIT_OBSERVED = {"pulumi.com/waitFor": "jsonpath={.metadata.name}"}


class RolloutFailed(RuntimeError):
    pass


def rollout_command(props: dict) -> list[str]:
    from mirrorstack.platforms.kubernetes.tunnel import kubectl_in
    return [*kubectl_in(props["namespace"], props.get("context")), "rollout", "status",
            f"{props.get('kind') or 'statefulset'}/{props['name']}", "--watch", f"--timeout={ROLL_TIMEOUT_MINUTES}m"]


def wait_rolled(props: dict) -> None:
    """Block until the workload's pods run its current spec and are Ready;
    fail at once when one of them cannot run (kube_pods)."""
    from mirrorstack.platforms.kubernetes import pods as kube_pods
    from mirrorstack.platforms.kubernetes.tunnel import kubectl_in
    kind, namespace = props.get("kind") or "statefulset", props["namespace"]
    what = f"{namespace}/{props['name']}"
    print(f"mirrorstack: waiting for {what} to roll (generation {props.get('generation')}): "
          f"its pod Ready on the new spec", file=sys.stderr, flush=True)
    selector = props.get("selector") or f"app.kubernetes.io/instance={props['name']}"
    watch, kubectl = kube_pods.PodWatch(), kubectl_in(namespace, props.get("context"))
    proc = subprocess.Popen(rollout_command(props), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    replaced: set[str] = set()
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                pods = kube_pods.list_pods(kubectl, selector)
                if kind == "statefulset":
                    for pod in pods:  # a pod of the previous spec that cannot run blocks the roll for ever
                        name, stuck = pod["metadata"]["name"], kube_pods.blocked(pod)
                        if stuck and name not in replaced and outdated(kubectl, props["name"], pod):
                            replaced.add(name)
                            refused = replace(kubectl, name, stuck[0].reason)
                            if refused:
                                raise RolloutFailed(f"{kind} {what} did not roll: pod {namespace}/{name} cannot run "
                                                    f"({stuck[0].reason}: {stuck[0].message}); {refused}") from None
                kube_pods.check(watch, kubectl, selector, namespace, props.get("fields") or {}, time.monotonic(),
                                pods)
    except kube_pods.PodCannotRun as exc:
        raise RolloutFailed(f"{kind} {what} did not roll: {exc} (the next node has not been touched)") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if proc.returncode != 0:
        said = (err or out).strip().splitlines()[-3:]
        pod = f"{props['name']}-0" if kind == "statefulset" else f"-l {selector}"
        raise RolloutFailed(f"{kind} {what} did not roll: {'; '.join(said) or 'no output'}; "
                            f"fix: look at `kubectl describe pod -n {namespace} {pod}` "
                            f"and its log, then run `pulumi up` again (the next node has not been touched)")


def outdated(kubectl: list[str], statefulset: str, pod: dict | None) -> bool:
    """Whether `pod` (one that never ran) was made from an older spec than `statefulset`'s
    current one: the StatefulSet waits for it to become Ready before it replaces it, i.e. for ever."""
    made_from = (((pod or {}).get("metadata") or {}).get("labels") or {}).get("controller-revision-hash")
    if not made_from or ((pod or {}).get("status") or {}).get("phase") != "Pending":
        return False
    done = subprocess.run([*kubectl, "get", f"statefulset/{statefulset}", "-o", "json"], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)
    try:
        current = (json.loads(done.stdout).get("status") or {}).get("updateRevision") if done.returncode == 0 else None
    except ValueError:
        return False
    return bool(current and made_from != current)


def replace(kubectl: list[str], pod: str, reason: str) -> str | None:
    """Delete `pod`, which never ran and was made from an older spec, so its StatefulSet makes it
    again from the current one (Kubernetes' "forced rollback": a StatefulSet does not replace a
    pod that never became Ready). None once deleted; refused, what to do by hand."""
    print(f"mirrorstack: pod {pod} was made from the previous spec and never ran ({reason}): deleting it, "
          f"so its StatefulSet makes it from the current one", file=sys.stderr, flush=True)
    done = subprocess.run([*kubectl, "delete", f"pod/{pod}", "--wait=false"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    if done.returncode == 0:
        return None
    return (f"it was made from the previous spec, and a StatefulSet does not replace a pod that never became "
            f"Ready; deleting it was refused ({done.stderr.strip()}): delete it by hand, then run `pulumi up` again")


class RolloutProvider(ResourceProvider):
    def create(self, props):
        wait_rolled(props)
        return CreateResult(id_=f"{props['namespace']}/{props['name']}", outs=props)

    def diff(self, _id, olds, news):
        # `fields` and `selector` only word a failure: a change of them alone waits for nothing
        changed = [k for k in ("generation", "namespace", "name", "context") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[k for k in ("namespace", "name") if k in changed])

    def update(self, _id, olds, news):
        wait_rolled(news)
        return UpdateResult(outs=news)

    def delete(self, _id, props):
        pass  # waits only: the StatefulSet is its own resource


def _props(name: str, workload, kind: str, namespace: str, context: str | None, fields: dict | None) -> dict:
    return {"namespace": namespace, "name": name, "context": context, "kind": kind,
            "selector": f"app.kubernetes.io/instance={name}", "fields": dict(fields or {}),
            "generation": workload.metadata.apply(lambda m: (m or {}).get("generation") if isinstance(m, dict)
                                                  else getattr(m, "generation", None))}


def _rollout(name: str, workload, kind: str, namespace: str, context: str | None, fields: dict | None,
             opts: pulumi.ResourceOptions | None) -> tuple:
    """A rollout resource's provider, name, props and options: after `workload`, named `<name>-rollout`."""
    resource_name, opts = naming.scoped(f"{name}-rollout", opts)
    return (RolloutProvider(), resource_name, _props(name, workload, kind, namespace, context, fields),
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[workload])))


class StatefulSetRollout(Resource, module="kubernetes", name="StatefulSetRollout"):
    """Done when `statefulset` has rolled to its current generation. `fields`
    (kube_pods.fix): the topology fields that decide its pods' cpu, memory,
    image and storage, and `what` they are, for the message of a pod that cannot run."""

    def __init__(self, name: str, statefulset, *, namespace: str, context: str | None,
                 fields: dict[str, str] | None = None, opts: pulumi.ResourceOptions | None = None):
        super().__init__(*_rollout(name, statefulset, "statefulset", namespace, context, fields, opts))


class DeploymentRollout(Resource, module="kubernetes", name="DeploymentRollout"):
    """Done when `deployment` has rolled to its current generation (its new pods available)."""

    def __init__(self, name: str, deployment, *, namespace: str, context: str | None,
                 fields: dict[str, str] | None = None, opts: pulumi.ResourceOptions | None = None):
        super().__init__(*_rollout(name, deployment, "deployment", namespace, context, fields, opts))
