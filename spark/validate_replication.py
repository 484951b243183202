#!/usr/bin/env python3
"""Validate MirrorMaker 2 replication end to end with PySpark (the entry point).

    python spark/validate_replication.py --config flows.json --out report.json
    spark-submit --jars <spark-sql-kafka jars> --py-files <the validation_*.py modules> \
        spark/validate_replication.py --config flows.json

The job lives in modules beside this script, each readable on its own:
    validation_config.py       the input (flows JSON) and its checks
    validation_checkpoints.py  MM2 Checkpoint records, in Python and Spark SQL
    validation_offsets.py      offsets and topic sizes on the driver
    validation_spark.py        the Spark session, Kafka reads, record hashing
    validation_purged.py       records purged at the source before MM2 copied them
    validation_progress.py     what the targets took during the wait (in flight or stuck)
    validation_reconcile.py    snapshot, wait, the source/target join, failover
    validation_report.py       pass/fail against the tolerances, the summary
    validation_cli.py          flags, exit codes; its docstring documents the input,
                               the method and the report (also in `--help`)
They are found beside this file (its directory is put on sys.path) or, under
spark-submit in a container or cluster, through `--py-files`.
"""
import sys
from pathlib import Path

# Beside this file (also through a symlink, e.g. components/jobs/ in the wheel).
for _here in {str(Path(__file__).parent), str(Path(__file__).resolve().parent)}:
    if _here not in sys.path:
        sys.path.insert(0, _here)

# Re-exported: tests, tools and older callers use them as `validate_replication.<name>`.
from validation_checkpoints import *  # noqa: E402,F401,F403
from validation_cli import *  # noqa: E402,F401,F403
from validation_cli import main  # noqa: E402
from validation_config import *  # noqa: E402,F401,F403
from validation_offsets import *  # noqa: E402,F401,F403
from validation_purged import *  # noqa: E402,F401,F403
from validation_reconcile import *  # noqa: E402,F401,F403
from validation_report import *  # noqa: E402,F401,F403
from validation_spark import *  # noqa: E402,F401,F403

# The job's modules, in the order spark-submit's `--py-files` lists them.
MODULES = ("validation_config.py", "validation_spark.py", "validation_checkpoints.py", "validation_offsets.py",
           "validation_purged.py", "validation_progress.py", "validation_report.py", "validation_reconcile.py",
           "validation_cli.py")

if __name__ == "__main__":
    sys.exit(main())
