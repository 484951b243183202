"""The real Pulumi engine (CLI + Python language host built by `make engine`)
runs a program with one dynamic resource through its whole life."""
import json
import socket
import threading
import uuid
from pathlib import Path

import pytest

from mirrorstack import versions
from mirrorstack.toolchain import pulumi_binary
from tests.support.pulumi_cli import PulumiProject, engine_env

pytestmark = pytest.mark.integration

PROGRAM = Path(__file__).parent.parent / "engine_program"


class ConnectionCounter:
    """A TCP listener standing in as HTTP(S) proxy: any attempt of the engine to
    reach the network (update check, plugin download) connects here."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.connections = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self._stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def project(tmp_path):
    counter = ConnectionCounter()
    env = engine_env(tmp_path / "pulumi")
    env.update({"HTTPS_PROXY": counter.url, "HTTP_PROXY": counter.url, "NO_PROXY": ""})
    project = PulumiProject(PROGRAM, tmp_path, env)
    project.run("stack", "init", "test")
    yield project
    counter.close()
    assert counter.connections == 0, "the engine tried to reach the network"


def _state(project) -> dict:
    return json.loads(project.run("stack", "export").stdout)


def _resource_types(project) -> list[str]:
    return [r["type"] for r in _state(project)["deployment"].get("resources") or []]


def test_cli_version_equals_the_pip_sdk():
    import subprocess
    out = subprocess.run([pulumi_binary(), "version"], capture_output=True, text=True).stdout.strip()
    assert out == f"v{versions.pulumi_version()}"


def test_dynamic_resource_lifecycle_through_the_real_engine(project, tmp_path):
    target = tmp_path / "greeting.txt"
    secret = f"s3cret-{uuid.uuid4().hex}"
    project.run("config", "set", "path", str(target))
    project.run("config", "set", "content", "hello")
    project.run("config", "set", "--secret", "token", secret)

    # up creates the file
    up = project.run("up", "--yes", "--skip-preview")
    assert target.read_text() == "hello"
    assert "+ 2 created" in up.stdout or "2 created" in up.stdout, up.stdout
    assert "pulumi-python:dynamic:Resource" in _resource_types(project)

    # a second up changes nothing (the engine itself checks)
    project.run("up", "--yes", "--expect-no-changes")
    project.run("preview", "--expect-no-changes")

    # an input change previews as an update showing the changed key
    project.run("config", "set", "content", "world")
    preview = project.run("preview", "--diff")
    assert "~ pulumi-python:dynamic:Resource: (update)" in preview.stdout, preview.stdout
    assert '~ content: "hello" => "world"' in preview.stdout, preview.stdout
    assert "1 to update" in preview.stdout
    assert target.read_text() == "hello"  # a preview changes nothing
    project.run("up", "--yes", "--skip-preview")
    assert target.read_text() == "world"

    # refresh sees the file removed out of band; the next up heals it
    target.unlink()
    refresh = project.run("refresh", "--yes", "--skip-preview")
    assert "1 deleted" in refresh.stdout, refresh.stdout
    assert "pulumi-python:dynamic:Resource" not in _resource_types(project)
    project.run("up", "--yes", "--skip-preview")
    assert target.read_text() == "world"

    # the secret never reaches the state (or its backups) in plaintext
    backend = Path(project.env["PULUMI_BACKEND_URL"].removeprefix("file://").partition("?")[0])
    state_files = [p for p in backend.rglob("*") if p.is_file()]
    assert state_files
    assert not [p for p in state_files if secret in p.read_text(errors="ignore")]
    resource = next(r for r in _state(project)["deployment"]["resources"]
                    if r["type"] == "pulumi-python:dynamic:Resource")
    assert "ciphertext" in json.dumps(resource["inputs"]["token"])
    assert "ciphertext" in json.dumps(resource["outputs"]["token"])

    # destroy removes the file and empties the stack
    destroy = project.run("destroy", "--yes", "--skip-preview")
    assert "deleted" in destroy.stdout
    assert not target.exists()
    assert _resource_types(project) == []
    project.run("stack", "rm", "--yes")


def test_outputs_are_read_from_the_cli_again_exactly_when_the_state_or_the_selected_stack_changed(project, tmp_path):
    """PulumiProject.outputs, which the suite's tests poll: each CLI read derives the passphrase's
    key, so an unchanged state is answered from the last read; a changed one never is."""
    calls, run = [], project.run
    project.run = lambda *args, **kwargs: (calls.append(args[:2]), run(*args, **kwargs))[1]
    reads = lambda: calls.count(("stack", "output"))  # noqa: E731
    first, second, other = (tmp_path / f"{name}.txt" for name in ("first", "second", "other"))

    def deploy(path) -> None:
        project.run("config", "set-all", "--plaintext", f"path={path}", "--plaintext", "content=x",
                    "--secret", "token=t")
        project.run("up", "--yes", "--skip-preview")

    deploy(first)
    assert (project.outputs()["path"], reads()) == (str(first), 1)
    project.outputs()["path"] = "changed by a caller"  # a copy: the next reader gets the stack's own
    assert (project.outputs()["path"], reads()) == (str(first), 1)
    deploy(second)
    assert (project.outputs()["path"], reads()) == (str(second), 2)
    project.run("stack", "init", "other")  # selects it
    deploy(other)
    assert (project.outputs()["path"], reads()) == (str(other), 3)
    project.run("stack", "select", "test")  # only the workspace changes
    assert (project.outputs()["path"], reads()) == (str(second), 4)
