"""The validation Job's run, waited for by the program itself: its pod
watched, its log passed on as it comes, its outcome said as on local.

pulumi-kubernetes' own wait for a Job said, when the validation failed, only
`Container "validate" completed with exit code 1` and `BackoffLimitExceeded`
(the report was in the pod's log alone), and sat out its timeout in silence
on a pod that could never be scheduled. So the Job carries
`pulumi.com/waitFor` (kube_rollout.AWAIT_OBSERVED: the provider returns once
it is made) and this resource, which depends on it, waits: a pod that cannot
be scheduled or cannot pull its image fails `up` within
kube_pods.STUCK_SECONDS, naming the pod, Kubernetes' message and the field
to change; the job's progress and summary lines are shown as the local
platform shows them (the job's descriptions.JobOutput: validation's words),
and a failed validation fails `up` with the same message and failures. It runs again
whenever a new Job is made (its uid changes: a new run id, inputs or job),
never on a plain re-`up`. kubectl authenticates as the user's own does, in
the provider's context.

Rights (docs/operations/platforms.md): get jobs, list pods and events, get pods/log."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming
from mirrorstack.platforms.descriptions import JobOutput

POLL_SECONDS = 3.0  # until the pod runs
RUNNING_POLL_SECONDS = 15.0  # then, unless its log ends first: a run may take an hour
CONTAINER = "validate"
FOLLOW_GRACE_SECONDS = 30.0  # for the log stream to end once the container has


class JobRunFailed(RuntimeError):
    pass


class ValidationFailed(JobRunFailed):
    pass


def _progress(message: str) -> None:
    print(f"mirrorstack: {message}", file=sys.stderr, flush=True)


class _Follow(threading.Thread):
    """`kubectl logs --follow` of the pod: every line kept, the progress ones shown."""

    def __init__(self, kubectl: list[str], pod: str, output: JobOutput):
        super().__init__(daemon=True)
        self.lines: list[str] = []
        self.output = output
        self.proc = subprocess.Popen([*kubectl, "logs", "--follow", f"pod/{pod}", "-c", CONTAINER],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.DEVNULL)

    def run(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if self.output.is_progress(line):
                _progress(line)

    def finish(self, kubectl: list[str], pod: str) -> list[str]:
        """Every line the container printed: the stream's, or, cut short, the whole log read again."""
        self.join(FOLLOW_GRACE_SECONDS)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.join(5)
        if self.output.printed_outcome(self.lines) is not None:
            return self.lines
        done = subprocess.run([*kubectl, "logs", f"pod/{pod}", "-c", CONTAINER], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120)
        whole = done.stdout.splitlines() if done.returncode == 0 else []
        for line in whole[len(self.lines):]:
            if self.output.is_progress(line):
                _progress(line)
        return whole if len(whole) >= len(self.lines) else self.lines


