"""A StatefulSet's roll, waited for: the resource the next node of a set
depends on. pulumi-kubernetes can report a StatefulSet update done before its
controller has even seen it (pulumi/pulumi-kubernetes#3329: an update of a
1-replica set "completes" in under a second), so `depends_on` the StatefulSet
alone released the next broker at once and both restarted together.

`kubectl rollout status` is the reference for "rolled": the controller has
observed this generation, the pod of the new revision exists and is Ready
(our readiness: rejoined, tasks running). It runs whenever the StatefulSet's
generation changes, with the kubeconfig and context the provider uses."""
from __future__ import annotations

import subprocess
import sys

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming

ROLL_TIMEOUT_MINUTES = 30  # a broker catching up a large backlog before it is Ready again


class RolloutFailed(RuntimeError):
    pass


def rollout_command(props: dict) -> list[str]:
    from mirrorstack.platforms.kube_tunnel import kubectl_in
    return [*kubectl_in(props["namespace"], props.get("context")), "rollout", "status",
            f"statefulset/{props['name']}", "--watch", f"--timeout={ROLL_TIMEOUT_MINUTES}m"]


def wait_rolled(props: dict) -> None:
    """Block until the StatefulSet's pods run its current spec and are Ready."""
    what = f"{props['namespace']}/{props['name']}"
    print(f"mirrorstack: waiting for {what} to roll (generation {props.get('generation')}): "
          f"its pod Ready on the new spec", file=sys.stderr, flush=True)
    done = subprocess.run(rollout_command(props), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RolloutFailed(f"statefulset {what} did not roll: {'; '.join(said) or 'no output'}; "
                            f"fix: look at `kubectl describe pod -n {props['namespace']} {props['name']}-0` "
                            f"and its log, then run `pulumi up` again (the next node has not been touched)")


class RolloutProvider(ResourceProvider):
    def create(self, props):
        wait_rolled(props)
        return CreateResult(id_=f"{props['namespace']}/{props['name']}", outs=props)

    def diff(self, _id, olds, news):
        changed = [k for k in ("generation", "namespace", "name", "context") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[k for k in ("namespace", "name") if k in changed])

    def update(self, _id, olds, news):
        wait_rolled(news)
        return UpdateResult(outs=news)

    def delete(self, _id, props):
        pass  # waits only: the StatefulSet is its own resource


class StatefulSetRollout(Resource, module="kubernetes", name="StatefulSetRollout"):
    """Done when `statefulset` has rolled to its current generation."""

    def __init__(self, name: str, statefulset, *, namespace: str, context: str | None,
                 opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(f"{name}-rollout", opts)
        super().__init__(RolloutProvider(), resource_name, {
            "namespace": namespace, "name": name, "context": context,
            "generation": statefulset.metadata.apply(lambda m: (m or {}).get("generation") if isinstance(m, dict)
                                                     else getattr(m, "generation", None)),
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[statefulset])))
