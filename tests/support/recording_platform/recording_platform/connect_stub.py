"""Kafka Connect's REST API as far as mirrorstack's connector resource uses it,
answered from a JSON file: the connectors it was asked to run, each in the
state it was put in. It runs in the Pulumi program's process, on each worker's
REST address, for as long as the program does (the engine's provider process
calls it while the program waits for its resources)."""
from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

PLUGINS = [f"org.apache.kafka.connect.mirror.{kind}"
           for kind in ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")]
STATES = {"pause": "PAUSED", "resume": "RUNNING", "stop": "STOPPED"}


class Connectors:
    """name → {"config", "state"}, kept in `path` so the next program's stub knows them."""

    def __init__(self, path: Path):
        self.path, self.lock = path, threading.Lock()

    def read(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def change(self, edit) -> None:
        with self.lock:
            connectors = self.read()
            edit(connectors)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps(connectors, indent=2, sort_keys=True))
            os.replace(temporary, self.path)


def status(name: str, entry: dict, worker: str) -> dict:
    state = entry["state"]
    tasks = [] if state == "STOPPED" else [{"id": 0, "state": state, "worker_id": worker}]
    return {"name": name, "connector": {"state": state, "worker_id": worker}, "tasks": tasks, "type": "source"}


def _handler(connectors: Connectors, worker: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_):  # the engine's output stays the program's
            pass

        def _reply(self, code: int, body=None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length)) if length else {}

        def _answer(self, method: str) -> None:
            url = urlsplit(self.path)
            parts = [unquote(p) for p in url.path.strip("/").split("/") if p]
            query = parse_qs(url.query)
            known = connectors.read()
            if parts == [] and method == "GET":
                return self._reply(200, {"version": "recording", "commit": "", "kafka_cluster_id": "recording"})
            if parts == ["connector-plugins"] and method == "GET":
                return self._reply(200, [{"class": c, "type": "source", "version": "recording"} for c in PLUGINS])
            if len(parts) == 4 and parts[0] == "connector-plugins" and parts[2:] == ["config", "validate"]:
                self._body()
                return self._reply(200, {"name": parts[1], "error_count": 0, "groups": [], "configs": []})
            if parts == ["connectors"] and method == "GET":
                if "status" in query.get("expand", []):
                    return self._reply(200, {n: {"status": status(n, e, worker)} for n, e in known.items()})
                return self._reply(200, sorted(known))
            if parts == ["connectors"] and method == "POST":
                body = self._body()
                state = body.get("initial_state", "RUNNING")
                connectors.change(lambda c: c.__setitem__(body["name"], {"config": body["config"], "state": state}))
                return self._reply(201, {"name": body["name"], "config": body["config"], "tasks": []})
            if len(parts) < 2 or parts[0] != "connectors":
                return self._reply(404, {"error_code": 404, "message": f"no {method} {url.path} here"})
            name, rest = parts[1], parts[2:]
            if rest == ["config"] and method == "PUT":
                config = self._body()
                connectors.change(lambda c: c.__setitem__(
                    name, {"config": config, "state": c.get(name, {}).get("state", "RUNNING")}))
                return self._reply(201 if name not in known else 200, {"name": name, "config": config, "tasks": []})
            if name not in known:
                return self._reply(404, {"error_code": 404, "message": f"Connector {name} not found"})
            if method == "DELETE" and rest == []:
                connectors.change(lambda c: c.pop(name, None))
                return self._reply(204)
            if method == "GET" and rest == ["config"]:
                return self._reply(200, known[name]["config"])
            if method == "GET" and rest == ["status"]:
                return self._reply(200, status(name, known[name], worker))
            if method == "PUT" and len(rest) == 1 and rest[0] in STATES:
                connectors.change(lambda c: c[name].__setitem__("state", STATES[rest[0]]))
                return self._reply(202)
            if method == "POST" and rest == ["restart"]:
                return self._reply(204)
            if rest == ["offsets"]:
                return self._reply(200, {"offsets": []} if method == "GET" else {"message": "recorded"})
            return self._reply(404, {"error_code": 404, "message": f"no {method} {url.path} here"})

        def do_GET(self):  # noqa: N802 (http.server's names)
            self._answer("GET")

        def do_PUT(self):  # noqa: N802
            self._answer("PUT")

        def do_POST(self):  # noqa: N802
            self._answer("POST")

        def do_DELETE(self):  # noqa: N802
            self._answer("DELETE")

        def do_PATCH(self):  # noqa: N802
            self._answer("PATCH")

    return Handler


def serve(connectors: Connectors, host: str, port: int) -> ThreadingHTTPServer:
    """Answer on host:port from a daemon thread (it ends with the program)."""
    server = ThreadingHTTPServer((host, port), _handler(connectors, f"{host}:{port}"))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"connect-stub-{port}", daemon=True).start()
    return server

