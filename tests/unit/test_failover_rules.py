"""The switch procedure's pure parts (components/failover/rules.py): gate,
translation, report arithmetic, rendering."""
from __future__ import annotations

from mirrorstack.failover import rules as f
from mirrorstack.mm2.flows import FlowDescription


def _flow(source="primary", target="standby", **kw) -> FlowDescription:
    return FlowDescription.from_dict({
        "name": f"{source}->{target}", "source": source, "target": target, "topics": [".*"],
        "topics_exclude": [], "groups": [".*"], "groups_exclude": [], "replication_policy": "default",
        "separator": ".", "sync_topic_configs": True, "checkpoints": True, **kw})


FORWARD, REVERSE = _flow(), _flow("standby", "primary")
GATE = dict(f.DEFAULT_GATE)


def test_groups_are_the_flows_narrowed_by_the_failover_section():
    groups = ["billing", "orders-app", "connect-x", "console-consumer-1", "__internal"]
    assert f.switch_groups(FORWARD, groups, None) == ["billing", "orders-app"]  # MM2's excludes apply
    assert f.switch_groups(FORWARD, groups, ["orders-.*"]) == ["orders-app"]
    assert f.switch_groups(_flow(groups_exclude=["billing"]), groups, None) == ["orders-app"]
    assert f.switch_groups(FORWARD, groups, ["bill"]) == []  # full match, as MM2


def test_topics_copied_by_the_flow_and_topics_that_came_from_the_other_side():
    assert f.flow_topic(FORWARD, "orders") and not f.flow_topic(FORWARD, "standby.orders")  # a cycle
    assert f.back_topic_original(FORWARD, "primary.orders") == "orders"  # on standby, copied by the forward flow
    assert f.back_topic_original(REVERSE, "standby.orders") == "orders"
    assert f.back_topic_original(REVERSE, "orders") is None
    assert f.back_topic_original(None, "standby.orders") is None
    assert f.back_topic_original(_flow("standby", "primary", topics=["payments"]), "standby.orders") is None
    assert f.original_topic(FORWARD, "primary.orders") == "orders"
    assert f.original_topic(FORWARD, "orders") is None


def test_in_flight_counts_what_the_source_connector_has_not_copied():
    assert f.in_flight(end=100, start=0, committed=99) == 0  # the last record copied is offset 99
    assert f.in_flight(end=100, start=0, committed=89) == 10
    assert f.in_flight(end=100, start=40, committed=None) == 60  # nothing copied yet
    assert f.in_flight(end=100, start=95, committed=10) == 5  # retention took the rest
    assert f.in_flight(end=0, start=0, committed=None) == 0


def test_checkpoint_translation_is_mm2s():
    syncs = [(0, 0), (11, 11), (22, 25)]
    assert f.upstream_to_downstream(syncs, 22) == 25  # exactly a sync
    assert f.upstream_to_downstream(syncs, 30) == 26  # past it: one after (conservative)
    assert f.upstream_to_downstream(syncs, 5) == 1
    assert f.upstream_to_downstream([(10, 3)], 5) is None
    assert f.upstream_to_downstream(None, 5) is None


def test_a_checkpoint_is_fresh_when_made_from_the_committed_offset_or_translating_to_the_same_place():
    syncs = [(0, 0), (50, 50)]
    assert f.checkpoint_fresh(40, (40, 1), syncs)
    assert f.checkpoint_fresh(45, (40, 1), syncs)  # MM2 emits no new checkpoint: the translation did not move
    assert not f.checkpoint_fresh(55, (40, 1), syncs)  # it would translate to 51 now
    assert not f.checkpoint_fresh(45, (40, 1), None)  # no syncs to tell
    assert not f.checkpoint_fresh(40, (45, 1), syncs)  # a checkpoint ahead of the group: rewound since
    assert not f.checkpoint_fresh(40, None, syncs)


def _figures(in_flight=None, stale=None, members_from=None, members_to=None):
    return f.gate_figures(in_flight or {("orders", 0): 0, ("orders", 1): 0}, stale or {}, {"g1": 2},
                          members_from or {}, members_to or {})


