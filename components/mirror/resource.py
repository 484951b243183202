"""MirrorMaker2: the connector trio of one flow as ONE Pulumi dynamic resource.

The only module that speaks HTTP to Kafka Connect. Every request has a timeout
and urllib3 retries connection errors, 5xx and Connect's 409 (rebalance in
progress). The provider is pickled by Pulumi (dill), so the HTTP session is
built inside each method and nothing unpicklable is captured.
"""
from __future__ import annotations

import json
import sys
import time
from urllib.parse import quote

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

from components import naming
from components.mirror.args import MirrorMaker2Args
from components.mirror.connectors import KINDS, MIRROR_PACKAGE, OWNER_KEY, SOURCE
from components.plan.rename_check import rename_problems

# Kafka Connect REST: each attempt may take CONNECT_TIMEOUT to connect and READ_TIMEOUT
# for the answer; connection errors, timeouts, 5xx and 409 (a rebalance in progress) are
# retried with backoff until REQUEST_BUDGET is spent (no new attempt starts after it), then
# ConnectError names the worker's URL. Refused connections give up sooner (CONNECT_RETRIES).
CONNECT_TIMEOUT = 5  # seconds
READ_TIMEOUT = 30  # seconds
REQUEST_BUDGET = 90  # seconds per request, retries included
CONNECT_RETRIES = 5  # about 15 s of backoff (0.5 s doubling, at most 8 s a wait)
RETRY_STATUSES = (409, 500, 502, 503, 504)


class ConnectError(RuntimeError):
    status: int | None = None  # Connect's HTTP status, when it answered with an error


def _progress(message: str) -> None:
    print(f"mirrorstack: {message}", file=sys.stderr, flush=True)


