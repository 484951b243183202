"""Run the real Pulumi CLI on a program, with local state in a temp dir."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from mirrorstack import toolchain


# As env.sh: no `.attrs` sidecar files. The file backend rewrites a checkpoint's
# sidecar in place (truncate, then write), so the program's own-stack reference,
# read while the engine saves, could find it empty ("failed to load checkpoint: EOF").
FILE_BACKEND_OPTIONS = "metadata=skip"


def engine_env(state_dir: Path, passphrase: str = "engine-test-passphrase") -> dict[str, str]:
    """What env.sh sets, with state and PULUMI_HOME in `state_dir`."""
    cli = toolchain.pulumi_binary()
    venv_bin = Path(sys.executable).parent
    (state_dir / "backend").mkdir(parents=True, exist_ok=True)
    (state_dir / "home").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "PATH": f"{Path(cli).parent}{os.pathsep}{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PULUMI_BACKEND_URL": f"file://{state_dir / 'backend'}?{FILE_BACKEND_OPTIONS}",
        "PULUMI_HOME": str(state_dir / "home"),
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_PYTHON_CMD": sys.executable,
        "NO_COLOR": "1",
    }


# Where time goes in a suite run: with MIRRORSTACK_PULUMI_TRACE=<dir>, each CLI run's lines are
# written there with the seconds since it started (one file per test process).
TRACE_DIR = os.environ.get("MIRRORSTACK_PULUMI_TRACE")


def _traced(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    import threading
    import time
    started, lines = time.monotonic(), []
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)
            lines.append(f"{time.monotonic() - started:7.1f} {line}")
    out, err = [], []
    readers = [threading.Thread(target=read, args=(s, into)) for s, into in ((process.stdout, out), (process.stderr, err))]
    for reader in readers:
        reader.start()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    finally:
        for reader in readers:
            reader.join()
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        with open(Path(TRACE_DIR) / f"pulumi-{os.getpid()}.log", "a") as trace:
            trace.write(f"=== {test} {' '.join(command[1:3])}: {time.monotonic() - started:.1f}s\n{''.join(lines)}")
    return subprocess.CompletedProcess(command, process.returncode, "".join(out), "".join(err))


class PulumiProject:
    """A copy of a Pulumi program in a temp dir (stack config files land there,
    not in the repo), driven through the CLI."""

    def __init__(self, source: Path, workdir: Path, env: dict[str, str]):
        self.dir = workdir / source.name
        shutil.copytree(source, self.dir, ignore=shutil.ignore_patterns("__pycache__", "Pulumi.*.yaml"))
        pulumi_yaml = self.dir / "Pulumi.yaml"
        pulumi_yaml.write_text(pulumi_yaml.read_text().replace("VENV_PLACEHOLDER", str(Path(sys.executable).parent.parent)))
        self.env = env

    @classmethod
    def of_repo(cls, repo: Path, stack: str, workdir: Path, env: dict[str, str]) -> PulumiProject:
        """The repo's own program with one of its stack files, in `workdir`
        (it imports mirrorstack from the venv: this checkout, installed editable)."""
        project = cls.__new__(cls)
        project.dir = workdir / "project"
        (project.dir / "stacks").mkdir(parents=True)
        shutil.copy(repo / "__main__.py", project.dir)
        (project.dir / "Pulumi.yaml").write_text((repo / "Pulumi.yaml").read_text().replace(
            "virtualenv: .venv", f"virtualenv: {Path(sys.executable).parent.parent}"))
        # The copy is a new stack with its own passphrase: drop the salt a local
        # `make demo` may have written into the repo's stack file.
        stack_file = (repo / "stacks" / f"Pulumi.{stack}.yaml").read_text()
        kept = [line for line in stack_file.splitlines(keepends=True)
                if not line.startswith(("encryptionsalt:", "secretsprovider:", "encryptedkey:"))]
        (project.dir / "stacks" / f"Pulumi.{stack}.yaml").write_text("".join(kept))
        project.env = env
        return project

    def outputs(self) -> dict:
        """The stack's outputs, secrets shown. Read again only when the state changed: each CLI call
        derives the passphrase's key (about 0.25 s of CPU), and tests poll through outputs."""
        import copy
        import json
        state = self._state_fingerprint()
        cached = getattr(self, "_outputs_cache", None)
        if state is None or cached is None or cached[0] != state:
            cached = (state, json.loads(self.run("stack", "output", "--json", "--show-secrets").stdout))
            self._outputs_cache = cached
        return copy.deepcopy(cached[1])

    def _state_fingerprint(self) -> tuple | None:
        """Path, size and change time of every state file (the file backend's stacks and history)
        and of the workspace files that say which stack is selected; None when the state is not
        in a local folder."""
        url = self.env.get("PULUMI_BACKEND_URL", "")
        if not url.startswith("file://") or "PULUMI_HOME" not in self.env:
            return None
        folders = (Path(url.removeprefix("file://").split("?", 1)[0]) / ".pulumi" / "stacks",
                   Path(self.env["PULUMI_HOME"]) / "workspaces")
        files = [f for folder in folders for f in folder.rglob("*") if f.is_file()]
        return tuple(sorted((str(f), stat.st_size, stat.st_mtime_ns) for f in files for stat in [f.stat()]))

    def run(self, *args: str, check: bool = True, timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """`env`: variables for this run only (on top of the project's)."""
        command = ["pulumi", *args, "--non-interactive", "--color=never"]
        if TRACE_DIR:
            done = _traced(command, self.dir, {**self.env, **(env or {})}, timeout)
        else:
            done = subprocess.run(command, cwd=self.dir, env={**self.env, **(env or {})}, capture_output=True,
                                  text=True, timeout=timeout)
        if check and done.returncode != 0:
            errors = json_errors(done.stdout) if "--json" in args else ""
            raise AssertionError(f"`pulumi {' '.join(args)}` exited {done.returncode}\n"
                                 f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}\n{errors}")
        return done


def json_errors(stdout: str) -> str:
    """The error and warning diagnostics of a `--json` run's event lines, at a failure's
    report's end: CI shows a failure's last lines, where the events end in a bare "update failed"."""
    import json
    said = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line).get("diagnosticEvent") or {}
        except (ValueError, AttributeError):
            continue
        if event.get("severity") in ("error", "warning"):
            said.append(f"{event.get('urn', '').rsplit('::', 1)[-1]}: {event.get('message', '').strip()}")
    return "--- errors and warnings\n" + "\n".join(said) + "\n" if said else ""


def refreshed(stdout: str) -> set[str]:
    """Names of the resources a `pulumi refresh` updated, leaving out the stack's
    reference to its own last outputs (mirrorstack.stack_history), which reads
    them anew whenever they changed."""
    import re
    return {name for kind, name in re.findall(r"~  (\S+) (\S+) updated", stdout)
            if kind != "pulumi:pulumi:StackReference"}
