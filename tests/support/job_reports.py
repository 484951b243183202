"""A validation job's report, as spark/ writes it, for tests of how the
platforms read it back (one target topic of one flow, 27 duplicates)."""
from __future__ import annotations


def report(failures=("central.orders on c:9092: duplicates 27 > tolerance 0",)) -> dict:
    group = {"topic": "orders", "target_bootstrap": "c:9092", "sources": [{"flow": "us->central", "topic": "orders"}],
             "source_records": 650, "target_records": 677, "matched": 650, "missing": 0, "in_flight": 0,
             "duplicates": 27, "extras": 0, "out_of_order": 0, "partitions_ok": True, "timed_out": False,
             "failover": [], "samples": {"duplicates": [{"topic": "orders", "partition": 0, "source_offset": 3,
                                                         "target_offset": 9}]}, "failures": list(failures)}
    flow = {"name": "us->central", "topics": [{"topic": "orders", "source_records": 650, "matched": 650, "missing": 0,
                                              "in_flight": 0, "duplicates": 27, "out_of_order": 0}]}
    return {"passed": not failures, "status": "failed" if failures else "passed", "groups": [group],
            "flows": [flow], "failures": list(failures), "duration_seconds": 41.0, "records_checked": 650,
            "topics_checked": 1}