class ConnectClient:
    class _Retry(Retry):
        """urllib3's Retry with a deadline: once it has passed no new attempt starts
        (an attempt in flight still ends within its timeouts), and backoff never
        sleeps past it. A give-up records how many attempts were made."""
        deadline = float("inf")  # time.monotonic() value

        def new(self, **kw):
            retry = super().new(**kw)
            retry.deadline = self.deadline
            return retry

        def is_exhausted(self) -> bool:
            return time.monotonic() >= self.deadline or super().is_exhausted()

        def get_backoff_time(self) -> float:
            return min(super().get_backoff_time(), max(0.0, self.deadline - time.monotonic()))

        def increment(self, *args, **kwargs):
            try:
                return super().increment(*args, **kwargs)
            except MaxRetryError as exc:
                exc.attempts = len(self.history) + 1
                raise

    def __init__(self, url: str, ca_file: str | None = None):
        import urllib3

        self.url = url.rstrip("/")
        tls = {"ca_certs": ca_file} if ca_file else {}
        self.http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT), **tls)

    def _call(self, method: str, path: str, **kwargs):
        from urllib3.exceptions import HTTPError, NewConnectionError

        started = time.monotonic()
        retry = self._Retry(total=None, connect=CONNECT_RETRIES, read=None, status=None, other=2,
                            backoff_factor=0.5, backoff_max=8, status_forcelist=RETRY_STATUSES,
                            allowed_methods=None, raise_on_status=False)  # every call here is safe to repeat
        retry.deadline = started + REQUEST_BUDGET
        try:
            return self.http.request(method, f"{self.url}{path}", retries=retry, **kwargs)
        except HTTPError as exc:
            reason = getattr(exc, "reason", None) or exc
            tried = f"{getattr(exc, 'attempts', 1)} attempts: {reason}"
            waited = time.monotonic() - started
            advice = ("check the Connect workers behind it run and answer (their connect-* service logs); "
                      "`pulumi refresh` then `pulumi up` restarts a dead one")
            if isinstance(reason, NewConnectionError):
                raise ConnectError(f"Kafka Connect at {self.url} is unreachable: {method} {path} failed for "
                                   f"{waited:.0f}s ({tried}); {advice}") from exc
            raise ConnectError(f"Kafka Connect at {self.url} did not answer {method} {path} within "
                               f"{waited:.0f}s ({tried}); {advice}") from exc

    def _ok(self, reply, what: str):
        if reply.status == 401:
            raise ConnectError(f"{what}: Kafka Connect at {self.url} refused the credentials (401 Unauthorized); "
                               "fix: check the REST user and its password (an external Connect cluster's is "
                               "mirrorstack:connectSecrets.<name>.password)")
        if reply.status >= 400:
            text = reply.data.decode(errors="replace")[:2000]
            error = ConnectError(f"{what}: Kafka Connect at {self.url} answered {reply.status}: {text}")
            error.status = reply.status
            raise error
        return json.loads(reply.data) if reply.data else None

    def validate(self, name: str, config: dict[str, str]) -> list[str]:
        """Connect's own validation of a config: the error messages, per key."""
        plugin = config["connector.class"].rsplit(".", 1)[-1]
        result = self._ok(self._call("PUT", f"/connector-plugins/{plugin}/config/validate",
                                     json={**config, "name": name}),
                          f"validating {plugin}")
        return [f"{c['value']['name']}: {err}" for c in result.get("configs", [])
                for err in c["value"].get("errors", [])]

    def put_config(self, name: str, config: dict[str, str]) -> None:
        self._ok(self._call("PUT", f"/connectors/{quote(name, safe='')}/config", json=config),
                 f"configuring {name}")

    def get_config(self, name: str) -> dict[str, str] | None:
        reply = self._call("GET", f"/connectors/{quote(name, safe='')}/config")
        if reply.status == 404:
            return None
        config = self._ok(reply, f"reading {name}")
        config.pop("name", None)
        return config

    def names(self) -> set[str]:
        """The connectors this worker has a config for (GET /connectors)."""
        return set(self._ok(self._call("GET", "/connectors"), "listing the connectors"))

    def status(self, name: str) -> dict | None:
        reply = self._call("GET", f"/connectors/{quote(name, safe='')}/status")
        return None if reply.status == 404 else self._ok(reply, f"status of {name}")

    def delete(self, name: str) -> None:
        reply = self._call("DELETE", f"/connectors/{quote(name, safe='')}")
        if reply.status != 404:
            self._ok(reply, f"deleting {name}")

    def create(self, name: str, config: dict[str, str], state: str = "running") -> None:
        """Create a connector in its flow's state (KIP-980's initial_state), so a
        paused or stopped flow never copies a record, not even at its creation."""
        self._ok(self._call("POST", "/connectors", json={"name": name, "config": config,
                                                         "initial_state": CONNECT_STATES[state]}),
                 f"creating {name} {state}")
        self.wait_known(name)

    def create_stopped(self, name: str, config: dict[str, str]) -> None:
        """Create a connector that does not start (KIP-980), to give it offsets first."""
        self.create(name, config, "stopped")

    def wait_known(self, name: str, timeout: float = 20) -> None:
        """Until this worker knows a connector just created through it: the leader
        writes the config, and a follower answers 404 for it until it has read it."""
        deadline = time.monotonic() + timeout
        while self.status(name) is None:
            if time.monotonic() > deadline:
                raise ConnectError(f"{name} was created but {self.url} does not know it after {timeout:.0f}s")
            time.sleep(0.5)

    def stop(self, name: str, timeout: float = 120) -> None:
        """Stop a connector (KIP-875): its tasks commit their offsets and go away."""
        self.request_stop(name)
        self.wait_stopped(name, timeout)

    def request_stop(self, name: str) -> None:
        """Ask Connect to stop a connector, without waiting for it (wait_stopped):
        one whose cluster is lost takes MM2's admin timeout (60 s by default) to
        stop, and several such can stop at once."""
        self._ok(self._call("PUT", f"/connectors/{quote(name, safe='')}/stop"), f"stopping {name}")

    def wait_stopped(self, name: str, timeout: float = 120) -> None:
        """Until a connector asked to stop is STOPPED with no task left."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.status(name) or {}
            if status.get("connector", {}).get("state") == "STOPPED" and not status.get("tasks"):
                return
            if time.monotonic() > deadline:
                raise ConnectError(f"{name} on {self.url} did not stop within {timeout:.0f}s: {summarize(status)}")
            time.sleep(0.5)

    def resume(self, name: str) -> None:
        self._ok(self._call("PUT", f"/connectors/{quote(name, safe='')}/resume"), f"resuming {name}")

    def pause(self, name: str) -> None:
        """Connect's pause: the tasks stay assigned and stop copying."""
        self._ok(self._call("PUT", f"/connectors/{quote(name, safe='')}/pause"), f"pausing {name}")

    def set_state(self, name: str, state: str) -> None:
        """Move a connector to a flow state (running, paused, stopped); a stop waits until STOPPED."""
        {"running": self.resume, "paused": self.pause, "stopped": self.stop}[state](name)

    def offsets(self, name: str) -> list[dict]:
        """The connector's committed source offsets: [{partition, offset}]."""
        return self._ok(self._call("GET", f"/connectors/{quote(name, safe='')}/offsets"),
                        f"reading the offsets of {name}")["offsets"]

    def set_offsets(self, name: str, offsets: list[dict]) -> None:
        self._ok(self._call("PATCH", f"/connectors/{quote(name, safe='')}/offsets", json={"offsets": offsets}),
                 f"writing the offsets of {name}")

    def reset_offsets(self, name: str) -> None:
        """Forget a stopped connector's committed offsets (KIP-875)."""
        self._ok(self._call("DELETE", f"/connectors/{quote(name, safe='')}/offsets"), f"resetting the offsets of {name}")

    def plugins(self) -> list[str]:
        return [p["class"] for p in self._ok(self._call("GET", "/connector-plugins?connectorsOnly=true"),
                                              "listing the connector plugins")]

    def restart(self, name: str) -> None:
        self._ok(self._call("POST", f"/connectors/{quote(name, safe='')}/restart?includeTasks=true&onlyFailed=false"),
                 f"restarting {name}")


# A flow's state (components.model.spec.Flow.state) as Connect names its connectors' target state.
CONNECT_STATES = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}
# Connect's connector states that are a flow state (UNASSIGNED, RESTARTING, FAILED are none).
TARGET_STATES = {v: k for k, v in CONNECT_STATES.items()}
VERBS = {"running": "resuming", "paused": "pausing", "stopped": "stopping"}


