"""The continuous validation's ledger (mirrorstack.spark.stream_match): matching by identity in
either order, the window's verdicts, the RPO, and a ledger that goes on after a round trip
through its JSON (the state store) exactly as one that never stopped."""
from __future__ import annotations

import itertools

from mirrorstack.spark.stream_match import LATENCY_BUCKETS, MISSING_SAMPLES, Ledger

T0 = 1_700_000_000.0  # seconds


def rec(n: int, src: int = 0, ts: float = T0) -> tuple[int, int, int, int, int]:
    """(src, offset, ts ms, h1, h2) of record n."""
    return src, n, int(ts * 1000) + n, n * 7, n * 13


_copies = itertools.count(1000)


def copy(r):
    """A copy of `r` at the target partition's next offset (a target partition's offsets only grow)."""
    return (-1, next(_copies), *r[2:])


def test_a_copy_read_before_or_after_its_source_record_is_confirmed_with_its_latency():
    ledger = Ledger()
    ledger.take([rec(1)], [], now=T0 + 1)
    ledger.take([], [copy(rec(1)), copy(rec(2))], now=T0 + 2.5)  # 2's copy before its source
    ledger.take([rec(2)], [], now=T0 + 3)
    figures = ledger.report(T0 + 3)
    assert (figures["confirmed"], figures["missing"], figures["extras"], figures["rpo_records"]) == (2, 0, 0, 0)
    # 1: read 2.5 s after its timestamp; 2: its copy was read at T0 + 2.5 too
    assert abs(figures["latency_sum"] - (2.499 + 2.498)) < 1e-6
    assert figures["buckets"][LATENCY_BUCKETS.index(2.5)] == 2 and sum(figures["buckets"]) == 2
    assert abs(figures["latency_max"] - 2.499) < 1e-6 and ledger.report(T0 + 3)["latency_max"] == 0.0


def test_the_window_names_a_missing_record_and_counts_extras_and_duplicates():
    ledger = Ledger()
    ledger.take([rec(1), rec(2, src=1), rec(3)], [copy(rec(1)), copy(rec(1)), copy(rec(9))], now=T0)
    waiting, age = ledger.rpo(T0 + 4)
    assert waiting == 2 and abs(age - 3.998) < 1e-6  # 2 and 3 wait; the older is 2 (by timestamp)
    ledger.expire(T0 + 5, window=10)
    assert ledger.report(T0 + 5)["missing"] == 0
    ledger.take([], [copy(rec(3))], now=T0 + 6)
    ledger.expire(T0 + 11, window=10)  # 2 was read at T0: 11 s ago
    figures = ledger.report(T0 + 11)
    assert (figures["confirmed"], figures["missing"], figures["duplicates"], figures["extras"]) == (2, 1, 1, 1)
    assert figures["missing_samples"] == [[1, 2, int(T0 * 1000) + 2]]  # source topic 1, offset 2
    assert figures["rpo_records"] == 0 and figures["rpo_seconds"] == 0.0


def test_identical_source_records_each_need_a_copy():
    twin = rec(5)
    ledger = Ledger()
    ledger.take([twin, (0, 6, *twin[2:])], [copy(twin)], now=T0)
    assert ledger.rpo(T0)[0] == 1
    ledger.take([], [copy(twin)], now=T0 + 1)
    assert ledger.report(T0 + 1)["confirmed"] == 2 and ledger.rpo(T0 + 1)[0] == 0


def test_what_it_holds_is_bounded_by_the_window():
    ledger = Ledger()
    for second in range(100):
        records = [rec(second * 10 + i, ts=T0 + second) for i in range(10)]
        ledger.take(records, [copy(r) for r in records], now=T0 + second)
        ledger.expire(T0 + second, window=5)
    assert len(ledger.confirmed_keys) <= 60 and not ledger.pending and not ledger.early
    assert ledger.report(T0 + 100)["confirmed"] == 1000


def test_missing_samples_keep_the_last_ones():
    ledger = Ledger()
    ledger.take([rec(n) for n in range(MISSING_SAMPLES + 5)], [], now=T0)
    ledger.expire(T0 + 100, window=10)
    samples = ledger.report(T0 + 100)["missing_samples"]
    assert len(samples) == MISSING_SAMPLES and samples[-1][1] == MISSING_SAMPLES + 4


