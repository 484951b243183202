"""Which local stacks' validations the suite runs on its one Spark Connect server
(tests/support/shared_spark.py), and that the rest keep what they asked for."""
from __future__ import annotations

import json

import pytest

from tests.support import shared_spark

URL = "sc://127.0.0.1:15999"


@pytest.fixture
def session(tmp_path, monkeypatch):
    """A session whose server already runs (its record written): nothing is started here."""
    folder = tmp_path / "shared-spark-connect"
    folder.mkdir()
    (folder / "server.json").write_text(json.dumps({"url": URL, "handle": {}, "cpu_group": None}))
    monkeypatch.setenv(shared_spark.SESSION_DIR_VARIABLE, str(tmp_path))
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/integration/test_day2_operations.py::test_x (setup)")
    return tmp_path


def placed(topology: dict) -> str | None:
    shared_spark.on_shared_spark(topology)
    return (topology.get("validation") or {}).get("master")


def test_a_local_one_shot_validation_goes_to_the_sessions_server(session):
    assert placed({"validation": {"wait_seconds": 30}}) == URL
    assert placed({"platform": "local", "validation": {"mode": "once"}}) == URL


@pytest.mark.parametrize("topology", [
    {"platform": "docker", "validation": {}},  # its job runs in a container: no way to the host's server
    {"validation": {"master": "local[1]"}},  # the stack's own choice
    {"validation": {"mode": "continuous"}},  # a validator that lives with the stack
    {"validation": {"mode": "both"}},
    {},
], ids=["docker", "own master", "continuous", "both", "no validation"])
def test_what_a_stack_chose_or_cannot_share_is_kept(session, topology):
    before = json.loads(json.dumps(topology))
    shared_spark.on_shared_spark(topology)
    assert topology == before


def test_the_modules_that_test_the_default_master_keep_it(session, monkeypatch):
    (module,) = shared_spark.KEEPS_ITS_OWN_SPARK
    monkeypatch.setenv("PYTEST_CURRENT_TEST", f"tests/integration/{module}::test_y (call)")
    assert placed({"validation": {}}) is None


def test_outside_a_session_that_shares_one_nothing_changes(monkeypatch):
    monkeypatch.delenv(shared_spark.SESSION_DIR_VARIABLE, raising=False)
    assert placed({"validation": {}}) is None