def failed_parts(status: dict | None) -> list[str]:
    """Each FAILED part of a connector's status, as "<part> FAILED on <worker>:
    <first line of its trace>" (the exception and its message)."""
    if not status:
        return []
    parts = [("connector", status["connector"]), *((f"task {t.get('id')}", t) for t in status.get("tasks", []))]
    return [f"{label} FAILED on {part.get('worker_id')}: {first_line(part.get('trace'))}"
            for label, part in parts if part.get("state") == "FAILED"]


def first_line(trace: str | None) -> str:
    """A Java trace's first line, and its root cause's (the last "Caused by:"): the
    first is often only Connect's wrapper ("Unrecoverable exception from producer
    send callback")."""
    lines = [line.strip() for line in (trace or "").splitlines() if line.strip()]
    if not lines:
        return "(no trace)"
    root = next((line.removeprefix("Caused by:").strip() for line in reversed(lines)
                 if line.startswith("Caused by:")), None)
    return f"{lines[0]} (caused by {root})" if root and root != lines[0] else lines[0]


def summarize(status: dict | None) -> dict[str, str]:
    if status is None:
        return {"state": "MISSING", "tasks": "0", "running_tasks": "0"}
    tasks = status.get("tasks", [])
    summary = {"state": status["connector"]["state"], "tasks": str(len(tasks)),
               "running_tasks": str(sum(t["state"] == "RUNNING" for t in tasks))}
    if failed := failed_parts(status):  # only then: a healthy flow's recorded states keep their shape
        summary["failed"] = "; ".join(failed)
    return summary


RESTART_GRACE = 30  # seconds a just-restarted connector may still report its old FAILED state
# Seconds a connector `up` restarted must then run before `up` succeeds: a task that fails
# for a cause still there (a record too large for the target) failed again 6 s after its
# restart in tests/integration/test_connect_faults.py, 12-15 s in issue 27's runs.
RESTART_STABILITY = 30
VANISH_GRACE = 20  # seconds a just-configured connector may be missing from a (forwarding) worker's status (10 s misfired on a loaded 2-core host)


def reached(status: dict | None, state: str) -> bool:
    """A connector's status (GET /connectors/<n>/status) is the flow state:
    running with all its tasks (no tasks is normal: no matching topic or group
    yet), paused with every task paused, or stopped with no task left."""
    if status is None:
        return False
    tasks = [t["state"] for t in status.get("tasks", [])]
    if state == "stopped":
        return status["connector"]["state"] == "STOPPED" and not tasks
    want = CONNECT_STATES[state]
    return status["connector"]["state"] == want and all(t == want for t in tasks)


def wait_running(client: ConnectClient, names: list[str], timeout: float,
                 restarted: set[str] = frozenset()) -> dict[str, dict[str, str]]:
    """Until every connector and all its tasks run (see wait_state)."""
    return wait_state(client, names, "running", timeout, restarted)


def _failure(name: str, status: dict, flow: str | None, restarted_at: float | None) -> ConnectError:
    """The error for a connector with a FAILED part: which part, the first line of
    its trace (the cause), then the trace. A part that failed again after `up`
    restarted it is a crash loop, and says so."""
    failed = next(p for p in [status["connector"], *status.get("tasks", [])] if p.get("state") == "FAILED")
    label = "connector" if failed is status["connector"] else f"task {failed.get('id')}"
    where = f"flow {flow}: " if flow else ""
    if restarted_at is None:
        head = f"{where}{name} {label} FAILED on {failed.get('worker_id')}"
    else:
        head = (f"{where}{name} {label} FAILED again {time.monotonic() - restarted_at:.0f}s after `up` restarted it "
                f"(on {failed.get('worker_id')}): restarting does not help until its cause is fixed")
    return ConnectError(f"{head}: {first_line(failed.get('trace'))}\n{(failed.get('trace') or '')[:4000]}")


def wait_state(client: ConnectClient, names: list[str], state: str, timeout: float,
               restarted: set[str] = frozenset(), flow: str | None = None,
               watched: set[str] = frozenset()) -> dict[str, dict[str, str]]:
    """Until every connector is in the flow state `state` (reached); fails at
    once naming a FAILED connector or task with Connect's stack trace. Connect
    restarts asynchronously, so `restarted` connectors may show their old FAILED
    state until they are first seen without it (at most RESTART_GRACE). `watched`
    (restarted because they had FAILED) must then run for RESTART_STABILITY
    seconds: a cause still there fails them again, and fails `up`."""
    started = time.monotonic()
    next_progress = started + 10
    recovering, steady_since = set(restarted), None
    while True:
        # A connector deleted while it starts can leave a RUNNING status behind (the
        # start's status write lands after the deletion's tombstone): whether it
        # exists is its config, so a connector without one has no status here.
        configured = client.names()
        statuses = {name: client.status(name) if name in configured else None for name in names}
        now = time.monotonic()
        for name, status in statuses.items():
            failed = failed_parts(status)
            if name in recovering:
                if not failed:
                    recovering.discard(name)  # the restart took: a FAILED part from now on is a new failure
                elif now - started < RESTART_GRACE:
                    continue
            if failed:
                raise _failure(name, status, flow, started if name in watched else None)
        vanished = [name for name, status in statuses.items() if status is None]
        if vanished and now - started > VANISH_GRACE:
            raise ConnectError(f"{', '.join(vanished)} vanished from Kafka Connect at {client.url} after being "
                               "configured: something deletes connectors created over REST (Strimzi with the "
                               "annotation strimzi.io/use-connector-resources: \"true\" does); fix: run the flow "
                               "on a Connect cluster whose connectors are managed over REST")
        summary = {name: summarize(status) for name, status in statuses.items()}
        if all(reached(status, state) for status in statuses.values()):
            steady_since = steady_since or now
            if not watched or state != "running" or now - steady_since >= RESTART_STABILITY:
                return summary
        else:
            steady_since = None
        if now - started > timeout:
            raise ConnectError(f"connectors not {CONNECT_STATES[state]} after {timeout:.0f}s: {summary}")
        if now >= next_progress:
            doing = (f"restarted the failed tasks of {', '.join(sorted(watched))}: running; watching that they stay so for "
                     f"{RESTART_STABILITY}s ({now - steady_since:.0f}s)" if steady_since else
                     f"waiting for {', '.join(names)} to be {state} ({now - started:.0f}s): {summary}")
            _progress(doing)
            next_progress = now + 10
        time.sleep(1)