def test_a_ledger_read_back_from_its_json_goes_on_as_if_it_never_stopped():
    steps = [([rec(1), rec(2)], [copy(rec(1))], T0), ([], [copy(rec(2)), copy(rec(2))], T0 + 1),
             ([rec(3)], [], T0 + 2), ([], [], T0 + 30)]
    kept, restored = Ledger(), Ledger()
    for source, target, now in steps:
        for ledger in (kept, restored):
            ledger.take(source, target, now)
            ledger.seen(now)
            ledger.expire(now, window=10)
        restored = Ledger.from_json(restored.to_json())
    assert kept.report(T0 + 30) == restored.report(T0 + 30)
    assert kept.totals == {"confirmed": 2, "missing": 1, "duplicates": 1, "extras": 0}


def test_a_copy_landed_in_the_middle_of_its_batch_interval_so_a_late_batch_does_not_bias_the_mean():
    """Batches every 6 s (a loaded machine), a record every 0.25 s, each copy landing 0.5 s after its
    record: each latency is within half the interval, the mean within a second (by the batch alone,
    about 3.5 s)."""
    records = [rec(n, ts=T0 + 0.25 * n - 0.001 * n) for n in range(240)]  # rec() adds n ms
    ledger, taken = Ledger(), 0
    ledger.seen(T0)
    for batch in range(1, 12):
        now = T0 + 6 * batch
        landed = [r for r in records[taken:] if r[2] / 1000 + 0.5 <= now]
        taken += len(landed)
        ledger.take(landed, [copy(r) for r in landed], now=now)
        ledger.seen(now)
    figures = ledger.report(T0 + 66)
    mean = figures["latency_sum"] / figures["confirmed"]
    assert figures["confirmed"] == 240 and abs(mean - 0.5) < 1, mean
    assert figures["latency_max"] <= 0.5 + 3


def test_with_no_batch_before_a_copy_counts_as_landed_when_read():
    ledger = Ledger()
    ledger.take([rec(1)], [copy(rec(1))], now=T0 + 4)
    assert abs(ledger.report(T0 + 4)["latency_sum"] - 3.999) < 1e-6


def test_a_fresh_ledger_times_its_first_copies_as_if_its_batch_before_ran_one_trigger_earlier():
    """A topic made while the validator runs: the batch that first reads it times its copies within
    the trigger, not as late as the batch itself (which on a loaded machine runs seconds behind)."""
    ledger = Ledger.fresh(T0 + 4, trigger=1)
    ledger.take([rec(1)], [copy(rec(1))], now=T0 + 4)
    assert abs(ledger.report(T0 + 4)["latency_sum"] - (3.5 - 0.001)) < 1e-6
    back = Ledger.from_json(Ledger.fresh(T0 + 4, trigger=1).to_json())
    assert back.seen_at == T0 + 3


def test_records_read_again_from_a_partitions_start_are_not_counted_again():
    """Spark's Kafka source reads a partition from its start again when a broker that had just restarted
    answered without it; those records were counted already. A topic made again (offsets from 0, newer
    records) counts."""
    ledger = Ledger()
    first = [rec(n) for n in range(5)]
    copies = [copy(r) for r in first]
    ledger.take(first, copies, now=T0 + 1)
    ledger.take(first, copies, now=T0 + 2)  # both sides read again from their start
    ledger.expire(T0 + 100, window=10)
    figures = ledger.report(T0 + 100)
    assert (figures["confirmed"], figures["missing"], figures["duplicates"], figures["extras"]) == (5, 0, 0, 0)
    made_again = [rec(n, ts=T0 + 50) for n in range(2)]  # offsets 0 and 1 again, but newer
    ledger.take(made_again, [], now=T0 + 101)
    assert ledger.rpo(T0 + 101)[0] == 2
    again = Ledger.from_json(ledger.to_json())  # what it read survives a restart
    again.take(first, [], now=T0 + 102)
    assert again.rpo(T0 + 102)[0] == 2
