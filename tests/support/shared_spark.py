"""One Spark Connect server for the whole test session, where the local stacks'
one-shot validations run (`validation.master: sc://…`, a master users deploy too).

Each local[2] run starts a Spark JVM of its own: about 12 CPU s for a validation of a
few hundred records, against about 5 on a warm server, and the suite runs a few dozen.
The modules that test the default master itself keep it (KEEPS_ITS_OWN_SPARK; the
validation job's module runs local[2] in-process and through its CLI). The first
stack that needs the server starts it, under a lock, for every worker of the run; the
controller stops it when the session ends (stop_shared_server) and says what it used.
Its CPU is counted in a cgroup of its own, not in the module that happened to start it.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from mirrorstack import toolchain
from mirrorstack.platforms.local import launcher
from tests.support import module_cpu
from tests.support.spark_cluster import ConnectServer

SESSION_DIR_VARIABLE = "MIRRORSTACK_TEST_SESSION_DIR"  # the controller's basetemp, set for its workers
KEEPS_ITS_OWN_SPARK = {"test_aggregation_stack.py"}  # the demo's stack: local[2], as users get it by default
SERVER_MEMORY = "1g"  # three workers' jobs at once, a few hundred records each
CPU_GROUP = "mirrorstack-tests-shared-spark"  # -<pid>, under module_cpu.ROOT


def _folder() -> Path | None:
    value = os.environ.get(SESSION_DIR_VARIABLE)
    return Path(value) / "shared-spark-connect" if value else None


def _module() -> str:
    """The test file running now (PYTEST_CURRENT_TEST: `tests/…/test_x.py::test (call)`)."""
    return Path(os.environ.get("PYTEST_CURRENT_TEST", "").split("::", 1)[0]).name


def _own_cpu_group(pid: int) -> str | None:
    """The server's CPU apart from the module that started it, at normal priority (the
    waiting lane's nice is its own): the cgroup it now runs in."""
    os.setpriority(os.PRIO_PROCESS, pid, 0)
    if not module_cpu.available():
        return None
    group = module_cpu.ROOT / f"{CPU_GROUP}-{pid}"
    group.mkdir()
    (group / "cgroup.procs").write_text(str(pid))  # every thread, and what it starts later
    return str(group)


def server_url() -> str | None:
    """The session's server (started now if no stack needed it yet), or None outside a
    session that shares one."""
    folder = _folder()
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "server.json"
    with open(folder / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.is_file():
            return json.loads(record.read_text())["url"]
        server = ConnectServer(folder, jars=toolchain.spark_kafka_jars(), memory=SERVER_MEMORY).start()
        group = _own_cpu_group(server.handle.pid)
        record.write_text(json.dumps({"url": server.url, "handle": server.handle.to_dict(), "cpu_group": group}))
        return server.url


def on_shared_spark(topology: dict) -> None:
    """A local stack's one-shot validation on the session's server, unless its module tests
    the default master or the stack chose a master (or a continuous validator) itself."""
    validation = topology.get("validation")
    if (validation is None or topology.get("platform", "local") != "local" or "master" in validation
            or validation.get("mode", "once") != "once" or _module() in KEEPS_ITS_OWN_SPARK):
        return
    url = server_url()
    if url is not None:
        topology["validation"] = {**validation, "master": url}


def stop_shared_server(session_dir: Path) -> str | None:
    """Stop the session's server if one started; what it ran on, said in a line."""
    record = session_dir / "shared-spark-connect" / "server.json"
    if not record.is_file():
        return None
    server = json.loads(record.read_text())
    launcher.stop(launcher.ProcessHandle(**server["handle"]))
    group = Path(server["cpu_group"]) if server["cpu_group"] else None
    used = f"{int((group / 'cpuacct.usage').read_text()) / 1e9:.0f} CPU s" if group else "CPU not measured"
    for _ in range(50):  # the group goes once the kernel has let its last task go
        try:
            group and group.rmdir()
            break
        except OSError:
            time.sleep(0.1)
    return f"the shared Spark Connect server ({server['url']}): {used}"