def test_a_gate_passes_when_every_check_does():
    figures = _figures()
    assert f.gate_problems(figures, GATE, "primary", "standby") == []
    assert figures["in_flight"] == 0 and figures["partitions"] == 2 and figures["groups"] == ["g1"]


def test_a_gate_names_each_failing_check():
    figures = _figures(in_flight={("orders", 0): 7, ("orders", 1): 0, ("payments", 0): 3},
                       stale={"g1": [{"topic": "orders", "partition": 1, "committed": 40, "checkpoint": None}],
                              "g2": []},
                       members_from={"g1": 2, "g2": 0}, members_to={"g3": 1})
    problems = f.gate_problems(figures, GATE, "primary", "standby")
    assert len(problems) == 4, problems
    assert problems[0].startswith("in flight: 10 record(s) on 2 of 3 partition(s) of primary not yet replicated "
                                  "to standby (gate.in_flight allows 0): orders 7 on 1 partition(s), payments 3")
    assert problems[1].startswith("stale checkpoints: group g1: 1 partition(s) without a checkpoint of its "
                                  "committed offset (orders/1 committed 40, checkpoint none)")
    assert problems[2].startswith("active consumers on primary: g1 (2 member(s)); stop them first")
    assert problems[3].startswith("consumers already on standby: g3 (1 member(s))")
    message = f.gate_failed_message(problems, 120.4)
    assert message.splitlines()[0] == "the failover gate did not pass within 120s:"
    assert message.endswith("\nnothing was changed")


def test_gate_tolerance_and_overrides():
    figures = _figures(in_flight={("orders", 0): 5}, members_from={"g1": 1}, members_to={"g2": 1})
    gate = {**GATE, "in_flight": 5, "allow_active_consumers": True}
    # members on the side switched to are never allowed: their offsets cannot be written
    assert [p.split(":")[0] for p in f.gate_problems(figures, gate, "primary", "standby")] == [
        "consumers already on standby"]


def test_back_translation_goes_through_the_other_flows_offset_syncs():
    syncs = [(100, 0), (110, 10), (130, 20)]  # a gap upstream at 120..129 (e.g. purged)
    assert f.downstream_to_upstream(syncs, 10) == (110, 110)  # exactly a sync
    assert f.downstream_to_upstream(syncs, 15) == (111, 115)  # between: one after the sync, exact 115
    assert f.downstream_to_upstream(syncs, 25) == (131, 135)
    assert f.downstream_to_upstream([(5, 3)], 2) is None


def test_planned_report_arithmetic():
    entry = f.partition_entry("orders", "primary.orders", 0, old=40, new=31, exact=38)
    assert (entry["reread"], entry["lost"], entry["reread_at_most"]) == (7, 0, None)
    assert f.partition_entry("orders", "primary.orders", 0, 40, 39, exact=38)["lost"] == 1  # never from MM2
    unplanned = f.partition_entry("orders", "primary.orders", 0, old=40, new=31, end_to=50)
    assert (unplanned["reread"], unplanned["lost"], unplanned["reread_at_most"]) == (None, None, 19)


def test_translate_planned_moves_flow_topics_by_checkpoint_and_back_topics_by_offset_sync():
    commits = {("orders", 0): 40, ("orders", 1): 10, ("standby.orders", 0): 15, ("local-only", 0): 3,
               ("orders", 2): 5}
    checkpoints = {("g1", "primary.orders", 0): (40, 31), ("g1", "primary.orders", 1): (10, 10),
                   ("g2", "primary.orders", 2): (5, 5)}
    back_syncs = {("orders", 0): [(100, 0), (110, 10)]}
    ends_from = {("orders", 0): 50, ("orders", 1): 10, ("orders", 2): 5, ("standby.orders", 0): 20}
    ends_to = {("primary.orders", 0): 48, ("primary.orders", 1): 10}
    entry, notes = f.translate_planned("g1", commits, _flow(topics=["orders"]), REVERSE, checkpoints, back_syncs,
                                       ends_from, ends_to)
    rows = {(r["to_topic"], r["partition"]): r for r in entry["partitions"]}
    assert sorted(rows) == [("orders", 0), ("primary.orders", 0), ("primary.orders", 1)]
    # exact on `to`: 48 - (50 - 40) = 38; moved to 31: 7 re-read
    assert (rows[("primary.orders", 0)]["new"], rows[("primary.orders", 0)]["reread"]) == (31, 7)
    assert (rows[("orders", 0)]["old"], rows[("orders", 0)]["new"], rows[("orders", 0)]["reread"]) == (15, 111, 4)
    assert (entry["reread"], entry["lost"], entry["reread_at_most"]) == (11, 0, None)
    assert notes == ["g1: orders/2 has no checkpoint: not moved (its position on primary.orders is unknown)",
                     "g1: local-only not mirrored by primary->standby: not moved"]


