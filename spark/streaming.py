"""The continuous validation: Spark Structured Streaming reads every flow's source topics and their
copies as they grow, and a ledger per (target topic, partition) in Spark's state store
(stream_match.Ledger) matches records by identity within a window. Each micro-batch's figures go
to the metrics this process serves to Prometheus (stream_metrics.py).

    python -m mirrorstack.spark.streaming --config flows.json --checkpoint-dir DIR --metrics-port 9406

The same flows JSON as the one-shot job (cli.py). Restarted with the same --checkpoint-dir, it
goes on from where it was: Kafka offsets and ledgers are in the checkpoint, so nothing is counted
twice or skipped. A first start reads both sides from one timestamp (--lookback-seconds before
now), so every copy read has its source record read too."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from .config import EXIT_BAD_INPUT, EXIT_ERROR, BadInput, Config, add_config_arguments, load_config, resolve_topics
from .spark_io import MATCH_KEY, add_session_arguments, build_spark, hashed_records, read_kafka, stop_spark

ROWS = "g int, partition int, src int, offset long, ts long, h1 long, h2 long"
FIGURES = ("g int, partition int, confirmed long, missing long, duplicates long, extras long, "
           "rpo_records long, rpo_seconds double, buckets array<long>, latency_sum double, latency_max double, "
           "missing_samples array<array<long>>")
TARGET = -1  # `src` of a target row


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mirrorstack.spark.streaming", description=__doc__.split("\n\n")[0])
    add_config_arguments(parser)
    parser.add_argument("--checkpoint-dir", required=True, metavar="DIR",
                        help="where Spark keeps the offsets read and the ledgers (a restart goes on from it)")
    parser.add_argument("--window-seconds", type=float, default=60.0, metavar="S",
                        help="a source record not on the target this long after it was read is missing (default 60)")
    parser.add_argument("--trigger-seconds", type=float, default=2.0, metavar="S",
                        help="a micro-batch every S seconds (default 2): latencies are read to within S")
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


def _stream(spark, bootstrap: str, client: dict[str, str], topic: str, start_ms: int):
    return read_kafka(spark, bootstrap, client, stream=True, subscribe=topic, includeHeaders="true",
                      startingTimestamp=str(start_ms),
                      # a partition with no record since then starts at its end, not with an error
                      startingOffsetsByTimestampStrategy="latest",
                      failOnDataLoss="false")  # a retention gap is reported missing, not fatal


def rows(spark, config: Config, start_ms: int):
    """Every group's target topic and the source topics feeding it, as one stream of ROWS."""
    from pyspark.sql import functions as F
    frames = []
    for g, group in enumerate(config.groups):
        sides = [(group.target_bootstrap, group.target_client, group.topic, TARGET)]
        sides += [(m.flow.source_bootstrap, m.flow.source_client, m.topic, m.src) for m in group.members]
        for bootstrap, client, topic, src in sides:
            hashed = hashed_records(_stream(spark, bootstrap, client, topic, start_ms))
            frames.append(hashed.select(F.lit(g).alias("g"), "partition", F.lit(src).alias("src"), "offset",
                                        *MATCH_KEY[1:]))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def ledger_step(window: float, timeout_ms: int):
    """applyInPandasWithState's function: one (g, partition)'s rows of a batch into its ledger."""
    def step(key, frames, state):
        import pandas as pd

        from .stream_match import Ledger
        now = time.time()
        ledger = Ledger.from_json(state.get[0] if state.exists else None)
        if not state.hasTimedOut:
            for frame in frames:
                ordered = frame.sort_values("offset")
                source = ordered[ordered["src"] != TARGET]
                target = ordered[ordered["src"] == TARGET]
                ledger.take(list(source[["src", "offset", "ts", "h1", "h2"]].itertuples(index=False, name=None)),
                            list(target[["src", "offset", "ts", "h1", "h2"]].itertuples(index=False, name=None)),
                            now)
        ledger.expire(now, window)
        figures = ledger.report(now)
        state.update((ledger.to_json(),))
        state.setTimeoutDuration(timeout_ms)  # called again without data: what waited too long expires
        yield pd.DataFrame([{"g": int(key[0]), "partition": int(key[1]), **figures}])
    return step


def start(spark, config: Config, args: argparse.Namespace, on_figures):
    """The running query; `on_figures(rows)` gets each batch's figures (one row per ledger touched)."""
    from pyspark.sql.streaming.state import GroupStateTimeout
    lookback = args.window_seconds if args.lookback_seconds is None else args.lookback_seconds
    start_ms = int((time.time() - lookback) * 1000)
    step = ledger_step(args.window_seconds, int(args.trigger_seconds * 1000))
    figures = rows(spark, config, start_ms).groupBy("g", "partition").applyInPandasWithState(
        step, outputStructType=FIGURES, stateStructType="ledger string", outputMode="update",
        timeoutConf=GroupStateTimeout.ProcessingTimeTimeout)
    return (figures.writeStream.outputMode("update")
            .option("checkpointLocation", args.checkpoint_dir)
            .trigger(processingTime=f"{args.trigger_seconds} seconds")
            .foreachBatch(lambda batch, _id: on_figures([r.asDict() for r in batch.collect()]))
            .start())


def log(message: str) -> None:
    print(f"continuous-validation {time.strftime('%H:%M:%S')}: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    from .stream_metrics import Exporter
    args = parse_args(argv)
    try:
        config = load_config(args)
        if config.has_patterns:  # the topics they select now; a topic made later needs a restart
            from .offsets import KafkaClientOffsets
            config = resolve_topics(config, KafkaClientOffsets().topic_sizes, log)
    except BadInput as bad:
        for problem in bad.problems:
            print(f"mirrorstack.spark.streaming: bad input: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    exporter = Exporter(config, log=log)
    if args.metrics_port:
        exporter.serve(args.metrics_host, args.metrics_port)
    # PySpark's own pandas calls warn on every batch (a pandas deprecation inside PySpark 4.2)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    spark, ending = build_spark(args)
    spark.conf.set("spark.sql.shuffle.partitions", "2")  # one ledger per partition: few, small groups
    query = start(spark, config, args, exporter.take)
    log(f"{len(config.groups)} target topic(s), window {args.window_seconds:g}s, a batch every "
        f"{args.trigger_seconds:g}s, checkpoint {args.checkpoint_dir}")
    stopping = threading.Event()

    def stop(*_) -> None:  # a pod's or container's stop, or ^C: the query ends between batches
        stopping.set()
        threading.Thread(target=query.stop, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        query.awaitTermination(args.run_seconds)
    except Exception as error:  # the query failed: Spark's reason, then exit 3 (EXIT_ERROR)
        if not stopping.is_set():
            log(f"the continuous validation failed: {error}")
            return EXIT_ERROR
    finally:
        query.stop()
        stop_spark(spark, ending)
    log("stopped: a start with the same checkpoint goes on from here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
