"""The validation job as spark-submit takes it: the job's packages as one zip
(`--py-files`, on the driver's and the executors' sys.path) and the tiny main
file (spark/validate_replication.py) beside it. Every platform ships these two.
The zip holds every package the main file's imports reach, whole: the job
(mirrorstack.spark) and the MM2 vocabulary it reads (mirrorstack.mm2).

The zip is deterministic: entries sorted, fixed timestamps and modes, stored
uncompressed (no zlib version in the bytes), so the same tree gives the same
bytes and a preview shows no phantom change; its hash decides when the job
re-runs.
"""
from __future__ import annotations

import functools
import importlib.util
import io
import zipfile
from pathlib import Path

from mirrorstack import spark
from mirrorstack.platforms.descriptions import SparkJob
from mirrorstack.shipping import project_imports
from mirrorstack.validation.executor_pods import DRIVER_RULES, EXECUTOR_SCRIPT
from mirrorstack.validation.job_config import handed_out_argv, spark_submit_argv
from mirrorstack.validation.outcome import JOB_OUTPUT

PACKAGE_DIR = Path(spark.__file__).parent
ENTRY_SCRIPT = PACKAGE_DIR / "validate_replication.py"
ZIP_NAME = "mirrorstack-validation.zip"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say


# The job imports itself as mirrorstack.spark, in Spark as in the wheel; in the
# zip the parent package is an empty one: the control plane is not shipped.
PARENT_INIT = ("mirrorstack/__init__.py",
               b'"""Only the validation job (mirrorstack.spark) and the MM2 vocabulary (mirrorstack.mm2) ship '
               b'to Spark."""\n')


def deterministic_zip(entries) -> bytes:
    """(name, bytes) entries in a zip, byte for byte the same for the same entries."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, content in sorted(entries):
            entry = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            entry.external_attr = 0o644 << 16
            entry.create_system = 3  # unix, whatever builds it
            archive.writestr(entry, content)
    return buffer.getvalue()


def job_packages() -> list[str]:
    """The packages the main file's imports reach (mirrorstack.spark, mirrorstack.mm2)."""
    return sorted({module.rpartition(".")[0] for module in project_imports(ENTRY_SCRIPT)})


def job_modules() -> list[tuple[str, bytes]]:
    """Every module of the job's packages as zip entries (`mirrorstack/spark/cli.py`, ...)."""
    entries = []
    for package in job_packages():
        folder = Path(importlib.util.find_spec(package).origin).parent
        entries += [(f"{package.replace('.', '/')}/{module.name}", module.read_bytes())
                    for module in sorted(folder.glob("*.py"))]
    return entries


def job_zip() -> bytes:
    """The job's packages in a zip, byte for byte the same for the same files."""
    return deterministic_zip([PARENT_INIT, *job_modules()])


@functools.cache
def job_package() -> SparkJob:
    """The validation job as a platform runs it: its main file, its package, its
    spark-submit line in an image and how its output reads."""
    return SparkJob(entry=ENTRY_SCRIPT, zip_bytes=job_zip(), zip_name=ZIP_NAME, make_zip=job_zip,
                    submit_argv=spark_submit_argv, output=JOB_OUTPUT,
                    executor_script=EXECUTOR_SCRIPT, driver_rules=DRIVER_RULES, hand_out_argv=handed_out_argv)