def _validate_all(client: ConnectClient, connectors: dict[str, dict[str, str]]) -> None:
    problems = [f"  {name}: {error}" for name, config in connectors.items() for error in client.validate(name, config)]
    if problems:
        raise ConnectError("Kafka Connect rejected the MirrorMaker 2 configuration:\n" + "\n".join(problems))


PROBE_TIMEOUT = 3  # seconds: is a worker answering at all (failover, live checks in diff)


def _answers(url: str, headers: dict, ca_file: str | None = None) -> bool:
    import urllib3
    try:
        pool = urllib3.PoolManager(**({"ca_certs": ca_file} if ca_file else {}))
        reply = pool.request("GET", f"{url.rstrip('/')}/", headers=headers, retries=False,
                             timeout=urllib3.Timeout(connect=PROBE_TIMEOUT, read=PROBE_TIMEOUT))
        return reply.status < 500
    except urllib3.exceptions.HTTPError:
        return False


def _client(props) -> ConnectClient:
    """A client of the first worker that answers: any worker of the group serves
    (and forwards to the leader) the whole REST API, so a dead worker 0 must not
    stop `up`, `refresh` or `destroy`. With none answering, the first one's URL
    is used, and its error names it. Basic auth when the workers require it,
    HTTPS checked against `connect_ca_file` when given."""
    import urllib3
    urls = [props["connect_url"]] + [u for u in (props.get("connect_urls") or []) if u != props["connect_url"]]
    auth = props.get("connect_auth")
    ca_file = props.get("connect_ca_file") or None
    headers = urllib3.make_headers(basic_auth=f"{auth['username']}:{auth['password']}") if auth else {}
    url = next((u for u in urls if len(urls) > 1 and _answers(u, headers, ca_file)), urls[0])
    client = ConnectClient(url, ca_file)
    client.http.headers = {**client.http.headers, **headers}
    return client


def check_workers(client: ConnectClient) -> None:
    """Before anything changes: the workers answer, accept the credentials and
    have the three MirrorMaker 2 connector plugins."""
    plugins = client.plugins()
    missing = [kind for kind in KINDS.values() if f"{MIRROR_PACKAGE}.{kind}" not in plugins]
    if missing:
        raise ConnectError(f"Kafka Connect at {client.url} has no {', '.join(missing)} plugin; fix: put Kafka's "
                           "connect-mirror and connect-mirror-client jars on every worker's plugin.path (or "
                           "classpath) and restart the workers, or run the flow on another Connect cluster")


def _live_problems(props, client: ConnectClient | None = None, say: bool = True) -> dict[str, str]:
    """Connectors not as the stack wants them right now, in one quick call
    (`GET /connectors?expand=status`): name → MISSING, FAILED (a part of it), or
    the state someone moved it to outside the stack (PAUSED, STOPPED, RUNNING:
    not the flow's state). {} when Connect does not answer (the update itself
    will then say so), so a preview never hangs on it. `say`: print each failed
    part (the diff does; the update of the same `up` then does not repeat it)."""
    import urllib3
    try:
        client = client or _client(props)
        reply = client.http.request("GET", f"{client.url}/connectors?expand=status", retries=False,
                                    timeout=urllib3.Timeout(connect=PROBE_TIMEOUT, read=PROBE_TIMEOUT))
        if reply.status != 200:
            raise ValueError(f"answered {reply.status}")
        live = json.loads(reply.data)
    except (urllib3.exceptions.HTTPError, ValueError, ConnectError) as exc:
        # A preview where Connect does not answer (a PR runner): no change, and say so.
        _progress(f"{props.get('flow')}: Kafka Connect at {props.get('connect_url')} did not answer within "
                  f"{PROBE_TIMEOUT}s ({type(exc).__name__}); could not check its connectors from here")
        return {}
    want = CONNECT_STATES[props.get("state") or "running"]
    problems = {}
    for name in props.get("connectors") or {}:
        status = (live.get(name) or {}).get("status")
        parts = [status["connector"], *status.get("tasks", [])] if status else []
        if status is None:
            problems[name] = "MISSING"
        elif failed := failed_parts(status):
            problems[name] = "FAILED"
            if say:
                _progress(f"{name}: {'; '.join(failed)}; `pulumi up` restarts it (and fails if it fails again)")
        elif status["connector"].get("state") in TARGET_STATES and status["connector"]["state"] != want:
            problems[name] = status["connector"]["state"]  # UNASSIGNED/RESTARTING pass: Connect is moving it
    return problems


