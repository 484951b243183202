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
