"""The switch inside a pod: `python3 -m mirrorstack.failover.in_pod SPEC`.
components/failover/kube_job.py runs it as a Job in the stack's namespace,
where the clusters' in-cluster addresses resolve. It runs
mirrorstack.failover.procedure.run_switch on the spec file and says what
happened on stdout, one line each: progress as `mirrorstack: ...`, then the
report (or the refusal of a gate) after a marker the Job's runner looks for.
No pulumi and no pydantic here: the image has only python3, confluent_kafka
and urllib3 (tools/images.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPORT_MARK = "mirrorstack-switch-report: "
REFUSED_MARK = "mirrorstack-switch-refused: "
EXIT_REFUSED = 3  # the gate refused: nothing was changed


def main(argv: list[str] | None = None) -> int:
    from mirrorstack.failover.procedure import GateFailed, run_switch

    (spec_path,) = argv if argv is not None else sys.argv[1:]
    spec = json.loads(Path(spec_path).read_text())

    def progress(message: str) -> None:
        print(f"mirrorstack: failover: {message}", flush=True)

    try:
        report = run_switch(spec, progress=progress)
    except GateFailed as exc:
        print(REFUSED_MARK + json.dumps(str(exc)), flush=True)
        return EXIT_REFUSED
    print(REPORT_MARK + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