def _live_failures(props, client: ConnectClient | None = None) -> list[str]:
    """Connectors missing or with a FAILED part right now (see _live_problems)."""
    return [n for n, p in _live_problems(props, client).items() if p in ("MISSING", "FAILED")]


def _settle(client: ConnectClient, names, state: str, drift: dict[str, str] | None = None) -> None:
    """Move each connector that is not in the flow's state to it (Connect's
    pause, resume, stop). `drift`: connectors someone moved outside the stack
    (name → the state seen): `up` says what it repairs."""
    want = CONNECT_STATES[state]
    for name in names:
        status = client.status(name)
        now = (status or {}).get("connector", {}).get("state")
        if now == want and (state != "stopped" or not status.get("tasks")):
            continue
        if state == "running" and now not in ("PAUSED", "STOPPED"):
            continue  # starting or restarting: wait_state sees it run, or fails naming why
        if name in (drift or {}):
            _progress(f"{name} on {client.url} is {now or drift[name]}, changed outside the stack; the flow's "
                      f"state is {state}: {VERBS[state]} it")
        client.set_state(name, state)


def _restart_failed(client: ConnectClient, name: str) -> None:
    """Connect's own restart of a connector's FAILED parts only (Strimzi's auto-restart)."""
    client._ok(client._call("POST", f"/connectors/{quote(name, safe='')}/restart?includeTasks=true&onlyFailed=true"),
               f"restarting the failed tasks of {name}")


def _owner_problems(client: ConnectClient, connectors: dict[str, dict], adopt: list[str]) -> list[str]:
    """Connectors of these names that exist already and are not this stack's to
    configure: another stack's, or made by hand without being adopted."""
    problems = []
    for name, config in connectors.items():
        live = client.get_config(name)
        if live is None:
            continue
        ours, theirs = config.get(OWNER_KEY), live.get(OWNER_KEY)
        if theirs is not None and theirs != ours:
            problems.append(f"{name} on {client.url} belongs to the stack {theirs!r}; fix: give this flow other "
                            "connector names (connector_names), or remove the flow from that stack first")
        elif theirs is None and name not in adopt:
            problems.append(f"{name} on {client.url} exists and was made outside mirrorstack; fix: adopt it "
                            "(flow connector_names) to reconfigure it in place, take it over (take_over) under "
                            "mirrorstack's names, or delete it")
    return problems


def carry_over(old_client: ConnectClient, old: str, client: ConnectClient, new: str, config: dict | None,
               state: str = "running", keep_offsets: bool = True) -> bool:
    """Replace connector `old` by `new` without replication starting over:
    stop `old` (its tasks commit), copy its source offsets to `new` (created
    stopped, or stopped), put `new` in the flow's `state`, delete `old`. `config`
    None: only delete `old`. False when there is no `old` (never was, or a re-run
    after a failure part-way): `new` is then the caller's to configure.
    `keep_offsets` False (the names changed): `new` starts from no offsets."""
    if old_client.status(old) is None:
        return False
    old_client.stop(old)
    if old == new and config is not None and (client.status(new) or {}).get("connector", {}).get("state") == "STOPPED":
        client.put_config(new, config)  # one Connect group after all (its workers moved): nothing to carry
        if not keep_offsets:
            client.reset_offsets(new)
        if state != "stopped":
            client.set_state(new, state)
        return True
    offsets = old_client.offsets(old) if config is not None and keep_offsets else []
    if config is not None:
        if client.get_config(new) is None:
            client.create_stopped(new, config)
        else:
            client.stop(new)
            client.put_config(new, config)
            if not keep_offsets:
                client.reset_offsets(new)
        if offsets:
            client.set_offsets(new, offsets)
        if state != "stopped":
            client.set_state(new, state)
    old_client.delete(old)
    where = "" if old_client.url == client.url else f" on {old_client.url}"
    _progress(f"{old}{where} replaced by {new} on {client.url}, {len(offsets)} source offsets carried over"
              if config is not None else f"{old}{where} deleted (taken over)")
    return True


# The keys that name what a connector writes: a change renames every remote and internal
# topic, and offsets committed under the old names must not carry on (plan.RENAME_WARNING).
NAMING_KEYS = ("replication.policy.class", "replication.policy.separator")


def renames(old: dict[str, str] | None, new: dict[str, str] | None) -> bool:
    return bool(old) and bool(new) and any(old.get(k) != new.get(k) for k in NAMING_KEYS)


