"""A new stack's `pulumi preview`: wall time through the real engine, against
the engine's own cost measured in the same run (the preview of
tests/engine_program, one dynamic resource: the CLI, the Python host, the
plugins). Each round previews a fresh stack (never deployed: every cluster is
created by the update) in its own temp state.

  .venv/bin/python -m benchmarks.preview [--stack fan-out] [--rounds 3] [--program DIR] [--out report.json]

`--program`: another checkout's program (its __main__.py, components/, spark/
and stacks/), e.g. an older commit's `git archive`, to compare before and after.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.replication import machine
from tests.support.pulumi_cli import PulumiProject, engine_env
from tests.support.stacks import REPO, port_base

BASELINE_PROGRAM = REPO / "tests" / "engine_program"


def timed_preview(project: PulumiProject) -> tuple[float, str]:
    started = time.monotonic()
    done = project.run("preview", timeout=600)
    return time.monotonic() - started, done.stdout + done.stderr


def new_stack_preview(program: Path, stack: str) -> tuple[float, str]:
    """(seconds, output) of `pulumi preview` of a fresh stack of `program`."""
    with tempfile.TemporaryDirectory(prefix="preview-bench-") as tmp:
        tmp = Path(tmp)
        project = PulumiProject.of_repo(program, stack, tmp, engine_env(tmp / "pulumi"))
        project.run("stack", "init", stack)
        project.run("config", "set", "mirrorstack:localDir", str(tmp / "local"))
        project.run("config", "set", "mirrorstack:portBase", str(port_base()))
        return timed_preview(project)


def baseline_preview() -> float:
    with tempfile.TemporaryDirectory(prefix="preview-bench-") as tmp:
        tmp = Path(tmp)
        project = PulumiProject(BASELINE_PROGRAM, tmp, engine_env(tmp / "pulumi"))
        project.run("stack", "init", "bench")
        project.run("config", "set", "path", str(tmp / "file.txt"))
        project.run("config", "set", "content", "hello")
        project.run("config", "set", "--secret", "token", "t0ken")
        return timed_preview(project)[0]


def summary(seconds: list[float]) -> dict:
    return {"seconds": [round(s, 2) for s in seconds], "median": round(statistics.median(seconds), 2),
            "min": round(min(seconds), 2), "max": round(max(seconds), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", default="fan-out")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--program", type=Path, default=REPO)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    baseline, runs, waited = [], [], 0
    for _ in range(args.rounds):  # interleaved: a busy moment of the host hits both alike
        baseline.append(baseline_preview())
        seconds, output = new_stack_preview(args.program.resolve(), args.stack)
        runs.append(seconds)
        waited += "not reachable from here" in output or "could not check its connectors" in output
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(), "stack": args.stack, "program": "this checkout" if args.program == REPO else str(args.program), "rounds": args.rounds,
              "new_stack_preview": summary(runs), "engine_baseline_preview": summary(baseline),
              "ratio_to_baseline": round(statistics.median(runs) / statistics.median(baseline), 2),
              "previews_that_asked_what_does_not_exist_yet": waited}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
