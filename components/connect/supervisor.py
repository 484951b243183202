"""The self-healing supervisor of one Connect group: a small long-running
process (a local process, a container, a Deployment) that keeps running when
`pulumi up` is not. Every `check_seconds` it reads every connector's status
in one call, restarts the FAILED parts of the stack's connectors on
mirrorstack.connect.healing's schedule (Connect's own restart of failed parts
only), logs each restart and give-up (and when it cannot read Connect: once as
it begins, every 10 min while it lasts, once when it ends), and serves its
metrics for Prometheus. On local a keeper starts it again if it exits; the
other platforms restart its container.

    python -m mirrorstack.connect.supervisor <config.json>

The config (written by mirrorstack.connect.supervision): connect (the group's
name), urls (every worker's REST URL as this process reaches it), ca_file,
secrets_file (a 0600 JSON: connect_auth {username, password}; none without
REST auth), connectors (name → the topology's flow state), schedule (unit_seconds,
max_delay_seconds, max_restarts), check_seconds, listen ("host:port" of the
metrics server). Imports no pulumi: in a container it runs from shipped source,
with the spark image's urllib3 and prometheus_client (Debian's python3-prometheus-client).
"""
from __future__ import annotations

import json
import sys
import threading
import time
from datetime import datetime, timezone
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from mirrorstack.connect.api import ConnectError, client_from
from mirrorstack.connect.healing import Decision, Schedule, Supervision, decide, metric_families, remember

READ_TIMEOUT = 10  # seconds: a check never hangs on a stuck worker; the next one tries again


def log(supervision: Supervision, message: str) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} mirrorstack supervisor {supervision.connect}: {message}", flush=True)


def load(path: str) -> tuple[Supervision, dict]:
    with open(path) as f:
        config = json.load(f)
    schedule = Schedule(**config["schedule"])
    return Supervision(config["connect"], dict(config["connectors"]), schedule), config


def client(config: dict):
    secrets = {}
    if config.get("secrets_file"):  # the REST credentials: a 0600 file, never the config
        with open(config["secrets_file"]) as f:
            secrets = json.load(f)
    auth = secrets.get("connect_auth")
    urls = config["urls"]
    return client_from({"connect_url": urls[0], "connect_urls": urls, "connect_auth": auth,
                        "connect_ca_file": config.get("ca_file")}).quick(READ_TIMEOUT)


def check(supervision: Supervision, config: dict, now: float) -> None:
    """One round: read every status, decide, restart what is due."""
    import urllib3
    try:
        connect = client(config)
        statuses = {name: entry.get("status") for name, entry in connect.expanded_status().items()}
    except (ConnectError, urllib3.exceptions.HTTPError, OSError) as exc:
        supervision.check_errors += 1
        if line := supervision.read_failures.failed(now, str(exc)[:300]):
            log(supervision, line)
        return
    if line := supervision.read_failures.answered(now):
        log(supervision, line)
    for name, wanted in sorted(supervision.wanted.items()):
        memory = supervision.of(name)
        status = statuses.get(name)
        decision = decide(status, wanted, memory, now, supervision.schedule)
        if decision.action == "restart":
            decision = restart(supervision, connect, name, wanted, now)
        elif decision.action == "capped" and not memory.capped:
            log(supervision, f"gave up on {name}: {decision.why}; `pulumi up` restarts it, or "
                             f"POST /connectors/{name}/restart?includeTasks=true&onlyFailed=true")
        remember(memory, decision, status, now, supervision.schedule)
    supervision.checks += 1
    supervision.last_check = time.time()


def restart(supervision: Supervision, connect, name: str, wanted: str, now: float) -> Decision:
    """Restart a connector's failed parts, after reading its status once more:
    a person or a failover may have paused or stopped it since the round began."""
    memory = supervision.of(name)
    import urllib3
    try:
        again = decide(connect.status(name), wanted, memory, now, supervision.schedule)
        if again.action != "restart":
            return again
        connect.restart_failed(name)
    except (ConnectError, urllib3.exceptions.HTTPError, OSError) as exc:
        log(supervision, f"could not restart {name} ({str(exc)[:300]}); trying again at the next check")
        return Decision("wait", "restart refused")
    log(supervision, f"restarted the failed parts of {name} (restart {memory.restarts + 1} in a row, at most "
                     f"{supervision.schedule.max_restarts}; the next one, if needed, "
                     f"{supervision.schedule.delay(memory.restarts + 1):.0f} s later): {again.why}")
    return again


class SupervisionCollector:
    """The supervision's state as Prometheus metrics, read at each scrape."""

    def __init__(self, supervision: Supervision):
        self.supervision = supervision

    def collect(self):
        for family in metric_families(self.supervision):
            kind = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
            metric = kind(family.name, family.help, labels=family.labels)
            for labels, value in family.samples:
                metric.add_metric(labels, value)
            yield metric


def registry(supervision: Supervision) -> CollectorRegistry:
    found = CollectorRegistry()  # the supervision's metrics only, not this process's
    found.register(SupervisionCollector(supervision))
    return found


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a slow scrape never holds the process's exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):  # scrapes are not news
        pass


def serve(supervision: Supervision, host: str, port: int) -> WSGIServer:
    """/metrics (prometheus_client's exposition, the format the scraper asks for)
    and /healthz (200 once a check has run)."""
    metrics = make_wsgi_app(registry(supervision))

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/metrics"):
            return metrics(environ, start_response)
        if path.startswith("/healthz"):
            status = "200 OK" if supervision.checks or supervision.check_errors else "503 Service Unavailable"
            body = f"checks {supervision.checks}, errors {supervision.check_errors}\n".encode()
        else:
            status, body = "404 Not Found", b"not found\n"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]

    server = make_server(host, port, app, server_class=_Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m mirrorstack.connect.supervisor <config.json>", file=sys.stderr)
        return 2
    supervision, config = load(argv[0])
    host, port = config["listen"].rsplit(":", 1)
    serve(supervision, host, int(port))
    held = sorted(n for n, s in supervision.wanted.items() if s != "running")
    log(supervision, f"watching {len(supervision.wanted)} connectors every {config['check_seconds']} s"
                     f"{f' (held by the topology: {held})' if held else ''}; schedule {supervision.schedule}")
    while True:
        check(supervision, config, time.monotonic())
        time.sleep(float(config["check_seconds"]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
