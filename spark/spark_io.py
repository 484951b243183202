"""Spark I/O: the session (own JVM, spark-submit's, or a Spark Connect server's), batch reads of Kafka
topics, and records reduced to the match key (partition, timestamp, digests of
key, value and headers)."""
from __future__ import annotations

import argparse
import os
import re
import sys

from .masters import is_connect, master_answers, on_loopback


# Rows per Spark task, for reads (Kafka partitions split) and shuffles: keeps each
# task's sort and window buffers small, so the heap needed does not grow with N.
ROWS_PER_TASK = 400_000


# A validation of fewer source records than this runs its driver on C1 only: most of a short job's
# CPU goes to C2 compiling code it hardly runs. The job on local[2], 2 cores (docs/measurements.md):
# 1M records a side 18.7 s on C1 against 20.1 s on C2 (CPU 25 s against 31 s), 2M 30.8 s against
# 25.6 s; the lines cross near 1.3M.
QUICK_JIT_BELOW = 1_200_000
C1_ONLY = "-XX:TieredStopAtLevel=1"
# The parallel collector for the driver's JVM (with local executors in it): the job is a batch
# whose throughput counts, not its pauses. 1M records a side: 1.3 s less than G1; 10M: the same.
THROUGHPUT_GC = "-XX:+UseParallelGC"


def driver_java_options(args: argparse.Namespace, source_records: int | None) -> str:
    """The parallel collector (unless --java-options picks a collector), C1 only for a job of fewer
    than QUICK_JIT_BELOW source records (known when the snapshot came before Spark), then
    --java-options, which win (`-XX:TieredStopAtLevel=4` keeps C2)."""
    own = getattr(args, "java_options", None)
    quick = source_records is not None and source_records < QUICK_JIT_BELOW
    picks_gc = own is not None and re.search(r"-XX:\+Use\w+GC\b", own)  # two collectors: the JVM refuses
    return " ".join(filter(None, [None if picks_gc else THROUGHPUT_GC, C1_ONLY if quick else None, own]))


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """The options build_spark reads: where the job runs and its JVM's size."""
    parser.add_argument("--jars", metavar="JARS",
                        help="comma-separated spark.jars (spark-sql-kafka and deps); under "
                             "spark-submit pass --jars/--packages to spark-submit instead")
    parser.add_argument("--py-files", metavar="FILES",
                        help="comma-separated spark.submit.pyFiles: this job's package zip, so that "
                             "executors import its functions; under spark-submit pass spark-submit's "
                             "own --py-files instead")
    parser.add_argument("--master", metavar="URL",
                        help="Spark master: local[N] (the default, local[2]), a standalone spark://host:port, or a "
                             "Spark Connect server sc://host:port (it needs the spark-sql-kafka jars; offsets are "
                             "read here with confluent_kafka); under spark-submit, spark-submit's")
    parser.add_argument("--executor-memory", metavar="SIZE",
                        help="a cluster master's executors: spark.executor.memory (default: the cluster's)")
    parser.add_argument("--executor-cores", type=int, metavar="N",
                        help="a cluster master's executors: spark.executor.cores (default: the cluster's)")
    parser.add_argument("--max-cores", type=int, metavar="N",
                        help="a standalone master: spark.cores.max, the job's cores in all (default: the cluster's)")
    parser.add_argument("--executor-wait-seconds", type=float, default=60, metavar="S",
                        help="a cluster master: how long the job waits for its first executor before it fails "
                             "(default 60; Spark itself would wait for ever)")
    parser.add_argument("--driver-memory", default="1g", metavar="SIZE",
                        help="heap of the driver JVM, which also runs the local[*] executors (default 1g; "
                             "the job's memory does not grow with the data, so this rarely needs raising). "
                             "Under spark-submit, pass spark-submit's own --driver-memory instead")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the session this process starts (repeatable), e.g. a k8s:// "
                             "master's executor pods; under spark-submit pass spark-submit's own --conf instead")
    parser.add_argument("--java-options", metavar="OPTIONS",
                        help="extra options of the driver JVM this process starts (spark.driver.extraJavaOptions), "
                             "e.g. a class-data archive; under spark-submit pass its --driver-java-options instead")


