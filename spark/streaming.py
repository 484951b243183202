"""The continuous validation: Spark Structured Streaming reads every flow's source topics and their
copies as they grow, and a ledger per (target topic, partition) in Spark's state store
(stream_match.Ledger) matches records by identity within a window. Each micro-batch's figures go
to the metrics this process serves to Prometheus (stream_metrics.py).

    python -m mirrorstack.spark.streaming --config flows.json --checkpoint-dir DIR --metrics-port 9406

The same flows JSON as the one-shot job (cli.py); as a stack's service (a platform's
PythonModuleService), one argument instead: its service config (service_args). What it reads is
stream_plan.Plan's. Restarted with the same --checkpoint-dir, it goes on from where it was: Kafka
offsets and ledgers are in the checkpoint, so nothing is counted twice or skipped. A first start
reads both sides from one timestamp (--lookback-seconds before now), so every copy read has its
source record read too."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from .config import EXIT_BAD_INPUT, EXIT_ERROR, BadInput, add_config_arguments, hide_secrets, load_config
from .spark_io import add_session_arguments, build_spark, stop_spark
from .stream_plan import TARGET, Plan

FIGURES = ("c int, topic string, partition int, confirmed long, missing long, duplicates long, extras long, "
           "rpo_records long, rpo_seconds double, rpo_by_source array<array<double>>, buckets array<long>, "
           "latency_sum double, latency_max double, missing_samples array<array<long>>")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mirrorstack.spark.streaming", description=__doc__.split("\n\n")[0])
    add_config_arguments(parser)
    parser.add_argument("--checkpoint-dir", required=True, metavar="DIR",
                        help="where Spark keeps the offsets read and the ledgers (a restart goes on from it)")
    parser.add_argument("--window-seconds", type=float, default=60.0, metavar="S",
                        help="a source record not on the target this long after it was read is missing (default 60)")
    parser.add_argument("--trigger-seconds", type=float, default=2.0, metavar="S",
                        help="a micro-batch every S seconds (default 2): latencies are read to within half a batch")
    parser.add_argument("--lookback-seconds", type=float, default=None, metavar="S",
                        help="a first start reads records from S seconds ago on both sides (default: the window)")
    parser.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST", help="address of /metrics")
    parser.add_argument("--metrics-port", type=int, default=9406, metavar="PORT", help="port of /metrics (0: none)")
    parser.add_argument("--run-seconds", type=float, default=None, metavar="S",
                        help="stop after S seconds (default: run until stopped)")
    add_session_arguments(parser)
    args = parser.parse_args(argv)
    args.wait_seconds = None
    return args


def service_args(path: str) -> argparse.Namespace:
    """The arguments of a stack's validator from its service config: `job` (the flows JSON), `listen`
    (host:port of /metrics), `window_seconds`, `trigger_seconds`, `driver_memory`, `master` (default
    local[2]) with `executor_memory`, `executor_cores`, `max_cores` and `executor_wait_seconds`,
    `checkpoint_location`, and the platform's `spark_jars` (a list), `state_dir` and `spark_conf`
    (settings of the session; `$(NAME)` in a value is the environment's NAME, as a pod's own IP). Its
    checkpoint is in `checkpoint_location`, else `state_dir` (else beside the config), one per `job`:
    Spark refuses a checkpoint whose sources changed, so a changed set of flows starts a new one (and
    the old ones go: claim_checkpoint)."""
    config = json.loads(Path(path).read_text())
    folder = Path(config.get("state_dir") or Path(path).resolve().parent)
    job = json.dumps(config["job"], sort_keys=True)
    name = f"checkpoint-{hashlib.sha256(job.encode()).hexdigest()[:12]}"
    location = config.get("checkpoint_location")
    checkpoint = f"{location.rstrip('/')}/{name}" if location else str(folder / name)
    host, port = config["listen"].rsplit(":", 1)
    argv = ["--checkpoint-dir", checkpoint, "--metrics-host", host, "--metrics-port", port,
            "--window-seconds", str(config["window_seconds"]), "--trigger-seconds", str(config["trigger_seconds"]),
            "--driver-memory", config.get("driver_memory", "1g")]
    if config.get("spark_jars"):
        argv += ["--jars", ",".join(config["spark_jars"])]
    if config.get("master"):
        argv += ["--master", config["master"]]
    for key in ("executor_memory", "executor_cores", "max_cores", "executor_wait_seconds"):
        if config.get(key):
            argv += [f"--{key.replace('_', '-')}", str(config[key])]
    for key, value in (config.get("spark_conf") or {}).items():
        argv += ["--conf", f"{key}={from_environment(str(value))}"]
    args = parse_args(argv)
    args.config_json = job  # not on the command line: `ps` shows that
    args.state_folder = folder
    return args


def claim_checkpoint(args: argparse.Namespace):
    """The lock of this process's checkpoint, held for its life (keep the returned file): one query per
    checkpoint. A service's state folder has one lock for all its checkpoints, and once it is held the
    checkpoints of other sets of flows go (the validator before may have been using one)."""
    folder = getattr(args, "state_folder", None)
    if folder is None:
        return hold_lock(Path(f"{Path(args.checkpoint_dir).resolve()}.lock"))
    lock = hold_lock(folder / "validator.lock")
    here = Path(args.checkpoint_dir).parent  # another location (a URI, a cluster's) is the cluster's to clean
    for old in here.glob("checkpoint-*") if "://" not in args.checkpoint_dir else ():
        if str(old) != args.checkpoint_dir:
            shutil.rmtree(old, ignore_errors=True)
    return lock


LOCK_LOG_SECONDS = 10


def hold_lock(path: Path, say=None):
    """An exclusive lock on `path`, held for the life of this process (the open file is returned: keep
    it). Two queries writing one checkpoint fail each other; a validator started while the one before
    still stops (a pod made again before the old one is gone, which a Deployment does when its pod is
    deleted) waits for it, saying so every LOCK_LOG_SECONDS."""
    import fcntl
    say = say or log
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a")
    started = time.monotonic()
    said = -LOCK_LOG_SECONDS
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            waited = time.monotonic() - started
            if waited - said >= LOCK_LOG_SECONDS:
                say(f"waiting for the validator before this one to stop ({path} is locked, {waited:.0f}s so far)")
                said = waited
            time.sleep(0.2)


def from_environment(value: str) -> str:
    """`$(NAME)` in `value` replaced by the environment's NAME (Kubernetes' own syntax for it)."""
    return re.sub(r"\$\((\w+)\)", lambda m: os.environ[m[1]], value)


def package_zip(folder: Path) -> Path:
    """This package's Python files (mirrorstack, as this process imports it: in a container, what was
    shipped beside it) zipped into `folder`, for a cluster's executors to import the ledger from
    (spark.submit.pyFiles, or a Spark Connect session's artifacts).

    The same files give the same bytes and name (no file times: a pod's mounted files get new ones each
    start), and other files another name: an executor refuses a file of the same name but other bytes
    in its working folder, which on kubernetes is the state volume a restarted driver's executors share
    with the ones before (a restart, or an upgrade, stopped every executor it started)."""
    import hashlib
    import io
    import zipfile
    top = sys.modules[__package__.rsplit(".", 1)[0]]  # imported already, as this package's parent
    roots = {Path(top.__file__).parent: "mirrorstack", Path(__file__).resolve().parent: "mirrorstack/spark"}
    files = {f"{name}/{file.relative_to(root)}": file for root, name in roots.items() for file in root.rglob("*.py")}
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, files[name].read_bytes(), zipfile.ZIP_DEFLATED)
    data = packed.getvalue()
    made = folder / f"mirrorstack-package-{hashlib.sha256(data).hexdigest()[:12]}.zip"
    made.write_bytes(data)
    return made


def ledger_step(plan: Plan, window: float, trigger: float):
    """applyInPandasWithState's function: one (c, topic, partition)'s rows of a batch into its ledger;
    rows of a topic no flow copies into (MM2's own, excluded ones) are dropped, and so is its state."""
    def step(key, frames, state):
        import pandas as pd

        from .stream_match import Ledger
        c, topic, partition = int(key[0]), str(key[1]), int(key[2])
        flows = plan.claims(c, topic)
        if not flows:
            for _ in frames:  # read to its end, as Spark's Arrow stream expects
                pass
            if state.exists:
                state.remove()
            return
        now = time.time()
        # When the batch was planned, which its offsets were fetched at: the same when a batch runs again
        # after a crash. A copy it reads landed between the batch before (the ledger's `seen_at`) and then.
        planned = state.getCurrentProcessingTimeMs() / 1000
        ledger = Ledger.from_json(state.get[0]) if state.exists else Ledger.fresh(planned, trigger)
        if not state.hasTimedOut:
            for frame in frames:
                if frame.empty:
                    continue
                ordered = frame.sort_values("offset")
                source = ordered[ordered["src"].isin(flows)]
                target = ordered[ordered["src"] == TARGET]
                ledger.take(list(source[["src", "offset", "ts", "h1", "h2"]].itertuples(index=False, name=None)),
                            list(target[["src", "offset", "ts", "h1", "h2"]].itertuples(index=False, name=None)),
                            planned)
        ledger.seen(planned)
        ledger.expire(now, window)
        figures = ledger.report(now)
        state.update((ledger.to_json(),))
        state.setTimeoutDuration(1)  # called again at the next batch, without data: expiry, and `seen_at`
        yield pd.DataFrame([{"c": c, "topic": topic, "partition": partition, **figures}])
    return step


def start(spark, plan: Plan, args: argparse.Namespace, on_figures, remote: bool = False):
    """The running query; `on_figures(rows)` gets each batch's figures (one row per ledger touched)."""
    from pyspark.sql.streaming.state import GroupStateTimeout
    lookback = args.window_seconds if args.lookback_seconds is None else args.lookback_seconds
    start_ms = int((time.time() - lookback) * 1000)
    step = ledger_step(plan, args.window_seconds, args.trigger_seconds)
    figures = plan.rows(spark, start_ms).groupBy("c", "topic", "partition").applyInPandasWithState(
        step, outputStructType=FIGURES, stateStructType="ledger string", outputMode="update",
        timeoutConf=GroupStateTimeout.ProcessingTimeTimeout)
    writer = (figures.writeStream.outputMode("update")
              .option("checkpointLocation", args.checkpoint_dir)
              .trigger(processingTime=f"{args.trigger_seconds} seconds"))
    if remote:
        return writer.foreachBatch(keep_in_view(figures_view(args.checkpoint_dir))).start()
    return writer.foreachBatch(lambda batch, _id: on_figures([r.asDict() for r in batch.collect()])).start()


# A Spark Connect server starts foreachBatch's Python worker as the query starts and waits a fixed 10 s
# (not configurable in Spark 4.2) for it to connect back; on a loaded machine it may not: 3 attempts in a
# row failed so in a fresh-clone suite run at load 20-30 on 2 cores. Nothing started yet.
WORKER_LATE = "waiting for the Python worker to connect back"


def start_again_if_worker_late(starting, attempts: int = 8, pause: float = 5.0):
    for attempt in range(attempts):
        try:
            return starting()
        except Exception as error:  # noqa: BLE001 - only the late worker is tried again
            if WORKER_LATE not in str(error) or attempt == attempts - 1:
                raise
            log(f"the server's Python worker did not connect back in time; starting again in {pause:g}s "
                f"({attempt + 2} of {attempts})")
            time.sleep(pause)


def figures_view(checkpoint_dir: str) -> str:
    """The Spark Connect server's global temporary view of one validator's latest figures."""
    return f"mirrorstack_figures_{hashlib.sha256(checkpoint_dir.encode()).hexdigest()[:12]}"


def keep_in_view(name: str):
    """foreachBatch on a Spark Connect server, which runs it there, not in this process: each ledger's
    latest figures (every ledger reports at every batch) in the server's global temporary view `name`,
    with the batch's id, for this process to read (follow_view)."""
    latest = {}

    def keep(batch, batch_id: int) -> None:
        for row in batch.collect():
            latest[(row["c"], row["topic"], row["partition"])] = tuple(row)
        if latest:
            rows = [(*row, batch_id) for row in latest.values()]
            batch.sparkSession.createDataFrame(rows, f"{FIGURES}, batch long").createOrReplaceGlobalTempView(name)
    return keep


def follow_view(spark, name: str, on_figures, stopping: threading.Event, every: float) -> None:
    """A Spark Connect validator's figures: the server's view (keep_in_view) read every `every` seconds,
    taken when a later batch wrote it."""
    last = -1
    while not stopping.wait(every):
        try:
            rows = [r.asDict() for r in spark.table(f"global_temp.{name}").collect()]
        except Exception:  # no batch wrote it yet, or the session ends
            continue
        batch = max([r.pop("batch") for r in rows], default=-1)  # the rows as the exporter takes them
        if batch > last:
            last = batch
            on_figures(rows)


PROGRESS_SECONDS = 60  # a line on how the batches go, this often

# glibc's malloc gives a JVM's threads up to 8 arenas a core; run for hours, the driver JVM's resident
# set grew 3 MiB/min at 1,000 records/s outside all the JVM accounts for, and with 2 arenas it stayed
# flat (docs/measurements.md, continuous validation runs 5 and 6).
MALLOC_ARENAS = "2"


def few_malloc_arenas(args: argparse.Namespace, environ=os.environ) -> None:
    """MALLOC_ARENA_MAX for the JVMs this validator starts, unless set already: the driver's (launched
    from this process's environment) and its executors' (spark.executorEnv; a --conf of it wins)."""
    environ.setdefault("MALLOC_ARENA_MAX", MALLOC_ARENAS)
    args.conf = [f"spark.executorEnv.MALLOC_ARENA_MAX={environ['MALLOC_ARENA_MAX']}", *(args.conf or [])]


def warm_up(spark) -> None:
    """Start the Python workers the ledgers run in (with pandas and Arrow loaded) before the query: else
    the first batch with records takes seconds more, and the copies landing meanwhile are timed late."""
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    (spark.range(partitions).repartition(partitions).groupBy("id").applyInPandas(lambda frame: frame, "id long")
     .collect())


def report_progress(query, stopping: threading.Event, every: float = PROGRESS_SECONDS) -> None:
    """Every `every` seconds: the batches since the last line, the records they read and how long they
    took (Spark's own progress), so a validator falling behind its trigger says so."""
    last = -1
    while not stopping.wait(every):
        try:
            recent = [p for p in query.recentProgress if p.batchId > last]
        except Exception:  # the query is ending
            return
        if recent:
            last = recent[-1].batchId
            took = [p.batchDuration / 1000 for p in recent]
            log(f"{len(recent)} batch(es), {sum(p.numInputRows for p in recent)} records read, "
                f"each {sum(took) / len(took):.2f}s on average, at most {max(took):.2f}s")


def log(message: str) -> None:
    print(f"continuous-validation {time.strftime('%H:%M:%S')}: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    from .stream_metrics import Exporter
    argv = sys.argv[1:] if argv is None else argv
    args = service_args(argv[0]) if len(argv) == 1 and not argv[0].startswith("-") else parse_args(argv)
    lock = claim_checkpoint(args)  # noqa: F841 - held until this process ends: another start waits
    try:
        plan = Plan(load_config(args).flows)
    except BadInput as bad:
        for problem in bad.problems:
            print(f"mirrorstack.spark.streaming: bad input: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    exporter = Exporter(plan, log=log)
    if args.metrics_port:
        exporter.serve(args.metrics_host, args.metrics_port)
    # PySpark's own pandas calls warn on every batch (a pandas deprecation inside PySpark 4.2)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    few_malloc_arenas(args)
    cluster = bool(args.master) and not args.master.startswith("local")
    if cluster:  # its executors (a standalone cluster's, a Connect server's) run the ledgers: this package's
        shipped = package_zip(Path(tempfile.mkdtemp(prefix="mirrorstack-validator-")))
        args.py_files = args.py_files or str(shipped)
    spark, ending = build_spark(args, kafka_v2=False)  # its checkpoints were written by the V1 source
    remote = ending == "remote"
    if remote:
        spark.addArtifacts(str(shipped), pyfile=True)
    spark.conf.set("spark.sql.shuffle.partitions", "2")  # one ledger per partition: few, small groups
    warm_up(spark)
    query = start_again_if_worker_late(lambda: start(spark, plan, args, exporter.take, remote))
    log(f"{len(plan.flows)} flow(s) into {len(plan.targets)} target cluster(s), window {args.window_seconds:g}s, "
        f"a batch every {args.trigger_seconds:g}s, checkpoint {args.checkpoint_dir}")
    stopping = threading.Event()
    threading.Thread(target=report_progress, args=(query, stopping), daemon=True).start()
    if remote:
        threading.Thread(target=follow_view, args=(spark, figures_view(args.checkpoint_dir), exporter.take, stopping,
                                                   min(args.trigger_seconds, 1.0)), daemon=True).start()
    threading.Thread(target=exporter.follow, args=(lambda: (query.lastProgress or {}).get("timestamp"), stopping),
                     daemon=True).start()

    def quietly(action) -> None:  # the JVM may be gone already (its process group was stopped too)
        try:
            action()
        except Exception:
            pass

    def stop(*_) -> None:  # a pod's or container's stop, or ^C: the query ends between batches
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=quietly, args=(query.stop,), daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        query.awaitTermination(args.run_seconds)
    except Exception as error:  # the query failed: Spark's reason, then exit 3 (EXIT_ERROR)
        if not stopping.is_set():
            log(f"the continuous validation failed: {hide_secrets(str(error), plan.flows)}")
            return EXIT_ERROR
    finally:
        stopping.set()
        quietly(query.stop)
        quietly(lambda: stop_spark(spark, ending))
    log("stopped: a start with the same checkpoint goes on from here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
