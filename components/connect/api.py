"""The Kafka Connect REST API, behind one client: the only module that speaks
HTTP to Kafka Connect.

Every request has a timeout and urllib3 retries connection errors, 5xx and
Connect's 409 (rebalance in progress); `ConnectClient.quick()` is the same
client without retries and with short timeouts, for a preview, a refresh or a
readiness probe that must never wait on Connect. Also here: what a connector's
status means (reached, failed parts, summaries) and the polling until a set of
connectors is in a flow's state. Dynamic providers are pickled by Pulumi
(dill), so they build a client inside each method and capture none.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from urllib.parse import quote

from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

from mirrorstack.platforms import tunnels

# Kafka Connect REST: each attempt may take CONNECT_TIMEOUT to connect and READ_TIMEOUT
# for the answer; connection errors, timeouts, 5xx and 409 (a rebalance in progress) are
# retried with backoff until REQUEST_BUDGET is spent (no new attempt starts after it), then
# ConnectError names the worker's URL. Refused connections give up sooner (CONNECT_RETRIES).
CONNECT_TIMEOUT = 5  # seconds
READ_TIMEOUT = 30  # seconds
REQUEST_BUDGET = 90  # seconds per request, retries included
# A budget of the operator's for every request of this process (e.g. `pulumi up` over a slow link):
# seconds, > 0. An attempt's read timeout never exceeds it.
REQUEST_BUDGET_ENV = "MIRRORSTACK_CONNECT_REQUEST_SECONDS"
CONNECT_RETRIES = 5  # about 15 s of backoff (0.5 s doubling, at most 8 s a wait)
RETRY_STATUSES = (409, 500, 502, 503, 504)


PROBE_TIMEOUT = 3  # seconds: is a worker answering at all (failover, live checks in diff, readiness)


def request_budget() -> float:
    """REQUEST_BUDGET, or REQUEST_BUDGET_ENV's seconds when set."""
    return _seconds_from_env(REQUEST_BUDGET_ENV, REQUEST_BUDGET, "the seconds a Connect request may take, "
                             "retries included")


def restart_watch() -> float:
    """RESTART_STABILITY, or RESTART_WATCH_ENV's seconds when set."""
    return _seconds_from_env(RESTART_WATCH_ENV, RESTART_STABILITY, "the seconds a task `up` restarted must "
                             "then run")


def _seconds_from_env(name: str, default: float, meaning: str) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{name}={value!r}: give {meaning}, as a number > 0 (default {default}), or unset it")
    return seconds


HTML_TITLE = re.compile(r"<title>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def reply_text(data: bytes, limit: int = 2000) -> str:
    """An error reply in one line: Connect's JSON `message`, or the title of an HTML
    page (Jetty answers a starting worker's requests with a whole 404 page)."""
    text = data.decode(errors="replace").strip()
    if text.startswith("<"):
        title = HTML_TITLE.search(text)
        return f"an HTML page ({' '.join(title.group(1).split()) if title else 'untitled'})"
    try:
        message = json.loads(text).get("message")
    except (ValueError, AttributeError):
        message = None
    return " ".join((message or text).split())[:limit]


class ConnectError(RuntimeError):
    status: int | None = None  # Connect's HTTP status, when it answered with an error


def progress(message: str) -> None:
    """A progress line of a long Connect operation, on the engine's stderr."""
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

    def __init__(self, url: str, ca_file: str | None = None, headers: dict | None = None):
        import urllib3

        self.url = url.rstrip("/")
        self.ca_file = ca_file
        tls = {"ca_certs": ca_file} if ca_file else {}
        self.http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT), **tls)
        self.http.headers = {**self.http.headers, **(headers or {})}
        self._quick_read: float | None = None  # set by quick(): no retries, short timeouts

    def quick(self, read_timeout: float = PROBE_TIMEOUT) -> ConnectClient:
        """This client without retries and with short timeouts (PROBE_TIMEOUT to
        connect, `read_timeout` to answer): a preview, a refresh or a probe never
        waits on Connect. Its transport errors are urllib3's own HTTPError."""
        quick = ConnectClient(self.url, self.ca_file, self.http.headers)
        quick._quick_read = read_timeout
        return quick

    def _base(self) -> str:
        """Where requests go: the URL itself, or the local end of its tunnel (a
        kube:// or docker:// address, opened on first use and again after its
        pod restarted)."""
        try:
            return tunnels.local(self.url).rstrip("/")
        except tunnels.TunnelError as exc:
            raise ConnectError(f"Kafka Connect at {self.url} is unreachable: {exc}") from exc

    def _call(self, method: str, path: str, **kwargs):
        if tunnels.is_tunnelled(self.url):
            try:
                return self._call_at(self._base(), method, path, **kwargs)
            except ConnectError:  # the tunnel's pod may have gone: one more try through a new tunnel
                tunnels.forget(self.url)
        return self._call_at(self._base(), method, path, **kwargs)

    def _call_at(self, base: str, method: str, path: str, **kwargs):
        import urllib3
        from urllib3.exceptions import HTTPError, NewConnectionError

        if self._quick_read is not None:
            return self.http.request(method, f"{base}{path}", retries=False, **kwargs,
                                     timeout=urllib3.Timeout(connect=PROBE_TIMEOUT, read=self._quick_read))
        started = time.monotonic()
        retry = self._Retry(total=None, connect=CONNECT_RETRIES, read=None, status=None, other=2,
                            backoff_factor=0.5, backoff_max=8, status_forcelist=RETRY_STATUSES,
                            allowed_methods=None, raise_on_status=False)  # every call here is safe to repeat
        budget = request_budget()
        retry.deadline = started + budget
        if budget < READ_TIMEOUT and "timeout" not in kwargs:
            kwargs["timeout"] = urllib3.Timeout(connect=min(CONNECT_TIMEOUT, budget), read=budget)
        try:
            return self.http.request(method, f"{base}{path}", retries=retry, **kwargs)
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
            error = ConnectError(f"{what}: Kafka Connect at {self.url} refused the credentials (401 Unauthorized); "
                                 "fix: check the REST user and its password (an external Connect cluster's is "
                                 "mirrorstack:connectSecrets.<name>.password)")
            error.status = 401  # an answer, not an outage (refresh and destroy tell them apart by it)
            raise error
        if reply.status >= 400:
            text = reply_text(reply.data)
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

    def expanded_status(self) -> dict[str, dict]:
        """Every connector's status in one call, as Connect answers
        GET /connectors?expand=status: name → {"status": {connector, tasks}}."""
        return self._ok(self._call("GET", "/connectors?expand=status"), "listing the connectors' status") or {}

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

    def health(self) -> dict:
        """Connect's `/health` (KIP-1017, Kafka 3.9+): {"status": "healthy", "starting" or
        "unhealthy", "message": what the worker is doing}. A worker without it answers 404
        (a ConnectError with that status)."""
        reply = self._call("GET", "/health")
        if reply.status in (500, 503):  # starting, or its herder is stuck: the body says at what
            try:
                return json.loads(reply.data)
            except ValueError:
                pass
        return self._ok(reply, "asking its health")

    def plugins(self) -> list[str]:
        return [p["class"] for p in self._ok(self._call("GET", "/connector-plugins?connectorsOnly=true"),
                                              "listing the connector plugins")]

    def restart(self, name: str) -> None:
        self._ok(self._call("POST", f"/connectors/{quote(name, safe='')}/restart?includeTasks=true&onlyFailed=false"),
                 f"restarting {name}")

    def restart_failed(self, name: str) -> None:
        """Connect's own restart of a connector's FAILED parts only (Strimzi's auto-restart)."""
        self._ok(self._call("POST", f"/connectors/{quote(name, safe='')}/restart?includeTasks=true&onlyFailed=true"),
                 f"restarting the failed tasks of {name}")


