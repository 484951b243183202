"""The Connect REST budget: Kafka's 90 s by default, the operator's through
MIRRORSTACK_CONNECT_REQUEST_SECONDS; a worker that accepts and never answers
fails a request within it, naming the URL."""
import socket
import time

import pytest

from mirrorstack.connect.api import REQUEST_BUDGET, REQUEST_BUDGET_ENV, ConnectClient, ConnectError, request_budget


def test_the_budget_is_the_default_or_the_operators(monkeypatch):
    monkeypatch.delenv(REQUEST_BUDGET_ENV, raising=False)
    assert request_budget() == REQUEST_BUDGET == 90
    monkeypatch.setenv(REQUEST_BUDGET_ENV, "240")
    assert request_budget() == 240


@pytest.mark.parametrize("value", ["0", "-5", "soon", "inf", "nan"])
def test_a_budget_that_is_not_a_positive_number_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(REQUEST_BUDGET_ENV, value)
    with pytest.raises(ValueError, match=f"{REQUEST_BUDGET_ENV}=.*a number > 0"):
        request_budget()


def test_a_hung_worker_fails_a_request_within_the_budget(monkeypatch):
    monkeypatch.setenv(REQUEST_BUDGET_ENV, "2")
    with socket.socket() as hung:  # listens, accepts into its backlog, never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(ConnectError, match=url):
            ConnectClient(url).names()
        # one attempt's read timeout is cut to the budget (it is 30 s otherwise)
        assert time.monotonic() - started < 10


def test_the_watch_after_a_restart_is_the_default_or_the_operators(monkeypatch):
    """A task `up` restarted must then run RESTART_STABILITY seconds (30), or what
    MIRRORSTACK_RESTART_WATCH_SECONDS says for that run; anything else is refused by name."""
    import json

    from mirrorstack.connect.api import RESTART_STABILITY, RESTART_WATCH_ENV, restart_watch, wait_state
    from tests.support.http_stand_in import serve
    monkeypatch.delenv(RESTART_WATCH_ENV, raising=False)
    assert restart_watch() == RESTART_STABILITY == 30
    running = {"name": "c", "connector": {"state": "RUNNING", "worker_id": "w"},
               "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w"}], "type": "source"}
    server, _ = serve(lambda path: (200, json.dumps(["c"] if path.startswith("/connectors?") or path == "/connectors"
                                                    else running)))
    client = ConnectClient(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        with pytest.raises(ConnectError, match="not RUNNING after 2s"):  # 30 s to watch, 2 s to wait
            wait_state(client, ["c"], "running", timeout=2, watched={"c"})
        monkeypatch.setenv(RESTART_WATCH_ENV, "1")
        assert restart_watch() == 1
        assert wait_state(client, ["c"], "running", timeout=20, watched={"c"})["c"]["state"] == "RUNNING"
    finally:
        server.shutdown()
    monkeypatch.setenv(RESTART_WATCH_ENV, "soon")
    with pytest.raises(ValueError, match=f"{RESTART_WATCH_ENV}='soon': give the seconds a task .* a number > 0"):
        restart_watch()
