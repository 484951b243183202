"""`pulumi destroy` of a flow's connectors (mirrorstack.mirror.teardown): it
deletes them through Connect, goes on when Connect cannot act (saying which
connectors stay where), and fails when Connect answers and refuses."""
from __future__ import annotations

import http.server
import threading

import pytest

from mirrorstack.connect.api import ConnectError
from mirrorstack.mirror.provider import MirrorMaker2Provider
from tests.support.ports import free_ports

CONNECTORS = {"src->tgt.MirrorSourceConnector": {}, "src->tgt.MirrorCheckpointConnector": {}}


def _props(url: str) -> dict:
    return {"flow": "src->tgt", "connect_url": url, "connectors": CONNECTORS}


@pytest.fixture
def connect():
    """A stand-in for Connect's REST API: answers GET /, and each DELETE with `delete_status`."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            self._answer(200, b"{}")

        def do_DELETE(self):  # noqa: N802
            seen.append(self.path)
            self._answer(server.delete_status, b'{"error_code": 0, "message": "m"}')

        def _answer(self, status, body):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.delete_status, server.seen = 204, seen
    server.url = "http://127.0.0.1:%d" % server.server_address[1]
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server
    server.shutdown()


def test_destroy_deletes_each_connector(connect):
    MirrorMaker2Provider().delete("id", _props(connect.url))
    assert connect.seen == ["/connectors/src-%3Etgt.MirrorSourceConnector",
                            "/connectors/src-%3Etgt.MirrorCheckpointConnector"]


def test_destroy_goes_on_when_no_worker_answers_and_says_what_stays(capsys):
    url = "http://127.0.0.1:%d" % free_ports(1)[0]  # nothing listens there
    MirrorMaker2Provider().delete("id", _props(url))
    said = capsys.readouterr().err
    assert f"src->tgt: Kafka Connect at {url} does not answer; destroy goes on and leaves " \
           "src->tgt.MirrorSourceConnector, src->tgt.MirrorCheckpointConnector to it" in said
    assert "DELETE /connectors/<name>" in said


def test_destroy_goes_on_when_connect_answers_but_cannot_act(connect, capsys, monkeypatch):
    """A worker whose own Kafka cluster is down answers, and fails each write with a 5xx."""
    monkeypatch.setenv("MIRRORSTACK_CONNECT_REQUEST_SECONDS", "1")  # its retries, cut short
    connect.delete_status = 500
    MirrorMaker2Provider().delete("id", _props(connect.url))
    assert "could not delete them (ConnectError" in capsys.readouterr().err


@pytest.mark.parametrize("status", [401, 403])
def test_destroy_fails_when_connect_refuses(connect, status):
    connect.delete_status = status
    with pytest.raises(ConnectError):
        MirrorMaker2Provider().delete("id", _props(connect.url))
