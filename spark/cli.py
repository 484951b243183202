"""Validate MirrorMaker 2 replication end to end with PySpark: completeness,
duplicates, extras, per-partition order, topic mapping, lag, and what a
consumer group would lose or re-read when failing over at MM2's translated
offsets.

Standalone: needs only pyspark (and the spark-sql-kafka jars) plus, optionally,
confluent_kafka on the driver. Of mirrorstack it imports only the MM2
vocabulary (`mirrorstack.mm2`, standard library only), never the control
plane; the jars come by `--jars` (or spark-submit's).

    PYTHONPATH=<checkout> python spark/validate_replication.py --jars <jars> --config flows.json --out report.json
    spark-submit --jars <spark-sql-kafka jars> --py-files validation.zip validate_replication.py --config flows.json
(validation.zip: the `spark` and `mm2` packages, as components/validation/package.py builds it)

Input (`--config FILE` or `--config-json TEXT`)
-----------------------------------------------
    {"flows": [{"name": "us->central",              # optional, default flows[i]
                "source_bootstrap": "host:port,...",  # required
                "target_bootstrap": "host:port,...",  # required
                "source_alias": "us",                 # required for policy default
                "policy": "default" | "identity",     # default "default"
                "separator": ".",                     # default "."
                "topics": ["orders"],                 # exact source topic names, or:
                "topic_patterns": ["orders", "clicks.*"],  # regexes (MM2's `topics`), resolved
                "topics_exclude": ["tmp\\..*"],        #   against the source's topics at start
                "target_alias": "central",            # optional: skips topics named for the target
                "source_client": {"security.protocol": "SSL", ...},  # Kafka client settings
                "target_client": {...},
                "checkpoints_topic": "us.checkpoints.internal",      # optional, on the target
                "groups": ["app-.*"],                 # optional consumer-group regexes
                "groups_exclude": ["tmp-.*"],         # optional, groups to leave out
                "groups_required": true,              # default true: a regex with no checkpoint fails
                "offset_syncs_topic": "mm2-offset-syncs.us.internal",  # optional, on the target: purged
                "positions": [{"name": "mirrorstack-drill.d1.app",   # optional: where a consumer would
                               "consumer_group": "app",               #   resume on the target (a drill's
                               "label": "drill d1",                   #   group copy), against its group's
                               "partitions": [{"topic": "orders", "partition": 0,  # position on the source
                                               "upstream_offset": 120, "downstream_offset": 118}]}]}],
     "wait_seconds": 120,
     "window_seconds": 3600,    # optional: only records of the last hour; absent/null: whole history
     "min_records": 0,          # optional: fail when fewer records were checked
     "tolerance": {"missing": 0, "duplicates": 0, "extras": 0, "out_of_order": 0,
                   "in_flight": "wait-rate", "lost": 0, "purged": 0}}

Where it runs (`--master`): `local[N]` in a JVM this process starts; a
standalone master `spark://host:port` (executors sized by --executor-memory,
--executor-cores, --max-cores); a Spark Connect server `sc://host:port`,
where the same DataFrame code runs on the server's Spark (which must have the
spark-sql-kafka jars) while offsets are read here with confluent_kafka; or
spark-submit's master. A master that does not answer fails at once (exit 3).

Where the report goes: `--out FILE`, the summary on stdout, and, with
`"report_to": {"bootstrap": "host:port", "client": {...}, "topic": "..."}` in
the input, one record on that topic (default
`mirrorstack-validation-reports.internal`, made when missing): key
`--report-key` (default a random one), value the report's JSON (trimmed of
per-partition details beyond 900 kB). A report that cannot be written there
fails the run (exit 3); a run that could not run reports its error there too.
The control plane finds a job's report there wherever the job ran.

Client settings are Java Kafka client properties; they are passed to Spark's
Kafka source as `kafka.<key>` options (and, translated, to confluent_kafka when
that reads offsets on the driver: PEM trust/key stores and a SCRAM or PLAIN
`sasl.jaas.config` translate, other Java-only settings send offsets via Spark).
A value that is exactly `${file:/abs/path:key}` (Kafka's FileConfigProvider
reference) is replaced, when the config is read, by `key` of that Java
properties file; the value read never appears in messages or the report.
Tolerances are maxima; null means no limit.
Defaults: missing, duplicates, extras, out_of_order, lost and purged 0; in_flight "wait-rate"
(bounded by the rate the target took records during the wait: see below; null or "unlimited":
no limit).

Method
------
0. Topic patterns: a flow with `topic_patterns` validates every source topic
   that fully matches one of them and none of `topics_exclude`, leaving out
   what MM2 never replicates (its default excludes `*.internal`, `*-internal`,
   `*.replica`, `__*`; its internal topics under the flow's separator, such as
   `mm2-offset-syncs_us_internal` for `_`; `heartbeats` topics) and, with a
   `target_alias`, topics that came from the target (MM2's cycle check,
   mirrorstack.mm2.flows). Empty topics are
   left out too (nothing to check yet); a flow matching no topic is reported,
   not failed.
1. Snapshot: the end offset of every source partition is taken once, at start
   (confluent_kafka watermarks, or in `--offsets-via spark` mode an aggregate
   max(offset)+1 per partition); the window is [beginning, snapshot end).
   With `window_seconds` it begins at each partition's first record whose
   timestamp is at most that old (Kafka's offsetsForTimes, from the time
   index), so the read is bounded by time, not by the topic's retention; the
   target is read the same way, and both sides keep only records with such a
   timestamp (MM2 copies the source record's timestamp).
2. Remote topic: default policy `<alias><separator><topic>`, identity `<topic>`.
   Flows landing in the same (target bootstrap, remote topic) form ONE group,
   validated together (identity aggregation: us.orders and uk.orders into
   central's `orders`).
3. Wait, bounded by wait_seconds with progress on stderr, until each target
   partition holds at least as many records as its sources' windows put there
   (per partition: while the sources take new records, one partition running
   ahead must not hide another behind); then read the target to its end.
4. Records are matched on (partition, timestamp, two 64-bit xxHash digests of
   key, value and headers) — never on offsets — with multiplicity: both sides
   are grouped on the match key in one shuffle, and a key's k-th copy (by
   offset) is paired with its k-th source record (by source, then offset). The
   target is read once, up to its end offsets when the wait ended. Only
   aggregates and samples of at most --sample-size rows reach the driver. Reads
   split Kafka partitions and shuffles use one task per ~400,000 rows (a
   multiple of the cores), and the frames used twice are cached on disk, so the
   heap needed does not grow with the data.
   - missing: source records in the window without a target partner; when
     the wait bound expired, those after the last matched source offset of
     their partition count as in_flight instead, but only if that target
     partition took records during the wait (evidence they are on their way);
     on a partition that took nothing (a FAILED, paused or stopped task) they
     stay missing and are also counted as `stalled`. Each sample says why it
     counted where it did. in_flight is bounded: with tolerance.in_flight
     "wait-rate" (the default), more records in flight than the target took during the wait, scaled to
     another wait of the same bound, fail the group;
   - duplicates: target occurrences beyond the source multiplicity of a key;
   - extras: target records whose key no source record has; copies of records
     the sources took after the snapshot (applications writing while the job
     runs) are set aside first, counted as `after_snapshot`, and checked by
     the next run;
   - out_of_order: per target partition, over matched pairs in target-offset
     order, pairs whose source offset is lower than the previous pair's (per
     source: identity merges interleave sources legitimately); a partition
     whose pairs all have the same target-minus-source offset is in order
     without a sort (the common case of one source copied without gaps);
   - partitions_ok: the remote topic exists with each source's partition count;
   - lag: per source partition, records in the window minus those matched.
5. Failover (flows with `checkpoints_topic`): MM2 Checkpoint records are read
   from the target and decoded (key: int16-length group, int16-length topic,
   int32 partition; value: int16 version 0, int64 upstream offset, int64
   downstream offset, int16-length metadata — Kafka's
   org.apache.kafka.connect.mirror.Checkpoint, big-endian). With the latest
   checkpoint per (group, topic, partition), a consumer resuming at the
   downstream offset D with upstream offset U would LOSE the records whose
   target partner lies before D but whose source offset is >= U, and RE-READ
   those at/after D whose source offset is < U.

   Given `positions` are counted the same way, with U the group's committed
   offset on the source and D the position's offset on the target: one that
   re-reads or loses any record fails its group (positions.py), as does one
   the run cannot prove: before the window it read, or on a topic it did not check.

6. Purged (flows with `offset_syncs_topic`, target topics fed by one source):
   records the source deleted (retention, delete-records) before MM2 copied
   them, per partition, from MM2's offset syncs (purged.py says how).

Report (`--out FILE`, JSON)
---------------------------
    {"status": "passed" | "failed" | "nothing-checked",   # nothing-checked: 0 records selected
     "passed": bool,                                       # false too when nothing was checked
     "exit_code": 0|1, "failures": [str],   # why it failed
     "records_checked": int, "topics_checked": int, "min_records": int,
     "window": {"seconds": float | null, "since": ISO-8601 | null, "since_ms": int | null},
     "started_at": ISO-8601, "duration_seconds": float,
     "offsets_via": "kafka-client" | "spark", "wait_seconds": float, "tolerance": {...},
     "groups": [{                                     # one per (target, remote topic)
        "target_bootstrap": str, "topic": str,        # the remote topic
        "flows": [str],                               # flow names feeding it
        "sources": [{"flow", "topic", "source_bootstrap", "partitions",
                     "window": {"<partition>": [begin, end]}}],
        "target_partitions": int | null,              # null: topic does not exist
        "partitions_ok": bool,
        "waited_seconds": float, "timed_out": bool,
        "source_records": int, "target_records": int,
        "matched": int, "missing": int, "in_flight": int,
        "stalled": int, "stalled_partitions": [int],   # of the missing: stuck after the last arrival
        "in_flight_bound": int | null,                 # in flight that the wait's rate justifies
        "duplicates": int, "extras": int, "out_of_order": int,
        "after_snapshot": int,                         # copies of newer source records, set aside
        "purged": int, "purged_evidence": str,
        "purged_partitions": [{"flow", "topic", "partition", "purged", "pending", "log_start"}],
        "samples": {"missing" | "in_flight": [{"flow", "topic", "partition", "source_offset",
                                               "target_offset": null, "why": str}],
                    "duplicates": [{"topic", "partition", "source_offset", "target_offset"}],
                    "extras": [{"topic", "partition", "source_offset": null, "target_offset"}],
                    "out_of_order": [{"flow", "topic", "partition", "source_offset",
                                      "previous_source_offset", "target_offset"}]},
        "lag": [{"flow", "topic", "partition", "expected", "matched", "lag"}],
        "failover": [{"flow", "consumer_group", "topic", "checkpoints_topic", "partitions",
                      "lost", "reread",
                      "checkpoints": [{"partition", "upstream_offset", "downstream_offset"}]}],
        "positions": [{"flow", "name", "consumer_group", "label", "topic", "remote_topic", "lost", "reread",
                       "unproved": [int],  # partitions whose position lies before what the run read
                       "partitions": [{"partition", "upstream_offset", "downstream_offset"}]}],
        "passed": bool, "failures": [str]}],
     "flows": [{"name", "topics": [{"topic", "remote_topic", "group",   # index into groups
                                    "source_records", "matched", "missing", "in_flight",
                                    "duplicates", "out_of_order", "purged"}]}]}

A human summary goes to stdout, progress to stderr.

Pass/fail and exit codes
------------------------
A group fails when missing, duplicates, extras, out_of_order, in_flight (its
tolerance, or without one its in_flight_bound) or any consumer group's `lost`
exceeds its tolerance, when
partitions_ok is false, or when a `groups` regex matched no checkpoint. The
run fails when fewer than `min_records` records were checked; with none
checked and no minimum its status is `nothing-checked` (exit 0, passed false).
Exit 0: passed (or nothing checked); 1: failed (the report says why); 2: bad input (each message
names the field); 3: the job could not run (Kafka unreachable, Spark error).

Limits: matching needs CreateTime timestamps preserved (MM2 does); on topics
with LogAppendTime every record would be missing + extra. In `--offsets-via
spark` mode without a window, partition counts are the partitions that hold
records (empty partitions are invisible to Spark's Kafka source) and the
snapshot reads the topic once more; with a window, offsets and partition
counts come from the Kafka Admin client on the driver (no record is read).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import uuid
from pathlib import Path

from mirrorstack.mm2.validation_reports import PRINTED_MARK, printed_line

from .config import (EXIT_BAD_INPUT, EXIT_ERROR, EXIT_PASSED, BadInput, Config, _log, add_config_arguments,
                     hide_secrets, load_config, resolve_topics)
from .offsets import KafkaClientOffsets, jvm_topic_sizes
from .reconcile import Validator
from .report import summary_text
from .report_channel import ReportNotSent, send_report
from .masters import is_connect
from .spark_io import KafkaSourceMissing, add_session_arguments, build_spark, stop_spark


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    doc = __doc__ or ""
    epilog = doc[doc.index("Input ("):doc.index("Method\n")] + doc[doc.index("Pass/fail"):] \
        if "Input (" in doc and "Pass/fail" in doc else None
    parser = argparse.ArgumentParser(
        prog="validate_replication.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Validate MirrorMaker 2 replication (completeness, duplicates, extras, order,\n"
                    "partition mapping, lag, offset-translation failover) with PySpark. The report's\n"
                    "JSON schema and the method are in this file's docstring.",
        epilog=epilog)
    add_config_arguments(parser)
    parser.add_argument("--out", metavar="FILE", help="write the JSON report here")
    parser.add_argument("--wait-seconds", type=float, metavar="S",
                        help="override the config's wait_seconds (bound on waiting for the targets)")
    parser.add_argument("--poll-seconds", type=float, default=2.0, metavar="S",
                        help="interval between target counts while waiting (default 2)")
    parser.add_argument("--sample-size", type=int, default=5, metavar="N",
                        help="rows per sample in the report (default 5)")
    parser.add_argument("--offsets-via", choices=("auto", "kafka-client", "spark"), default="auto",
                        help="how the driver reads offsets and partition counts: confluent_kafka "
                             "(kafka-client), aggregates over Spark reads (spark), or kafka-client when "
                             "importable and the client settings translate (auto, the default)")
    add_session_arguments(parser)
    parser.add_argument("--shuffle-partitions", type=int, default=None, metavar="N",
                        help="spark.sql.shuffle.partitions for the comparison (default: one per 400,000 rows, at least 2)")
    parser.add_argument("--report-key", metavar="KEY",
                        help="the key of the report's record on the config's `report_to` topic (default: a new "
                             "random one, printed)")
    parser.add_argument("--report-only", action="store_true",
                        help="exit 0 when the validation fails (the report still says FAILED); "
                             "bad input and errors still exit 2 and 3")
    parser.add_argument("--print-report", action="store_true",
                        help="also print the report (trimmed to 15 kB) as the output's last line, after "
                             f"{PRINTED_MARK.strip()!r}: for a platform that reads the job's output")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser.parse_args(argv)


def connect_problem(args: argparse.Namespace, config: Config) -> str | None:
    """What a Spark Connect run cannot do: size executors (the server's own settings do), or read
    offsets through Spark (no JVM here): they are read with confluent_kafka, in this process."""
    sized = [flag for flag, value in (("--executor-memory", args.executor_memory),
                                      ("--executor-cores", args.executor_cores), ("--max-cores", args.max_cores))
             if value is not None]
    if sized:
        return (f"{', '.join(sized)}: a Spark Connect server ({args.master}) runs the job on its own executors, "
                "sized by its own settings; fix: remove them")
    if args.offsets_via == "spark" or not KafkaClientOffsets.usable(config):
        return (f"--master {args.master}: over Spark Connect the job reads offsets here with confluent_kafka, and "
                "--offsets-via spark was asked or a client setting has no librdkafka equivalent (e.g. a JKS store); "
                "fix: PEM stores and a SCRAM or PLAIN sasl.jaas.config, or a master the job drives (local[N], spark://)")
    return None


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the job; returns the exit code. With `spark` given, that session is
    used and left running (its owner stops it)."""
    args = parse_args(argv)
    log = (lambda _m: None) if args.quiet else _log
    try:
        config = load_config(args)
        if (args.sample_size < 0 or args.poll_seconds <= 0
                or (args.shuffle_partitions is not None and args.shuffle_partitions < 1)):
            raise BadInput(["--sample-size >= 0, --poll-seconds > 0, --shuffle-partitions >= 1"])
        for flag, size in (("--driver-memory", args.driver_memory), ("--executor-memory", args.executor_memory)):
            if size is not None and not re.fullmatch(r"[1-9][0-9]*[kKmMgGtT]?", size):
                raise BadInput([f"{flag}: {size!r} is not a JVM size like 1g or 1536m"])
        if any(n is not None and n < 1 for n in (args.executor_cores, args.max_cores)) or args.executor_wait_seconds <= 0:
            raise BadInput(["--executor-cores >= 1, --max-cores >= 1, --executor-wait-seconds > 0"])
    except BadInput as exc:
        for problem in exc.problems:
            print(f"bad input: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT

    offsets_via = args.offsets_via
    if args.master and is_connect(args.master):
        problem = connect_problem(args, config)
        if problem:
            print(f"bad input: {problem}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if offsets_via == "auto":
        offsets_via = "kafka-client" if KafkaClientOffsets.usable(config) else "spark"
    elif offsets_via == "kafka-client" and not KafkaClientOffsets.usable(config):
        print("bad input: --offsets-via kafka-client: confluent_kafka is missing or a client setting "
              "has no librdkafka equivalent", file=sys.stderr)
        return EXIT_BAD_INPUT

    ending = "none"
    report_key = args.report_key or uuid.uuid4().hex
    try:
        validator = Validator(config, spark, offsets_via, args.poll_seconds, args.sample_size, log,
                              args.shuffle_partitions)
        snap = None
        if offsets_via == "kafka-client":
            # Topics, the snapshot (and a missing source topic) come before Spark starts.
            validator.config = resolve_topics(config, validator.kafka.topic_sizes, log)
            snap = validator.snapshot()
        if spark is None and (offsets_via == "spark" or validator.config.groups):
            records = sum(e - b for marks in snap.values() for b, e in marks.values()) if snap else None
            spark, ending = build_spark(args, records)
            validator.spark = spark
        if offsets_via == "spark":
            validator.config = resolve_topics(config, lambda b, c: jvm_topic_sizes(spark, b, c), log)
        report = validator.run(snap)
        if config.report_to is not None:
            send_report(config.report_to, report_key, report, spark)
            log(f"report sent to topic {config.report_to.topic} at {config.report_to.bootstrap} (key {report_key})")
    except BadInput as exc:
        for problem in exc.problems:
            print(f"bad input: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - reported, exit 3
        message = hide_secrets(f"{type(exc).__name__}: {exc}", config.flows)
        if "kafka" in message.lower() and "data source" in message.lower() and not isinstance(exc, KafkaSourceMissing):
            message += " (the spark-sql-kafka jars are missing: pass --jars)"
        if "OutOfMemoryError" in message or "SparkContext was shut down" in message:
            message += " (the driver ran out of heap: raise --driver-memory or --shuffle-partitions)"
        print(f"error: the validation could not run: {message}", file=sys.stderr)
        error_report = {"passed": False, "exit_code": EXIT_ERROR, "error": message}
        if args.out:
            Path(args.out).write_text(json.dumps(error_report, indent=2) + "\n")
        if config.report_to is not None and not isinstance(exc, ReportNotSent):
            try:  # the control plane learns why, wherever the job ran
                send_report(config.report_to, report_key, error_report, spark)
            except ReportNotSent as unsent:
                print(f"error: {unsent}", file=sys.stderr)
        if args.print_report:
            print(printed_line(error_report), flush=True)
        return EXIT_ERROR
    finally:
        if spark is not None:
            stop_spark(spark, ending)

    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(summary_text(report), flush=True)
    if args.print_report:
        print(printed_line(report), flush=True)
    return EXIT_PASSED if args.report_only else report["exit_code"]