def test_a_group_at_the_end_of_an_empty_partition_moves_to_the_copys_end():
    entry, notes = f.translate_planned("g1", {("orders", 3): 0}, FORWARD, None, {}, {}, {("orders", 3): 0},
                                       {("primary.orders", 3): 0})
    assert [(r["new"], r["reread"], r["lost"]) for r in entry["partitions"]] == [(0, 0, 0)] and notes == []


def test_translate_planned_reports_a_back_topic_without_sync_and_never_guesses():
    entry, notes = f.translate_planned("g1", {("standby.orders", 0): 15}, FORWARD, REVERSE, {}, {}, {}, {})
    assert entry == {"reread": None, "reread_at_most": None, "lost": None, "partitions": []}
    assert notes == ["g1: standby.orders/0 at 15 has no offset sync of standby->primary at or below it: not moved "
                     "(its position on orders is unknown)"]


def test_translate_unplanned_from_the_last_checkpoints():
    checkpoints = {("g1", "primary.orders", 0): (40, 31), ("g1", "primary.orders", 1): (12, 9),
                   ("g2", "primary.orders", 0): (7, 5), ("g1", "orders", 0): (3, 3)}
    assert f.checkpointed_groups(FORWARD, checkpoints, None) == ["g1", "g2"]
    assert f.checkpointed_groups(FORWARD, checkpoints, ["g2"]) == ["g2"]
    entry = f.translate_unplanned("g1", FORWARD, checkpoints, {("primary.orders", 0): 50, ("primary.orders", 1): 9})
    assert [(r["old"], r["new"], r["reread_at_most"], r["lost"]) for r in entry["partitions"]] == [
        (40, 31, 19, None), (12, 9, 0, None)]
    assert (entry["reread"], entry["reread_at_most"], entry["lost"]) == (None, 19, None)
    assert f.lost_note("primary") == "records not replicated before the loss cannot be counted until primary returns"


def test_render_report_is_one_line_per_group_and_partition():
    planned = {"from": "primary", "to": "standby", "mode": "planned", "at": "2026-11-24T23:40:00+00:00",
               "gate": {**_figures(), "waited_seconds": 4.2}, "notes": ["g1: local-only not mirrored"],
               "groups": {"g1": f.group_entry([f.partition_entry("orders", "primary.orders", 0, 40, 31, exact=38)]),
                          "billing-app": f.group_entry([])}}
    text = f.render_report(planned)
    assert text.splitlines() == [
        "planned switch primary -> standby at 2026-11-24T23:40:00+00:00",
        "  gate: passed after 4s: 0 in flight, 1 group(s) with fresh checkpoints on 2 partition(s)",
        "  billing-app  0 partition(s)  re-read ?  lost ?",
        "  g1           1 partition(s)  re-read 7  lost 0",
        "    orders/0        40 -> primary.orders 31        re-read 7, lost 0",
        "  note: g1: local-only not mirrored",
    ]
    unplanned = {**planned, "mode": "unplanned", "gate": None, "notes": [f.lost_note("primary")],
                 "groups": {"g1": f.group_entry([f.partition_entry("orders", "primary.orders", 0, 40, 31, end_to=50)])}}
    lines = f.render_report(unplanned).splitlines()
    # through Pulumi's state: numbers as floats, nulls dropped
    stored = {**planned, "groups": {"g1": {"reread": 7.0, "lost": 0.0, "partitions": [
        {"from_topic": "orders", "to_topic": "primary.orders", "partition": 0.0, "old": 40.0, "new": 31.0,
         "reread": 7.0, "lost": 0.0}]}}}
    assert f.render_report(stored).splitlines()[2:4] == [
        "  g1     1 partition(s)  re-read 7  lost 0", "    orders/0        40 -> primary.orders 31        re-read 7, lost 0"]
    assert lines[1] == "  gate: none (unplanned)"
    assert lines[2] == "  g1     1 partition(s)  re-read at most 19  lost ?"
    assert lines[-1].endswith("cannot be counted until primary returns")