# A flow's state (mirrorstack.model.spec.Flow.state) as Connect names its connectors' target state.
CONNECT_STATES = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}
# Connect's connector states that are a flow state (UNASSIGNED, RESTARTING, FAILED are none).
TARGET_STATES = {v: k for k, v in CONNECT_STATES.items()}


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
# The operator's for one `pulumi` run (e.g. a task known to fail later than that: more): seconds, > 0.
RESTART_WATCH_ENV = "MIRRORSTACK_RESTART_WATCH_SECONDS"
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
    (restarted because they had FAILED) must then run for restart_watch()
    seconds: a cause still there fails them again, and fails `up`."""
    started, watch = time.monotonic(), restart_watch()
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
            if not watched or state != "running" or now - steady_since >= watch:
                return summary
        else:
            steady_since = None
        if now - started > timeout:
            raise ConnectError(f"connectors not {CONNECT_STATES[state]} after {timeout:.0f}s: {summary}")
        if now >= next_progress:
            doing = (f"restarted the failed tasks of {', '.join(sorted(watched))}: running; watching that they stay so for "
                     f"{watch:.0f}s ({now - steady_since:.0f}s)" if steady_since else
                     f"waiting for {', '.join(names)} to be {state} ({now - started:.0f}s): {summary}")
            progress(doing)
            next_progress = now + 10
        time.sleep(1)


def answers(url: str, headers: dict, ca_file: str | None = None) -> bool:
    """Whether a worker answers at all (any status below 500), within PROBE_TIMEOUT."""
    import urllib3
    try:
        pool = urllib3.PoolManager(**({"ca_certs": ca_file} if ca_file else {}))
        reply = pool.request("GET", f"{tunnels.local(url).rstrip('/')}/", headers=headers, retries=False,
                             timeout=urllib3.Timeout(connect=PROBE_TIMEOUT, read=PROBE_TIMEOUT))
        return reply.status < 500
    except (urllib3.exceptions.HTTPError, tunnels.TunnelError):
        return False


def basic_auth(auth: dict | tuple | None) -> dict:
    """The Authorization header of {username, password} or (user, password); {} for None."""
    if not auth:
        return {}
    import urllib3
    user, password = (auth["username"], auth["password"]) if isinstance(auth, dict) else auth
    return urllib3.make_headers(basic_auth=f"{user}:{password}")


def client_from(props) -> ConnectClient:
    """A client of the first worker that answers: any worker of the group serves
    (and forwards to the leader) the whole REST API, so a dead worker 0 must not
    stop `up`, `refresh` or `destroy`. With none answering, the first one's URL
    is used, and its error names it. Basic auth when the workers require it,
    HTTPS checked against `connect_ca_file` when given. `props`: connect_url,
    connect_urls, connect_auth ({username, password}), connect_ca_file."""
    urls = [props["connect_url"]] + [u for u in (props.get("connect_urls") or []) if u != props["connect_url"]]
    ca_file = props.get("connect_ca_file") or None
    headers = basic_auth(props.get("connect_auth"))
    url = next((u for u in urls if len(urls) > 1 and answers(u, headers, ca_file)), urls[0])
    return ConnectClient(url, ca_file, headers)