def _refuse_colliding_renames(flow: str, old: dict[str, dict], changed: dict[str, dict]) -> None:
    """Before anything changes: a rename Kafka cannot create would stall the flow."""
    for name, config in changed.items():
        if renames(old.get(name), config) and config.get("connector.class") == f"{MIRROR_PACKAGE}.{SOURCE}":
            if problems := rename_problems(config):
                raise ConnectError(f"flow {flow}: nothing changed: " + "; ".join(problems))


def start_over(client: ConnectClient, name: str, config: dict[str, str], state: str) -> None:
    """Give a connector its new config with its offsets reset (KIP-875: stopped,
    DELETE .../offsets), then its flow state: MM2 copies the source topics again
    from their start, under the new names."""
    client.stop(name)
    client.put_config(name, config)
    client.reset_offsets(name)
    if state != "stopped":
        client.set_state(name, state)
    _progress(f"{name}: the replication policy or separator changed: offsets reset, the source topics are copied "
              "again under the new names; the old remote topics stay on the target")


def _configure(client: ConnectClient, name: str, config: dict[str, str], state: str) -> None:
    """Write a connector's config; one that does not exist yet is created in the
    flow's state (a config change keeps an existing one's paused or stopped state)."""
    if state != "running" and client.get_config(name) is None:
        client.create(name, config, state)
    else:
        client.put_config(name, config)


def _by_class(connectors: dict[str, dict]) -> dict[str, str]:
    return {config.get("connector.class"): name for name, config in connectors.items()}


