"""A service of the local platform as a Pulumi dynamic resource.

create writes the service's files, runs its one-time preparation (e.g. Kafka's
storage format, which is idempotent), starts the detached process and waits
for its health check. With `restart` ("unless-stopped") it runs under a
keeper (mirrorstack.platforms.local.keeper), which starts it again whenever it
exits or is killed. read reports whether the process still runs, so
`pulumi refresh` records a dead service and says so, with the fix; diff also
looks at the process itself (a kept service's keeper), so `up` heals without a
refresh. delete stops it (TERM, then KILL) and removes its folder.
"""
from __future__ import annotations

import shutil
import sys
import time
from functools import partial
from pathlib import Path

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming
from mirrorstack.platforms.local import keeper, liveness

# Inputs whose change means the process must be restarted with new files/args.
# Not `health` (nor `health_secrets`): how start-up is checked applies at the next
# start; a stricter check (rolling restarts') must not restart every deployed
# service by itself, nor a user added to a cluster every broker.
RESTART_KEYS = ("files", "secret_files", "argv", "prepare", "after_start", "timeout_seconds", "restart")


def this_machine() -> str:
    """Which machine runs a service: its pid means nothing on another one (a PR runner)."""
    import socket
    try:
        machine_id = Path("/etc/machine-id").read_text().strip()
    except OSError:
        machine_id = ""
    return f"{socket.gethostname()}/{machine_id}"


def _elsewhere(props) -> bool:
    """The service runs on another machine, or its files are not here: its
    process cannot be checked from here."""
    recorded = props.get("machine")
    return (recorded is not None and recorded != this_machine()) or not Path(props["workdir"]).is_dir()