def test_render_report_counts_the_partitions_it_does_not_list():
    """Issue 46: `app-wide 25 partition(s)` printed one row and hid 24 without a word."""
    rows = [f.partition_entry("orders", "primary.orders", p, 40, 40, exact=40) for p in range(24)]
    rows.append(f.partition_entry("orders", "primary.orders", 24, 40, 31, exact=38))
    report = {"from": "primary", "to": "standby", "mode": "planned", "at": "2026-11-24T23:40:00+00:00",
              "gate": None, "groups": {"app-wide": f.group_entry(rows)}}
    lines = f.render_report(report).splitlines()
    assert lines[2].startswith("  app-wide  25 partition(s)")
    assert lines[3].startswith("    orders/24") and "re-read 7" in lines[3]
    assert lines[4].split() == ["...", "24", "more", "partition(s)", "moved", "exactly", "(re-read", "0,", "lost", "0)"]
    every = {**report, "groups": {"app-wide": f.group_entry(rows[:24])}}
    assert f.render_report(every).splitlines()[3] == "    every partition moved exactly (re-read 0, lost 0)"


def test_an_exact_move_keeps_mm2s_translation_beside_it_in_the_report():
    translated = f.partition_entry("orders", "primary.orders", 0, old=40, new=31, exact=38)
    exact = f.exact_row(translated, 38, "identity", 7)
    assert (exact["new"], exact["reread"], exact["lost"], exact["translated"], exact["translated_reread"]) == (
        38, 0, 0, 31, 7)
    kept = f.translated_row(f.partition_entry("orders", "primary.orders", 1, old=5, new=2, exact=4))
    assert (kept["new"], kept["reread"], kept["exact_by"], kept["translated"]) == (2, 2, "translation", 2)
    entry = f.group_entry([exact, kept])
    assert (entry["reread"], entry["lost"], entry["translated_reread"]) == (2, 0, 9)
    # a report of before: no translated figure to total
    assert "translated_reread" not in f.group_entry([translated])
    report = {"from": "primary", "to": "standby", "mode": "planned", "at": "2026-12-02T13:00:00+00:00",
              "gate": None, "groups": {"g1": entry}}
    lines = f.render_report(report).splitlines()
    assert lines[2] == "  g1     2 partition(s)  re-read 2  lost 0  (MM2's translation alone: re-read 9)"
    assert lines[3].endswith("re-read 0, lost 0, by identity (MM2: 31, re-read 7)"), lines[3]
    assert lines[4].endswith("re-read 2, lost 0, MM2's translation (no copy found: see the notes)"), lines[4]


def test_a_returned_count_says_per_partition_what_was_reread_and_lost_and_why():
    base = f.partition_entry("orders", "primary.orders", 0, old=40, new=31, end_to=50)
    counted = [f.returned_row(base, 44, 35, "identity", 4, 0),
               f.returned_row({**base, "partition": 1}, 40, None, "not copied", 6, 3)]
    report = {"from": "primary", "to": "standby", "mode": "returned", "at": "2026-12-02T14:00:00+00:00",
              "notes": [], "groups": {"g1": f.group_entry(counted)}}
    lines = f.render_report(report).splitlines()
    assert lines[0].startswith("after the unplanned switch primary -> standby: primary answers again"), lines
    assert lines[1] == "  g1     2 partition(s)  re-read 10  lost 3", lines
    assert lines[2].endswith("re-read 4, lost 0, by identity (its next record on the side left at 44)"), lines
    assert lines[3].endswith("re-read 6, lost 3, its next record is not on the copy past its new offset"), lines