def _get(kubectl: list[str], *args: str) -> dict | None:
    done = subprocess.run([*kubectl, "get", *args, "-o", "json"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    return json.loads(done.stdout) if done.returncode == 0 else None


def job_finished(job: dict | None) -> dict | None:
    """The Job's terminal condition (Complete or Failed), if it has one."""
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition
    return None


def ended(pod: dict | None) -> dict:
    """The validate container's terminated state (exitCode, reason), or {}."""
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return (status.get("state") or {}).get("terminated") or {}
    return {}


def failure(props: dict, finished: dict, pod: dict | None, lines: list[str], output: JobOutput) -> JobRunFailed:
    """Why the Job failed, as the local platform says it: a failed validation with its
    failures, or a job that could not run with its output and what ended it."""
    name, where = props["name"], props["where"]
    terminated, outcome = ended(pod), output.printed_outcome(lines)
    if terminated.get("exitCode") == output.failed_exit and outcome is not None:
        return ValidationFailed(output.failed_message(name, f"`{where['logs']}`", outcome["failures"]))
    why = [f"Job {finished.get('reason') or 'failed'}: {finished.get('message') or ''}".strip(": ")]
    if terminated.get("reason") == "OOMKilled":
        memory = (props.get("fields") or {}).get("memory")
        why.append("the pod ran out of its memory limit (OOMKilled)"
                   + (f"; fix: raise `{memory}`" if memory else ""))
    elif (pod or {}).get("status", {}).get("reason"):  # Evicted, DeadlineExceeded
        why.append(f"pod {pod['status']['reason']}: {pod['status'].get('message', '')}")
    return JobRunFailed(output.could_not_run_message(name, terminated.get("exitCode"), lines, f" ({'; '.join(why)})")
                        + f"\nthe whole log: `{where['logs']}`")


def run(props: dict, output: JobOutput) -> dict:
    """Wait for the Job `props["job"]` to end; its report (the stack output `validation`),
    its output read as `output` says."""
    from mirrorstack.platforms.kubernetes import pods as kube_pods
    from mirrorstack.platforms.kubernetes.tunnel import kubectl_in
    namespace, job, fields = props["namespace"], props["job"], props.get("fields") or {}
    kubectl = kubectl_in(namespace, props.get("context"))
    # this Job's pods, not a replaced Job's nor the CronJob's
    selector = f"batch.kubernetes.io/controller-uid={props['uid']}"
    watch, follow, pod = kube_pods.PodWatch(), None, None
    started = time.monotonic()
    deadline = started + float(props["timeout_seconds"])
    _progress(f"{props['name']}: validating in the cluster, as Job {namespace}/{job}; its log: "
              f"`{props['where']['logs']}`")
    while True:
        try:
            pods = kube_pods.check(watch, kubectl, selector, namespace, fields, time.monotonic())
        except kube_pods.PodCannotRun as exc:
            raise JobRunFailed(f"{props['name']}: the validation Job cannot run: {exc}") from None
        pod = pods[0] if pods else pod
        if follow is None and pod is not None and (pod.get("status") or {}).get("phase") in (
                "Running", "Succeeded", "Failed"):
            follow = _Follow(kubectl, pod["metadata"]["name"], output)
            follow.start()
        finished = job_finished(_get(kubectl, f"job/{job}"))
        if finished:
            break
        if pod is None and time.monotonic() - started > kube_pods.STUCK_SECONDS:
            refused = [e for e in kube_pods.events_of(kubectl, job) if e.get("reason") == "FailedCreate"]
            if refused:  # admission (PodSecurity, a quota) refuses the pod: it will not come
                raise JobRunFailed(f"{props['name']}: the validation Job {namespace}/{job} cannot make its pod: "
                                   f"{refused[-1].get('message')}; fix that, then run `pulumi up` again")
        if time.monotonic() > deadline:
            raise JobRunFailed(f"{props['name']}: the validation Job {namespace}/{job} did not end within "
                               f"{float(props['timeout_seconds']):.0f}s; it goes on in the cluster: "
                               f"`{props['where']['logs']}`")
        if follow is not None and follow.is_alive():
            follow.join(RUNNING_POLL_SECONDS)  # wakes as the log ends: the container has
        else:
            time.sleep(POLL_SECONDS)
    if pod is not None:
        pod = _get(kubectl, f"pod/{pod['metadata']['name']}") or pod
    lines = follow.finish(kubectl, pod["metadata"]["name"]) if follow is not None and pod is not None else []
    if finished["type"] == "Failed":
        raise failure(props, finished, pod, lines, output)
    summary = output.printed_summary(lines)
    said = {"passed": "passed", "nothing-checked": "checked nothing (0 records selected)"}.get(
        summary["status"], "FAILED (report only)")
    _progress(f"{props['name']}: validation {said}, in {time.monotonic() - started:.0f}s")
    return {**props["where"], **summary}


class JobRunProvider(ResourceProvider):
    """`output`: how the job's output reads (descriptions.JobOutput)."""

    def __init__(self, output: JobOutput):
        super().__init__()
        self.output = output

    def create(self, props):
        return CreateResult(id_=f"{props['namespace']}/{props['job']}", outs={**props, "report": run(props, self.output)})

    def diff(self, _id, olds, news):
        changed = [k for k in ("uid", "namespace", "job", "context") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id, olds, news):
        return UpdateResult(outs={**news, "report": run(news, self.output)})

    def read(self, id_, props):
        return ReadResult(id_=id_, outs=props)

    def delete(self, _id, props):
        pass  # waits only: the Job is its own resource


class ValidationJobRun(Resource, module="kubernetes", name="ValidationJobRun"):
    """Done when the validation Job `job` (its uid: this run) has ended; fails `up`
    as the local platform does. Output `report`: `where` (namespace, job, logs)
    plus the report's summary, as local's (outcome.validation_summary)."""

    report: pulumi.Output[dict]

    def __init__(self, name: str, job, *, namespace: str, job_name: str, context: str | None, where: dict,
                 fields: dict[str, str], timeout_seconds: float, output: JobOutput,
                 opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(f"{job_name}-run", opts)
        super().__init__(JobRunProvider(output), resource_name, {
            "name": name, "namespace": namespace, "job": job_name, "context": context, "where": where,
            "fields": dict(fields), "timeout_seconds": str(timeout_seconds), "report": None,
            "uid": job.metadata.apply(lambda m: (m or {}).get("uid") if isinstance(m, dict) else getattr(m, "uid", None)),
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[job])))