def write_secret_files(folder: Path, files: dict[str, str]) -> None:
    """Secret files: created 0600 (before any byte is written) in 0700 folders."""
    import os
    for relative, content in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.parent.chmod(0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
        with os.fdopen(fd, "w") as out:
            out.write(content)


def _refuse_taken_port(props) -> None:
    """Before starting: another process already listening where this service's
    health check probes would pass that check for it (another stack's Connect
    answering for this one): refuse, naming the port."""
    from mirrorstack.platforms.local import health
    address = health.own_address(props["health"])
    if address and health.port_open(*address):
        host, port = address
        raise RuntimeError(f"{props['name']}: port {port} on {host} is already in use by another process, before "
                           "this service started; fix: give the stack another port range (mirrorstack:portBase) "
                           "or stop what listens there")


def _wait_port_released(props, timeout: float = 15.0) -> None:
    """After stopping the old process: until its own port stops answering. Seen with
    the supervisor (a Python process): its port answered just after the stop, 2 updates
    in 5, and the new one was refused as if another process held the port (the cause
    is not pinned down: a stop outside `up` did not reproduce it)."""
    from mirrorstack.platforms.local import health
    address = health.own_address(props["health"])
    deadline = time.monotonic() + timeout
    while address and health.port_open(*address, timeout=0.2) and time.monotonic() < deadline:
        time.sleep(0.2)


def _launch(props) -> dict:
    from mirrorstack.platforms.descriptions import once_healthy_checks
    from mirrorstack.platforms.local import health, launcher

    workdir = Path(props["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    for relative, content in props["files"].items():
        path = workdir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    write_secret_files(workdir, props.get("secret_files") or {})
    _refuse_taken_port(props)
    for i, argv in enumerate(props.get("prepare") or []):
        launcher.run(f"{props['name']} prepare", argv, log_file=workdir / f"prepare-{i}.log")
    since_ms = int(time.time() * 1000)
    argv, first_run = props["argv"], None
    if props.get("restart"):  # its first run must come up: a keeper starting it again would hide why it did not
        status = liveness.status_file(props)
        status.unlink(missing_ok=True)
        argv = keeper.command(props["name"], str(status), argv)
        first_run = partial(keeper.first_run_lasts, status)
    handle = launcher.start(props["name"], argv, log_file=workdir / "service.log", cwd=workdir)
    try:
        launcher.wait_until_healthy(handle, lambda: health.check(props["health"], since_ms),
                                    timeout=float(props["timeout_seconds"]), what=props["name"], alive=first_run)
        for i, argv in enumerate(props.get("after_start") or []):  # e.g. create the SASL user
            launcher.run(f"{props['name']} after start", argv, log_file=workdir / f"after-start-{i}.log")
        for once_healthy in once_healthy_checks(props["health"]):  # a broker: its SASL users get in (kafka/sasl_check.py)
            once_healthy(props["name"], props["health"], props.get("health_secrets") or {},
                         alive=lambda: launcher.is_alive(handle), log_file=handle.log_file)
    except Exception:
        launcher.stop(handle)
        raise
    return {**props, "pid": str(handle.pid), "start_time": str(handle.start_time),
            "log_file": handle.log_file, "running": True, "machine": this_machine()}


class LocalServiceProvider(ResourceProvider):
    def create(self, props):
        outs = _launch(props)
        return CreateResult(id_=props["name"], outs=outs)

    def diff(self, _id, olds, news):
        replaces = [k for k in ("name", "workdir") if olds.get(k) != news.get(k)]
        changed = [k for k in RESTART_KEYS if (olds.get(k) or None) != (news.get(k) or None)]  # [] == absent
        if _elsewhere(olds):
            # A preview on another machine (a PR runner): say so rather than restart every service.
            print(f"mirrorstack: {olds['name']}: runs on another machine ({olds.get('machine') or 'unknown'}); "
                  "could not check its process from here", file=sys.stderr, flush=True)
        elif not liveness.running(olds):
            changed.append("running")
        return DiffResult(changes=bool(replaces or changed), replaces=replaces,
                          delete_before_replace=True)

    def update(self, _id, olds, news):
        from mirrorstack.platforms.local import launcher
        if olds.get("pid"):
            launcher.stop(liveness.handle(olds))
            _wait_port_released(olds)
        return UpdateResult(outs=_launch(news))

    def read(self, id_, props):
        alive = liveness.serving(props)
        if not alive and not _elsewhere(props):
            print(f"mirrorstack: {liveness.down_message(props)}", file=sys.stderr, flush=True)
        return ReadResult(id_=id_, outs={**props, "running": alive})

    def delete(self, _id, props):
        from mirrorstack.platforms.local import launcher
        if props.get("pid"):
            launcher.stop(liveness.handle(props))
        shutil.rmtree(props["workdir"], ignore_errors=True)


class LocalService(Resource, module="local", name="LocalService"):
    """A detached process on 127.0.0.1. Outputs: pid, log_file, running.
    `secret_files` (kept secret in state) are written 0600; `after_start`
    commands run once it is healthy. `restart` "unless-stopped": a keeper starts
    it again whenever it exits (keeper.POLICY). `health_secrets` (a secret
    dict, never written) is what readiness needs beyond `health`: a broker's
    SASL users and passwords (kafka/sasl_check.py); like `health`, no restart."""

    pid: pulumi.Output[str]
    log_file: pulumi.Output[str]
    running: pulumi.Output[bool]

    def __init__(self, name: str, *, workdir: str, files: dict[str, str], argv: list[str],
                 health: dict[str, str], prepare: list[list[str]] | None = None,
                 secret_files: pulumi.Input[dict] | None = None, after_start: list[list[str]] | None = None,
                 timeout_seconds: int = 180, restart: str | None = None,
                 health_secrets: pulumi.Input[dict] | None = None, opts: pulumi.ResourceOptions | None = None):
        if restart not in (None, keeper.POLICY):
            raise ValueError(f"LocalService {name}: restart must be None or {keeper.POLICY!r}, not {restart!r}")
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        super().__init__(LocalServiceProvider(), resource_name, {
            "name": name, "workdir": workdir, "files": files, "argv": argv,
            "secret_files": pulumi.Output.secret(secret_files) if secret_files is not None else None,
            "prepare": prepare or [], "after_start": after_start or None, "health": health,
            # absent unless given: services deployed before it see no new input
            **({"health_secrets": pulumi.Output.secret(health_secrets)} if health_secrets is not None else {}),
            "timeout_seconds": str(timeout_seconds), **({"restart": restart} if restart else {}),
            "pid": None, "start_time": None, "log_file": None, "running": None,
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            additional_secret_outputs=["secret_files", "health_secrets"])))