class MirrorMaker2Provider(ResourceProvider):
    def create(self, props):
        client = _client(props)
        check_workers(client)
        connectors = props["connectors"]
        _validate_all(client, connectors)
        if problems := _owner_problems(client, connectors, props.get("adopt") or []):
            raise ConnectError("\n".join(problems))
        state = props.get("state") or "running"
        taken = set()
        for old, new in (props.get("take_over") or {}).items():
            if carry_over(client, old, client, new, connectors.get(new) if new else None, state):
                taken.add(new)
        for name, config in connectors.items():
            if name not in taken:
                _configure(client, name, config, state)
        _settle(client, connectors, state)  # adopted connectors keep theirs until told
        states = wait_state(client, list(connectors), state, float(props["timeout_seconds"]), flow=props["flow"])
        return CreateResult(id_=props["flow"], outs={**props, "states": states})

    def diff(self, _id, olds, news):
        replaces = ["flow"] if olds.get("flow") != news.get("flow") else []
        changed = [k for k in ("connect", "connect_url", "connect_urls", "connectors", "secrets_digest",
                               "restart_trigger", "take_over")
                   if (olds.get(k) or None) != (news.get(k) or None)]
        state = olds.get("state") or "running"
        if state != (news.get("state") or "running"):
            changed.append("state")
        # Failed, missing, paused or stopped out of band (seen by refresh, or live now): up repairs.
        live = _live_problems(olds)
        for name, problem in live.items():
            if problem in TARGET_STATES and "state" not in changed:
                _progress(f"{name} is {problem}, changed outside the stack (the flow's state is {state}); "
                          f"up puts it back")
        if live or any(s.get("state") != CONNECT_STATES[state] for s in (olds.get("states") or {}).values()):
            changed.append("states")
        return DiffResult(changes=bool(replaces or changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id, olds, news):
        client = _client(news)
        check_workers(client)
        old, new = olds.get("connectors") or {}, news["connectors"]
        # Another Connect cluster: every connector moves there, offsets carried over
        # (state written before `connect` was recorded: a new URL is the sign).
        url_changed = olds.get("connect_url") != news["connect_url"]
        moved = olds.get("connect") != news.get("connect") if olds.get("connect") else url_changed
        changed = {name: cfg for name, cfg in new.items() if url_changed or moved or old.get(name) != cfg}
        state = news.get("state") or "running"
        live = {} if url_changed or moved else _live_problems(news, client, say=False)
        live_failed = {name for name, problem in live.items() if problem in ("MISSING", "FAILED")}
        # Paused, stopped or resumed by hand while the stack's state stayed: up puts them back, saying so.
        drift = {} if (olds.get("state") or "running") != state else {
            **{name: s["state"] for name, s in (olds.get("states") or {}).items()
               if name in new and s.get("state") in TARGET_STATES and s["state"] != CONNECT_STATES[state]},
            **{name: problem for name, problem in live.items() if problem in TARGET_STATES}}
        changed.update({name: new[name] for name in live_failed if client.get_config(name) is None})  # deleted
        _validate_all(client, changed)
        _refuse_colliding_renames(news["flow"], old, changed)
        if problems := _owner_problems(client, {n: changed[n] for n in changed.keys() - old.keys()},
                                       news.get("adopt") or []):
            raise ConnectError("\n".join(problems))
        # Old connectors that go away (moved or renamed): the new one of the same
        # class carries their offsets on, so nothing is copied twice or from the start.
        gone = old.keys() if moved else old.keys() - new.keys()
        old_client = (_client(olds) if moved else client) if gone else None
        new_by_class, taken = _by_class(new), set()
        for name in sorted(gone):
            successor = new_by_class.get(old[name].get("connector.class"))
            if successor and (moved or successor not in old):
                if carry_over(old_client, name, client, successor, new[successor], state,
                              keep_offsets=not renames(old[name], new[successor])):
                    taken.add(successor)
            else:
                old_client.delete(name)
        for stale, successor in (news.get("take_over") or {}).items():
            if carry_over(client, stale, client, successor, new.get(successor) if successor else None, state):
                taken.add(successor)
        for name, config in changed.items():
            if name in taken:
                continue
            if renames(old.get(name), config) and client.get_config(name) is not None:
                start_over(client, name, config, state)
            else:
                _configure(client, name, config, state)
        # Secrets reach Connect as `${file:...}` references, resolved when a connector
        # starts: a rotated secret (a new digest) needs a restart to be read.
        restart = any(olds.get(k) != news.get(k) for k in ("restart_trigger", "secrets_digest"))
        # A stopped connector has no task to restart: it reads them when it starts.
        restarted, watched = set(), set()
        for name in new:
            if name in changed or name in taken or state == "stopped":
                continue
            recorded = (olds.get("states") or {}).get(name) or {}
            had_failed = name in live_failed or recorded.get("state") == "FAILED" or \
                (recorded.get("state") == "RUNNING" and recorded.get("running_tasks") != recorded.get("tasks"))
            if restart:
                client.restart(name)
            elif had_failed:
                _restart_failed(client, name)
            if restart or had_failed:
                restarted.add(name)
            if had_failed:
                watched.add(name)
        _settle(client, new, state, drift)
        states = wait_state(client, list(new), state, float(news["timeout_seconds"]), restarted=restarted,
                            flow=news.get("flow"), watched=watched)
        return UpdateResult(outs={**news, "states": states})

    def delete(self, _id, props):
        client = _client(props)
        for name in props["connectors"]:
            client.delete(name)

    def read(self, id_, props):
        """`pulumi refresh`: each connector's config and state, read live, within
        seconds even during an outage (no retry, REFRESH_TIMEOUT a request): when
        Connect cannot answer, the connectors are recorded UNREACHABLE with their
        configs as last seen, and the output says what is down and the fix."""
        import urllib3
        client = _client(props)
        client._call = _quick(client, REFRESH_TIMEOUT)
        live, states = {}, {}
        try:
            for name in props["connectors"]:
                config = client.get_config(name)
                if config is not None:
                    live[name] = config
                states[name] = summarize(client.status(name))
                if "failed" in states[name]:  # refresh records it; say it too
                    _progress(f"{name}: {states[name]['failed']}; `pulumi up` restarts it")
        except (ConnectError, urllib3.exceptions.HTTPError) as exc:
            if isinstance(exc, ConnectError) and (exc.status or 500) < 500:
                raise  # Connect answered, and refused (credentials): not an outage
            _progress(_outage(props, client, exc))
            down = {"state": "UNREACHABLE", "tasks": "0", "running_tasks": "0"}
            return ReadResult(id_=id_, outs={**props, "states": {name: dict(down) for name in props["connectors"]}})
        return ReadResult(id_=id_, outs={**props, "connectors": live, "states": states})


REFRESH_TIMEOUT = 10  # seconds a request of `pulumi refresh` may take (3 s misfired on a loaded host)


def _outage(props, client: ConnectClient, exc: Exception) -> str:
    """What refresh says when Connect could not answer: which part is down, and the fix."""
    recorded = "recorded its connectors as UNREACHABLE (their configs as last seen)"
    if _answers(client.url, client.http.headers, props.get("connect_ca_file") or None):
        return (f"{props.get('flow')}: Kafka Connect at {client.url} answers but could not read its connectors "
                f"within {REFRESH_TIMEOUT}s ({type(exc).__name__}): a worker keeps them in topics of its own Kafka "
                f"cluster (Connect cluster {props.get('connect') or client.url} runs on it), which is likely down; "
                f"{recorded}; fix: bring that Kafka cluster back (`pulumi up` restarts the brokers and controllers "
                "the stack runs), then `pulumi up` checks the connectors")
    return (f"{props.get('flow')}: Kafka Connect at {client.url} is down ({type(exc).__name__}: {exc}); {recorded}; "
            "fix: `pulumi up` restarts the Connect workers the stack runs (an external Connect cluster: start its "
            "workers), then checks the connectors")


def takeover_plan(props) -> list[str]:
    """What `up` will do to existing connectors of a flow (adopted or taken
    over), read live, for the preview; says so when Connect cannot be asked."""
    import urllib3
    adopt, take_over = props.get("adopt") or [], props.get("take_over") or {}
    if not adopt and not take_over:
        return []
    try:
        client = _client(props)
        client._call = _quick(client)
        status = {name: client.status(name) for name in [*adopt, *take_over]}
        owners = {name: (client.get_config(name) or {}).get(OWNER_KEY) for name in adopt if status[name]}
    except (ConnectError, urllib3.exceptions.HTTPError) as exc:
        return [f"could not ask Kafka Connect which of {', '.join([*adopt, *take_over])} exist ({exc}); up adopts "
                "or takes over those it finds"]
    lines = []
    for name in adopt:
        if status[name] is None:
            lines.append(f"{name}: does not exist; up creates it")
        elif owners.get(name) is None:
            lines.append(f"{name}: exists ({summarize(status[name])['state']}, made outside mirrorstack); up adopts "
                         "it: its config is replaced in place, its source offsets are kept")
    for old, new in take_over.items():
        if status[old] is None:
            lines.append(f"{old}: not found; nothing to take over (remove it from take_over)")
        elif new:
            lines.append(f"{old}: exists ({summarize(status[old])['state']}); up stops it, copies its source offsets "
                         f"to {new}, starts {new} and deletes {old}")
        else:
            lines.append(f"{old}: exists; up stops and deletes it (the flow runs no connector of its kind)")
    return lines


def _quick(client: ConnectClient, read_timeout: float = PROBE_TIMEOUT):
    """A `_call` without retries and with short timeouts: a preview or a refresh never waits on Connect."""
    import urllib3

    def call(method, path, **kwargs):
        return client.http.request(method, f"{client.url}{path}", retries=False,
                                   timeout=urllib3.Timeout(connect=PROBE_TIMEOUT, read=read_timeout), **kwargs)
    return call


class MirrorMaker2Connectors(Resource, module="mirror", name="MirrorMaker2Connectors"):
    """The source, checkpoint and heartbeat connectors of one flow, as one resource.
    Outputs: `connectors` (name → config), `states` (name → state, task counts).
    Configs carry no secret: credentials are `${file:...}` references the Connect
    workers resolve; `secrets_digest` (a secret) changes when they rotate, and
    restarts the connectors so they read the new values. `connect_urls`: every
    worker's REST URL (any that answers is used); `connect_auth` (a secret
    {username, password}) when the REST API requires basic auth. `state`: the
    flow's state (running, paused, stopped), which every connector is put in and
    kept in (one paused or stopped by hand is a diff that `up` repairs); running
    is left out of the inputs, so stacks deployed before flow states see no change."""

    connectors: pulumi.Output[dict]
    states: pulumi.Output[dict]

    def __init__(self, name: str, *, flow: str, connect_url: pulumi.Input[str],
                 connectors: pulumi.Input[dict], secrets_digest: pulumi.Input[str] | None = None,
                 connect_urls: pulumi.Input[list] | None = None, connect_auth: pulumi.Input[dict] | None = None,
                 timeout_seconds: int = 300, restart_trigger: str = "", connect: str | None = None,
                 connect_ca_file: str | None = None, adopt: list[str] | None = None,
                 take_over: dict[str, str] | None = None, state: str = "running",
                 opts: pulumi.ResourceOptions | None = None):
        if state not in CONNECT_STATES:
            raise ValueError(f"{flow}: state {state!r} is not one of {', '.join(CONNECT_STATES)}")
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        super().__init__(MirrorMaker2Provider(), resource_name, {
            "flow": flow, "connect_url": connect_url, "connectors": connectors,
            "connect": connect, "connect_ca_file": connect_ca_file, "adopt": adopt or None,
            "take_over": take_over or None, "state": None if state == "running" else state,
            "secrets_digest": pulumi.Output.secret(secrets_digest) if secrets_digest is not None else None,
            "connect_urls": connect_urls,
            "connect_auth": pulumi.Output.secret(connect_auth) if connect_auth is not None else None,
            "timeout_seconds": str(timeout_seconds), "restart_trigger": restart_trigger, "states": None,
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            additional_secret_outputs=["secrets_digest", "connect_auth"])))


