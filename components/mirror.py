"""MirrorMaker2: the connector trio of one flow as ONE Pulumi dynamic resource.

The only module that speaks HTTP to Kafka Connect. Every request has a timeout
and urllib3 retries connection errors, 5xx and Connect's 409 (rebalance in
progress). The provider is pickled by Pulumi (dill), so the HTTP session is
built inside each method and nothing unpicklable is captured.
"""
from __future__ import annotations

import sys
import time
from urllib.parse import quote

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

REQUEST_TIMEOUT = 30  # seconds, per HTTP request


class ConnectError(RuntimeError):
    pass


def _progress(message: str) -> None:
    print(f"mirrorstack: {message}", file=sys.stderr, flush=True)


class ConnectClient:
    def __init__(self, url: str):
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        self.url = url.rstrip("/")
        # About 15 s of retries (backoff 0.5 s doubling), then a clear error.
        retry = Retry(total=5, backoff_factor=0.5, status_forcelist=(409, 500, 502, 503, 504),
                      allowed_methods=None, raise_on_status=False)
        self.http = requests.Session()
        self.http.mount("http://", HTTPAdapter(max_retries=retry))
        self.http.mount("https://", HTTPAdapter(max_retries=retry))

    def _call(self, method: str, path: str, **kwargs):
        import requests
        try:
            return self.http.request(method, f"{self.url}{path}", timeout=REQUEST_TIMEOUT, **kwargs)
        except requests.RequestException as exc:
            raise ConnectError(f"Kafka Connect at {self.url} is unreachable ({method} {path}): {exc}") from exc

    def _ok(self, reply, what: str):
        if reply.status_code >= 400:
            raise ConnectError(f"{what}: Kafka Connect at {self.url} answered {reply.status_code}: {reply.text[:2000]}")
        return reply.json() if reply.content else None

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
        if reply.status_code == 404:
            return None
        config = self._ok(reply, f"reading {name}")
        config.pop("name", None)
        return config

    def status(self, name: str) -> dict | None:
        reply = self._call("GET", f"/connectors/{quote(name, safe='')}/status")
        return None if reply.status_code == 404 else self._ok(reply, f"status of {name}")

    def delete(self, name: str) -> None:
        reply = self._call("DELETE", f"/connectors/{quote(name, safe='')}")
        if reply.status_code != 404:
            self._ok(reply, f"deleting {name}")

    def restart(self, name: str) -> None:
        self._ok(self._call("POST", f"/connectors/{quote(name, safe='')}/restart",
                            params={"includeTasks": "true", "onlyFailed": "false"}), f"restarting {name}")


def summarize(status: dict | None) -> dict[str, str]:
    if status is None:
        return {"state": "MISSING", "tasks": "0", "running_tasks": "0"}
    tasks = status.get("tasks", [])
    return {"state": status["connector"]["state"], "tasks": str(len(tasks)),
            "running_tasks": str(sum(t["state"] == "RUNNING" for t in tasks))}


def wait_running(client: ConnectClient, names: list[str], timeout: float) -> dict[str, dict[str, str]]:
    """Until every connector and all its tasks run; fails at once naming a
    FAILED connector or task with Connect's stack trace."""
    started = time.monotonic()
    next_progress = started + 10
    while True:
        statuses = {name: client.status(name) for name in names}
        for name, status in statuses.items():
            for part in [status["connector"] if status else None, *(status or {}).get("tasks", [])]:
                if part and part.get("state") == "FAILED":
                    label = f"task {part['id']}" if "id" in part and part is not status["connector"] else "connector"
                    raise ConnectError(f"{name} {label} FAILED on {part.get('worker_id')}:\n{part.get('trace', '')[:4000]}")
        summary = {name: summarize(status) for name, status in statuses.items()}
        # No tasks is normal: no matching topic (or group) exists yet.
        if all(s["state"] == "RUNNING" and s["running_tasks"] == s["tasks"] for s in summary.values()):
            return summary
        now = time.monotonic()
        if now - started > timeout:
            raise ConnectError(f"connectors not RUNNING after {timeout:.0f}s: {summary}")
        if now >= next_progress:
            _progress(f"waiting for {', '.join(names)} to run ({now - started:.0f}s): {summary}")
            next_progress = now + 10
        time.sleep(1)


def _validate_all(client: ConnectClient, connectors: dict[str, dict[str, str]]) -> None:
    problems = [f"  {name}: {error}" for name, config in connectors.items() for error in client.validate(name, config)]
    if problems:
        raise ConnectError("Kafka Connect rejected the MirrorMaker 2 configuration:\n" + "\n".join(problems))


