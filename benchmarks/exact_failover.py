"""What a planned switch's exact positions cost: the search for a group's next record by identity
(mirrorstack.failover.clusters.Cluster.find_copy) against reading the same records without
comparing them (Cluster.records), measured in the same run on one Kafka cluster.

For each round: a plain read of `--records` records of one partition (the baseline), then the
search for the last of them (the worst case: its copy is `--records` past MM2's translated offset).
Reported: records/s of each, the search's time over the baseline's (median and spread over the
rounds), and the search's time per 1,000 records.

  .venv/bin/python -m benchmarks.exact_failover [--records 100000] [--rounds 5] [--out report.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.replication import machine
from mirrorstack.failover.clusters import Cluster, identity
from tests.support.kafka_clients import create_topic, produce
from tests.support.services import KafkaCluster

TOPIC = "orders"


def one_round(cluster: Cluster, records: int) -> dict:
    started = time.perf_counter()
    last = None
    for last in cluster.records(TOPIC, 0, 0, records):
        pass
    plain = time.perf_counter() - started
    wanted = identity(last)
    started = time.perf_counter()
    found, passed = cluster.find_copy(TOPIC, 0, 0, records, wanted)
    search = time.perf_counter() - started
    assert (found, passed) == (records - 1, records - 1), (found, passed)
    return {"plain_seconds": plain, "search_seconds": search, "ratio": search / plain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="records searched (default 100,000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mirrorstack-exact-") as tmp:
        kafka = KafkaCluster("bench", Path(tmp) / "kafka").start()
        try:
            create_topic(kafka.bootstrap_servers, TOPIC, 1, 1)
            for chunk in range(0, args.records, 20_000):  # within the producer's local queue
                produce(kafka.bootstrap_servers, TOPIC, min(20_000, args.records - chunk), prefix=f"bench{chunk}")
            cluster = Cluster("bench", {"bootstrap": kafka.bootstrap_servers})
            try:
                one_round(cluster, args.records)  # the client's first connection and fetches, not measured
                rounds = [one_round(cluster, args.records) for _ in range(args.rounds)]
            finally:
                cluster.close()
        finally:
            kafka.stop()
    report = summary(rounds, args.records)
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


def summary(rounds: list[dict], records: int) -> dict:
    """The rounds with their medians and the spread of the search's time over the plain read's."""
    ratios = sorted(r["ratio"] for r in rounds)
    search = statistics.median(r["search_seconds"] for r in rounds)
    return {"machine": machine(), "records": records, "rounds": rounds,
            "plain_records_per_second_median": records / statistics.median(r["plain_seconds"] for r in rounds),
            "search_records_per_second_median": records / search,
            "search_ms_per_1000_records_median": search / records * 1e6,
            "search_over_plain_median": statistics.median(ratios), "search_over_plain_spread": [ratios[0], ratios[-1]]}

if __name__ == "__main__":
    main()