def build_spark(args: argparse.Namespace, source_records: int | None = None, kafka_v2: bool = True):
    """(session, how to end it): "jvm" when this process launched Spark's JVM
    (stop the session and the JVM), "session" under spark-submit (stop the
    session; spark-submit owns the JVM), "remote" for a Spark Connect session
    (end it; the server runs on), "none" for a session that was already
    running. Under spark-submit the launcher's settings win. `source_records`:
    the job's size when known, which picks the driver's JIT; `kafka_v2`: see job_settings."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        return job_settings(SparkSession.builder.getOrCreate(), kafka_v2), "none"
    if args.master and is_connect(args.master):
        return job_settings(connect_session(args.master), kafka_v2), "remote"
    if args.master and not args.master.startswith("local"):
        master_answers(args.master)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._gateway is not None
    builder = SparkSession.builder.appName("mirrorstack-validate-replication")
    if args.jars:  # the control plane passes them (spark-sql-kafka and its dependencies)
        builder = builder.config("spark.jars", args.jars)
    if getattr(args, "py_files", None):  # what spark-submit's --py-files sets: executors import the job
        builder = builder.config("spark.submit.pyFiles", args.py_files)
    if not under_submit:
        master = args.master or "local[2]"
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (builder.master(master).config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.memory", args.driver_memory))
        options = driver_java_options(args, source_records)
        if options:
            builder = builder.config("spark.driver.extraJavaOptions", options)
        for key, value in executor_settings(args).items():
            builder = builder.config(key, value)
        for key, value in session_conf(args).items():
            builder = builder.config(key, value)
        if master.startswith("local") or on_loopback(master):
            # Bind loopback only, from JVM start: a cluster on this machine reaches the driver there too.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = (builder.config("spark.driver.host", "127.0.0.1")
                       .config("spark.driver.bindAddress", "127.0.0.1"))
    elif args.master:
        builder = builder.master(args.master)
    try:
        spark = builder.getOrCreate()
    except Exception as error:
        if under_submit or master.startswith("local") or "stopped SparkContext" not in str(error):
            raise
        raise NoExecutors(
            f"{master} ended the application as it started: its executors failed on the workers (a worker's log "
            "says why, e.g. its Java, SPARK_HOME or PYSPARK_PYTHON); fix: mend the workers, then run again") from None
    spark.sparkContext.setLogLevel("WARN")
    ending = "session" if under_submit else "jvm"
    running_on = spark.sparkContext.master  # spark-submit's, under it
    if not running_on.startswith("local"):
        try:
            wait_for_executors(spark, running_on, args)
        except Exception:
            stop_spark(spark, ending)
            raise
    return job_settings(spark, kafka_v2), ending


V1_SOURCES = "spark.sql.sources.useV1SourceList"


def job_settings(spark, kafka_v2: bool = True):
    """The session's settings for the job, on every Spark it runs on (runtime SQL settings).
    - Frames kept on disk uncompressed: they hold digests and offsets, which do not compress, and
      gathering the compression statistics took 12 % of the CPU at 1M records.
    - With `kafka_v2` (the batch job), Kafka read through the DataSource V2 scan, which builds Spark's
      binary rows directly; the V1 relation (Spark's default for kafka) turns every record into a JVM
      Row object and back. 1M records a side on local[2]: 18.6 s against 20.7 s (docs/measurements.md).
      The continuous validator keeps Spark's default source, which wrote its checkpoints."""
    if kafka_v2:
        # No default in the get: one given is returned in place of Spark's own, and "kafka" would stay listed.
        listed = spark.conf.get(V1_SOURCES) or ""
        kept = ",".join(name for name in listed.split(",") if name.strip().lower() != "kafka")
        if kept != listed:
            spark.conf.set(V1_SOURCES, kept)
    spark.conf.set("spark.sql.inMemoryColumnarStorage.compressed", "false")
    return spark


EXECUTOR_KEYS = ("spark.executor.memory", "spark.executor.cores", "spark.cores.max")


def executor_settings(args: argparse.Namespace) -> dict[str, str]:
    """A cluster's executors as the job asks for them (none set: the cluster's defaults)."""
    values = (getattr(args, name, None) for name in ("executor_memory", "executor_cores", "max_cores"))
    return {key: str(value) for key, value in zip(EXECUTOR_KEYS, values) if value is not None}


def session_conf(args: argparse.Namespace) -> dict[str, str]:
    """--conf KEY=VALUE settings as a dict (a later one of the same key wins)."""
    conf = {}
    for item in getattr(args, "conf", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--conf {item!r}: expected KEY=VALUE")
        conf[key] = value
    return conf


class KafkaSourceMissing(RuntimeError):
    """The Spark that runs the job has no Kafka data source (spark-sql-kafka and its dependencies)."""


def connect_session(master: str):
    """A Spark Connect session; the server must have the Kafka data source (its own jars: a client
    cannot add a data source to a running server)."""
    from pyspark.sql import SparkSession
    master_answers(master)
    spark = SparkSession.builder.remote(master).getOrCreate()
    try:
        # Analysing a Kafka read resolves the data source without contacting any broker.
        spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9").option("subscribe", "x").load().schema
    except Exception as error:
        if "failed to find data source: kafka" not in str(error).lower():
            spark.stop()
            raise
        version = spark.version
        spark.stop()
        raise KafkaSourceMissing(
            f"the Spark Connect server at {master} (validation.master) has no Kafka data source; fix: start it "
            f"with --packages org.apache.spark:spark-sql-kafka-0-10_2.13:{version}, or with --jars naming "
            "spark-sql-kafka, spark-token-provider-kafka, kafka-clients and commons-pool2 "
            "(make spark-kafka puts them in .tools/spark-kafka)") from None
    return spark


class NoExecutors(RuntimeError):
    """The cluster started no executor for the job in time: it never would (too little free memory
    or cores on every worker), or its workers are gone. Spark itself would wait for ever."""


def wait_for_executors(spark, master: str, args: argparse.Namespace) -> int:
    """Wait until the cluster gave the job at least one executor; returns how many it has."""
    import time
    bound = float(getattr(args, "executor_wait_seconds", None) or 60)
    tracker, deadline = spark.sparkContext._jsc.sc(), time.monotonic() + bound
    while True:
        executors = tracker.getExecutorMemoryStatus().size() - 1  # the driver is listed too
        if executors > 0:
            return executors
        if time.monotonic() > deadline:
            conf = spark.sparkContext.getConf()  # what spark-submit or this job asked for
            asked = {key: conf.get(key) for key in (*EXECUTOR_KEYS, "spark.executor.instances") if conf.get(key)}
            raise NoExecutors(
                f"no executor of {master} started within {bound:.0f} s (asked: "
                f"{', '.join(f'{k}={v}' for k, v in asked.items()) or 'the cluster defaults'}): no worker (or "
                "node) has the free memory or cores asked for, or none is alive; fix: lower "
                "validation.executor_memory or validation.executor_cores, or add workers (nodes) to the cluster")
        time.sleep(0.5)


def stop_spark(spark, how: str = "jvm") -> None:
    """Stop the session and, with how="jvm", the JVM this process launched (it
    exits when its stdin closes)."""
    from pyspark import SparkContext
    if how == "none":
        return
    spark.stop()
    gateway = SparkContext._gateway if how == "jvm" else None
    if gateway is not None:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.stdin.close()
            proc.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None


def _quote_pattern(topic: str) -> str:
    """A Java regex matching exactly `topic`: anchored, as Spark's Kafka source
    looks for the pattern anywhere in a topic's name (SubscribePatternStrategy:
    findFirstIn), so `\\Qus.orders\\E` alone would read `us.orders-v2` too."""
    return f"^\\Q{topic}\\E$"


# A batch read's consumers wait at most this long for a fetch the log end cannot fill (Kafka's
# default: 500 ms). A consumer fetches ahead of what its task asked for; at a partition's end that
# fetch sits at the broker for the whole wait, and the next fetch to that broker queues behind it.
# The 1M-record job: 18.3 s with the default, 15.2 s with 10 ms; a 200-record one 11.7 s and 9.4 s
# (docs/measurements.md). A fetch with data returns at once either way.
BATCH_FETCH_WAIT_MS = "10"


def read_kafka(spark, bootstrap: str, client: dict[str, str], stream: bool = False, **options: str):
    """A Kafka read with the client's settings (they win): a batch, or with `stream` a Structured
    Streaming source."""
    reader = (spark.readStream if stream else spark.read).format("kafka").option("kafka.bootstrap.servers", bootstrap)
    if not stream:
        client = {"fetch.max.wait.ms": BATCH_FETCH_WAIT_MS, **client}
    for key, value in client.items():
        reader = reader.option(f"kafka.{key}", value)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def read_whole_topic(spark, bootstrap: str, client: dict[str, str], topic: str, headers: bool = True,
                     **options: str):
    """A batch read of everything in `topic` now (empty when it does not exist)."""
    return read_kafka(spark, bootstrap, client, subscribePattern=_quote_pattern(topic),
                      startingOffsets="earliest", endingOffsets="latest",
                      includeHeaders="true" if headers else "false", **options)


def tasks_for(rows: int, cores: int = 1) -> int:
    """Tasks of at most ROWS_PER_TASK rows, a multiple of the cores (no last wave on one core)."""
    tasks = max(2, -(-rows // ROWS_PER_TASK))
    return -(-tasks // cores) * cores


# The match key's digests: two 64-bit xxHash values (128 bits) over the null flags, key, value and
# headers (in order), in two argument orders. A false match needs two different records in one
# partition and millisecond to agree on both. Spark's own hash expressions, no string built per
# record: on 1M warm records 0.1 s of CPU against 0.8 s for the SHA-256 chain they replace.
MATCH_KEY = ["partition", "ts", "h1", "h2"]


def hashed_records(df, *keep: str):
    """(*keep, partition, offset, ts, h1, h2): h1, h2 = the record's digests (a null key or value is
    distinct from an empty one); `keep` columns of the Kafka source kept as they are (topic)."""
    from pyspark.sql import functions as F
    no_key, no_value = F.isnull("key"), F.isnull("value")
    return df.select(
        *keep, F.col("partition").cast("int").alias("partition"), F.col("offset"),
        F.coalesce(F.expr("unix_millis(timestamp)"), F.lit(-1)).alias("ts"),
        F.xxhash64(no_key, "key", no_value, "value", "headers").alias("h1"),
        F.xxhash64(F.lit(1), "headers", "value", no_value, "key", no_key).alias("h2"))