def _with_secrets(props, connectors: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The configs Connect gets: the reviewable configs plus the secret settings."""
    secrets = props.get("secrets") or {}
    return {name: {**config, **secrets.get(name, {})} for name, config in connectors.items()}


class MirrorMaker2Provider(ResourceProvider):
    def create(self, props):
        client = ConnectClient(props["connect_url"])
        connectors = _with_secrets(props, props["connectors"])
        _validate_all(client, connectors)
        for name, config in connectors.items():
            client.put_config(name, config)
        states = wait_running(client, list(connectors), float(props["timeout_seconds"]))
        return CreateResult(id_=props["flow"], outs={**props, "states": states})

    def diff(self, _id, olds, news):
        replaces = ["flow"] if olds.get("flow") != news.get("flow") else []
        changed = [k for k in ("connect_url", "connectors", "secrets", "restart_trigger")
                   if (olds.get(k) or None) != (news.get(k) or None)]
        if any(s.get("state") != "RUNNING" for s in (olds.get("states") or {}).values()):
            changed.append("states")  # failed or missing out of band: up repairs
        return DiffResult(changes=bool(replaces or changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id, olds, news):
        client = ConnectClient(news["connect_url"])
        old, new = _with_secrets(olds, olds.get("connectors") or {}), _with_secrets(news, news["connectors"])
        moved = olds.get("connect_url") != news["connect_url"]
        changed = {name: cfg for name, cfg in new.items() if moved or old.get(name) != cfg}
        _validate_all(client, changed)
        for name in old.keys() - new.keys():
            ConnectClient(olds["connect_url"]).delete(name)
        for name, config in changed.items():
            client.put_config(name, config)
        restart = olds.get("restart_trigger") != news.get("restart_trigger")
        for name, state in (olds.get("states") or {}).items():
            if name in new and name not in changed and (restart or state.get("state") == "FAILED"
                                                          or state.get("running_tasks") != state.get("tasks")):
                client.restart(name)
        states = wait_running(client, list(new), float(news["timeout_seconds"]))
        return UpdateResult(outs={**news, "states": states})

    def delete(self, _id, props):
        client = ConnectClient(props["connect_url"])
        for name in props["connectors"]:
            client.delete(name)

    def read(self, id_, props):
        client = ConnectClient(props["connect_url"])
        live, states = {}, {}
        secrets = props.get("secrets") or {}
        for name in props["connectors"]:
            config = client.get_config(name)
            if config is not None:  # secret settings stay out of the (plain) connectors output
                live[name] = {k: v for k, v in config.items() if k not in secrets.get(name, {})}
            states[name] = summarize(client.status(name))
        return ReadResult(id_=id_, outs={**props, "connectors": live, "states": states})


class MirrorMaker2Connectors(Resource):
    """The source, checkpoint and heartbeat connectors of one flow, as one resource.
    Outputs: `connectors` (name → config), `states` (name → state, task counts)."""

    connectors: pulumi.Output[dict]
    states: pulumi.Output[dict]

    def __init__(self, name: str, *, flow: str, connect_url: pulumi.Input[str],
                 connectors: pulumi.Input[dict], secrets: pulumi.Input[dict] | None = None,
                 timeout_seconds: int = 300, restart_trigger: str = "",
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(MirrorMaker2Provider(), name, {
            "flow": flow, "connect_url": connect_url, "connectors": connectors,
            "secrets": pulumi.Output.secret(secrets) if secrets is not None else None,
            "timeout_seconds": str(timeout_seconds), "restart_trigger": restart_trigger, "states": None,
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["secrets"])))


class MirrorMaker2(pulumi.ComponentResource):
    """One replication flow (source → target) running in a Connect cluster.
    Outputs: `connector_names`, `states` (name → state and task counts)."""

    states: pulumi.Output[dict]

    def __init__(self, flow, *, connect_url: pulumi.Input[str], connectors: pulumi.Input[dict],
                 secrets: pulumi.Input[dict] | None = None, restart_trigger: str = "",
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("mirrorstack:mirror:MirrorMaker2", flow.name, None, opts)
        self.connectors = MirrorMaker2Connectors(
            f"{flow.name}-connectors", flow=flow.name, connect_url=connect_url, connectors=connectors,
            secrets=secrets, restart_trigger=restart_trigger, opts=pulumi.ResourceOptions(parent=self))
        self.connector_names = self.connectors.connectors.apply(lambda c: sorted(c or {}))
        self.states = self.connectors.states
        self.register_outputs({"connector_names": self.connector_names, "states": self.states})