class MirrorMaker2(pulumi.ComponentResource):
    """One replication flow (source → target) in a Connect cluster, built from
    MirrorMaker2Args (the topology names it after the flow), in `state`
    (running, paused, stopped: the topology's flow_state of the flow).
    Outputs: `connector_names`, `states` (name → state and task counts)."""

    states: pulumi.Output[dict]

    def __init__(self, name: str, args: MirrorMaker2Args, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:mirror:MirrorMaker2", name, opts)
        from components.mirror.connectors import take_over_names
        flow, connect_url, connect_urls = args.flow, args.connect_url, args.connect_urls
        connect_auth, connect_ca_file = args.connect_auth, args.connect_ca_file
        adopt = sorted(flow.connector_names.by_kind().values()) if flow.connector_names else None
        take_over = take_over_names(flow)
        self.connectors = MirrorMaker2Connectors(
            f"{flow.name}-connectors", flow=flow.name, connect_url=connect_url, connectors=args.connectors,
            secrets_digest=args.secrets_digest, connect_urls=connect_urls, connect_auth=connect_auth,
            restart_trigger=args.restart_trigger, connect=args.connect, connect_ca_file=connect_ca_file, adopt=adopt,
            take_over=take_over, state=args.state, opts=pulumi.ResourceOptions(parent=self))
        if adopt or take_over:  # say in the preview what happens to connectors made by hand
            plan = pulumi.Output.all(connect_url, connect_urls, connect_auth).apply(
                lambda a: takeover_plan({"connect_url": a[0], "connect_urls": a[1], "connect_auth": a[2],
                                         "connect_ca_file": connect_ca_file, "adopt": adopt, "take_over": take_over}))
            plan.apply(lambda lines: [pulumi.log.info(f"{flow.name}: {line}", resource=self) for line in lines])
        self.connector_names = self.connectors.connectors.apply(lambda c: sorted(c or {}))
        self.states = self.connectors.states
        self.register_outputs({"connector_names": self.connector_names, "states": self.states})
