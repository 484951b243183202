"""The switch procedure's pure parts (components/failover/procedure.py does the I/O):
the gate from observed figures, offset translation, the report's arithmetic
and its rendering. Plain data in and out: offsets are ints, syncs are
(upstream, downstream) pairs in the order MM2 wrote them, checkpoints are
(upstream, downstream) pairs keyed by (group, topic on `to`, partition).

Translation follows MM2 (KAFKA-12468): conservative, a moved group may re-read
records, never skip one. Where an input is missing nothing is guessed: the
partition is left out of the move and a note says why.
"""
from __future__ import annotations

import re

from mirrorstack.mm2.flows import FlowDescription

GATE_POLL_SECONDS = 2  # how often the gate looks again while it waits
PROGRESS_SECONDS = 10  # a progress line this often while the gate waits
DRILL_PREFIX = "mirrorstack-drill."  # a drill's copies of the groups: mirrorstack-drill.<run>.<group>
DEFAULT_GATE = {"in_flight": 0, "wait_seconds": 120.0, "allow_active_consumers": False}
# A planned switch's positions by record identity (Switch.move_exactly), and how far past MM2's
# translated offset it searches for a copy (records read per group and partition at most).
DEFAULT_EXACT = {"enabled": True, "search_records": 100_000}

Key = tuple[str, int]  # (topic, partition)


def switch_groups(flow: FlowDescription, groups: list[str], narrowed: list[str] | None) -> list[str]:
    """The groups the switch moves: those the flow checkpoints, narrowed by the
    failover section's own `groups` regexes (full match, as MM2's)."""
    chosen = flow.selection().selected_groups(groups)
    if narrowed is None:
        return chosen
    return [g for g in chosen if any(re.fullmatch(p, g) for p in narrowed)]


def flow_topic(flow: FlowDescription, topic: str) -> bool:
    """`topic` on `from` is one the flow copies to `to`."""
    return flow.selection().selects(topic)


def back_topic_original(back_flow: FlowDescription | None, topic: str) -> str | None:
    """For a topic on `from` that `back_flow` copied there from `to`
    (`<to><sep>t`, default policy), the original `t` on `to`; else None."""
    if back_flow is None or back_flow.replication_policy != "default":
        return None
    prefix = f"{back_flow.source}{back_flow.separator}"
    if not topic.startswith(prefix):
        return None
    original = topic[len(prefix):]
    return original if back_flow.selection().selects(original) else None


def original_topic(flow: FlowDescription, remote: str) -> str | None:
    """The topic on `from` whose copy on `to` is `remote`, if the flow copies it."""
    prefix = f"{flow.source}{flow.separator}" if flow.replication_policy == "default" else ""
    if not remote.startswith(prefix):
        return None
    topic = remote[len(prefix):]
    return topic if flow_topic(flow, topic) and flow.selection().remote(topic) == remote else None


# -- the gate -----------------------------------------------------------------

def in_flight(end: int, start: int, committed: int | None) -> int:
    """Records of a source partition the source connector has not copied yet:
    its committed source offset is the last record copied (None: none yet)."""
    next_to_copy = committed + 1 if committed is not None else start
    return max(0, end - max(next_to_copy, start))


def _latest_sync(syncs: list[tuple[int, int]] | None, below) -> tuple[int, int] | None:
    """The last (upstream, downstream) sync MM2 wrote that `below(u, d)` accepts."""
    return next((sync for sync in reversed(syncs or []) if below(*sync)), None)


def upstream_to_downstream(syncs: list[tuple[int, int]] | None, upstream: int) -> int | None:
    """MM2's checkpoint translation (OffsetSyncStore.translateDownstream): the
    latest sync with u <= upstream gives d, or d + 1 when u < upstream."""
    found = _latest_sync(syncs, lambda u, d: u <= upstream)
    if found is None:
        return None
    u, d = found
    return d if u == upstream else d + 1


def checkpoint_fresh(committed: int, checkpoint: tuple[int, int] | None,
                     syncs: list[tuple[int, int]] | None) -> bool:
    """The latest checkpoint stands for the group's committed offset: it was
    made from it, or (MM2 emits a checkpoint only when the translated offset
    moves) the offset syncs translate the committed offset to the same place."""
    if checkpoint is None:
        return False
    upstream, downstream = checkpoint
    return upstream == committed or (upstream < committed
                                     and upstream_to_downstream(syncs, committed) == downstream)


def gate_figures(in_flight_by: dict[Key, int], stale: dict[str, list[dict]], checked: dict[str, int],
                 members_from: dict[str, int], members_to: dict[str, int]) -> dict:
    """The gate's observations as the report carries them."""
    return {
        "in_flight": sum(in_flight_by.values()),
        "in_flight_partitions": sorted([t, p, n] for (t, p), n in in_flight_by.items() if n > 0),
        "partitions": len(in_flight_by),
        "groups": sorted(checked), "checkpointed_partitions": sum(checked.values()),
        "stale": {g: rows for g, rows in sorted(stale.items()) if rows},
        "members_from": {g: n for g, n in sorted(members_from.items()) if n},
        "members_to": {g: n for g, n in sorted(members_to.items()) if n},
    }


def gate_problems(figures: dict, gate: dict, from_alias: str, to_alias: str) -> list[str]:
    """Every failing check, one line each; [] when the gate passes."""
    problems = []
    moving = figures["in_flight_partitions"]
    if figures["in_flight"] > gate["in_flight"]:
        topics: dict[str, list[int]] = {}
        for topic, _, n in moving:
            topics.setdefault(topic, []).append(n)
        detail = ", ".join(f"{t} {sum(ns)} on {len(ns)} partition(s)" for t, ns in sorted(topics.items()))
        problems.append(f"in flight: {figures['in_flight']} record(s) on {len(moving)} of {figures['partitions']} "
                        f"partition(s) of {from_alias} not yet replicated to {to_alias} (gate.in_flight allows "
                        f"{gate['in_flight']}): {detail}; wait for replication to catch up, or raise gate.in_flight")
    for group, rows in figures["stale"].items():
        shown = "; ".join(f"{r['topic']}/{r['partition']} committed {r['committed']}, checkpoint "
                          + (f"{r['checkpoint']}" if r["checkpoint"] is not None else "none") for r in rows[:3])
        more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
        problems.append(f"stale checkpoints: group {group}: {len(rows)} partition(s) without a checkpoint of its "
                        f"committed offset ({shown}{more}); check the checkpoint connector runs, or wait longer "
                        "(gate.wait_seconds)")
    if figures["members_from"] and not gate["allow_active_consumers"]:
        active = ", ".join(f"{g} ({n} member(s))" for g, n in figures["members_from"].items())
        problems.append(f"active consumers on {from_alias}: {active}; stop them first, or set "
                        "gate.allow_active_consumers: true (what they read after the switch is read again)")
    problems += members_to_problems(figures["members_to"], to_alias)
    return problems


def members_to_problems(members_to: dict[str, int], to_alias: str) -> list[str]:
    """Never allowed: Kafka refuses offsets written into a group with members."""
    if not any(members_to.values()):
        return []
    active = ", ".join(f"{g} ({n} member(s))" for g, n in sorted(members_to.items()) if n)
    return [f"consumers already on {to_alias}: {active}; their offsets cannot be written while they run: "
            "stop them (no override)"]


def gate_failed_message(problems: list[str], waited: float) -> str:
    return "\n".join(["the failover gate did not pass" + (f" within {waited:.0f}s" if waited else "") + ":",
                      *[f"  {p}" for p in problems], "nothing was changed"])


# -- translation and the report's arithmetic ---------------------------------

def downstream_to_upstream(syncs: list[tuple[int, int]] | None, position: int) -> tuple[int, int] | None:
    """For a group at `position` on a copy, through the copying flow's offset
    syncs: the latest sync (u, d) with d <= position gives u when d == position,
    else u + 1 (MM2's own conservative rule). Returns (translated, exact
    equivalent u + position - d: records between syncs are copied one to one,
    MM2 writes a sync whenever they are not) or None without such a sync."""
    found = _latest_sync(syncs, lambda u, d: d <= position)
    if found is None:
        return None
    u, d = found
    return (u if d == position else u + 1), u + (position - d)


def partition_entry(from_topic: str, to_topic: str, partition: int, old: int | None, new: int,
                    exact: int | None = None, end_to: int | None = None) -> dict:
    """One partition of the report. `exact` (planned): the offset on `to` of the
    record the group would have read next on `from`; `end_to` (unplanned): how
    far the group might have read there at most."""
    entry = {"from_topic": from_topic, "to_topic": to_topic, "partition": partition, "old": old, "new": new,
             "reread": None, "reread_at_most": None, "lost": None}
    if exact is not None:
        entry["reread"], entry["lost"] = max(0, exact - new), max(0, new - exact)
    elif end_to is not None:
        entry["reread_at_most"] = max(0, end_to - new)
    return entry


def exact_row(row: dict, exact: int, how: str, translated_reread: int) -> dict:
    """A planned move's partition set to `exact`: the copy of the first record its group had not read on
    `from`, found by identity (`how` "identity"), or the copy's end when it had read everything ("end").
    Nothing is re-read or lost; MM2's translated offset stays as `translated`, with the records a group
    there would re-read (counted while searching)."""
    return {**row, "new": exact, "reread": 0, "lost": 0, "exact_by": how, "translated": row["new"],
            "translated_reread": translated_reread}


def translated_row(row: dict) -> dict:
    """A planned move's partition that keeps MM2's translated offset (no copy found: the note says why)."""
    return {**row, "exact_by": "translation", "translated": row["new"], "translated_reread": row["reread"]}


def returned_row(row: dict, committed: int | None, exact: int | None, how: str, reread: int, lost: int) -> dict:
    """A partition of an unplanned switch counted once the side it left is back: `committed`, the group's
    offset there; `exact`, the copy of its first unread record on the side joined at or past where the
    switch put it (None, `how` "not copied": skipped, or never copied before the loss); `reread`, the
    records it reads again from there; `lost`, its unread records not on the copy from there."""
    return {**row, "committed": committed, "exact": exact, "exact_by": how, "reread": reread, "lost": lost,
            "reread_at_most": None}


def _total(rows: list[dict], key: str) -> int | None:
    values = [r[key] for r in rows]
    return None if not values or any(v is None for v in values) else sum(values)


def group_entry(partitions: list[dict]) -> dict:
    partitions = sorted(partitions, key=lambda r: (r["to_topic"], r["partition"]))
    entry = {"reread": _total(partitions, "reread"), "reread_at_most": _total(partitions, "reread_at_most"),
             "lost": _total(partitions, "lost"), "partitions": partitions}
    if partitions and all("translated" in r for r in partitions):  # moved exactly: what MM2's alone re-reads
        entry["translated_reread"] = _total(partitions, "translated_reread")
    return entry


def translate_planned(group: str, commits: dict[Key, int], flow: FlowDescription, back_flow: FlowDescription | None,
                      checkpoints: dict[tuple[str, str, int], tuple[int, int]],
                      back_syncs: dict[Key, list[tuple[int, int]]],
                      ends_from: dict[Key, int], ends_to: dict[Key, int]) -> tuple[dict, list[str]]:
    """A group's move with `from` readable: its committed offsets there, the
    flow's latest checkpoints (topics the flow copies) and `back_flow`'s offset
    syncs (topics that came from `to`). Returns (group entry, notes)."""
    rows, notes, unmirrored = [], [], set()
    for (topic, p), old in sorted(commits.items()):
        end_from = ends_from.get((topic, p))
        if flow_topic(flow, topic):
            remote = flow.selection().remote(topic)
            checkpoint = checkpoints.get((group, remote, p))
            end_to = ends_to.get((remote, p))
            if checkpoint is None and old == end_from and end_to is not None:
                # At the end of a partition with nothing to read (MM2 checkpoints no empty partition):
                # with nothing in flight, its end is the copy's end.
                rows.append(partition_entry(topic, remote, p, old, end_to, exact=end_to))
                continue
            if checkpoint is None:
                notes.append(f"{group}: {topic}/{p} has no checkpoint: not moved (its position on {remote} "
                             "is unknown)")
                continue
            exact = end_to - (end_from - old) if end_to is not None and end_from is not None else None
            rows.append(partition_entry(topic, remote, p, old, checkpoint[1], exact=exact))
        elif (original := back_topic_original(back_flow, topic)) is not None:
            found = downstream_to_upstream(back_syncs.get((original, p)), old)
            if found is None:
                notes.append(f"{group}: {topic}/{p} at {old} has no offset sync of {back_flow.name} at or "
                             f"below it: not moved (its position on {original} is unknown)")
                continue
            rows.append(partition_entry(topic, original, p, old, found[0], exact=found[1]))
        else:
            unmirrored.add(topic)
    if unmirrored:
        notes.append(f"{group}: {', '.join(sorted(unmirrored))} not mirrored by {flow.name}: not moved")
    return group_entry(rows), notes


def translate_unplanned(group: str, flow: FlowDescription, checkpoints: dict[tuple[str, str, int], tuple[int, int]],
                        ends_to: dict[Key, int]) -> dict:
    """A group's move from the last checkpoints alone (`from` lost): old is the
    last committed offset MM2 saw, re-reads are bounded by what `to` holds past
    the translated offset, losses cannot be counted."""
    rows = []
    for (g, remote, p), (upstream, downstream) in sorted(checkpoints.items()):
        topic = original_topic(flow, remote) if g == group else None
        if topic is not None:
            rows.append(partition_entry(topic, remote, p, upstream, downstream, end_to=ends_to.get((remote, p))))
    return group_entry(rows)


def checkpointed_groups(flow: FlowDescription, checkpoints: dict[tuple[str, str, int], tuple[int, int]],
                        narrowed: list[str] | None) -> list[str]:
    """The groups an unplanned switch moves: those with checkpoints of the flow's topics."""
    seen = {g for g, remote, _ in checkpoints if original_topic(flow, remote) is not None}
    return switch_groups(flow, sorted(seen), narrowed)


def lost_note(from_alias: str) -> str:
    return f"records not replicated before the loss cannot be counted until {from_alias} returns"


# -- the report --------------------------------------------------------------

def figure(value) -> str:
    """A count or offset; Pulumi's state turns numbers into floats."""
    if value is None:
        return "?"
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _how(row: dict) -> str:
    """How a partition's position was found, as its report line ends."""
    by = row.get("exact_by")
    if by == "translation":
        return ", MM2's translation (no copy found: see the notes)"
    if by == "not copied":
        return ", its next record is not on the copy past its new offset"
    if by not in ("identity", "end"):
        return ""
    if row.get("translated") is None:  # counted after an unplanned switch
        return f", by identity (its next record on the side left at {figure(row.get('committed'))})"
    where = "by identity" if by == "identity" else "at the copy's end"
    return f", {where} (MM2: {figure(row['translated'])}, re-read {figure(row.get('translated_reread'))})"


def render_report(report: dict) -> str:
    """Short aligned lines: the switch, the gate, one line per group and one
    per partition (only those not moved exactly when a group has many), then
    the notes. Missing keys (a report that went through Pulumi's state, which
    drops nulls) read as unknown."""
    if report["mode"] == "returned":
        lines = [f"after the unplanned switch {report['from']} -> {report['to']}: {report['from']} answers again; "
                 f"counted by record identity at {report['at']}"]
    else:
        lines = [f"{report['mode']} switch {report['from']} -> {report['to']} at {report['at']}"]
    gate = report.get("gate")
    if report["mode"] == "returned":
        pass
    elif gate is None:
        lines.append("  gate: none (unplanned)")
    else:
        allowed = ", ".join(gate.get("members_from") or {})
        lines.append(f"  gate: passed after {float(gate.get('waited_seconds') or 0):.0f}s: "
                     f"{figure(gate.get('in_flight', 0))} in flight, {len(gate.get('groups') or [])} group(s) with "
                     f"fresh checkpoints on {figure(gate.get('checkpointed_partitions', 0))} partition(s)"
                     + (f", active on {report['from']} (allowed): {allowed}" if allowed else ""))
    groups = report.get("groups") or {}
    width = max([len(g) for g in groups] + [5])
    for group, entry in sorted(groups.items()):
        parts = entry.get("partitions") or []
        at_most = entry.get("reread") is None and entry.get("reread_at_most") is not None
        figures = (f"re-read at most {figure(entry.get('reread_at_most'))}" if at_most
                   else f"re-read {figure(entry.get('reread'))}")
        by_mm2 = (f"  (MM2's translation alone: re-read {figure(entry['translated_reread'])})"
                  if entry.get("translated_reread") is not None else "")
        lines.append(f"  {group:<{width}}  {len(parts)} partition(s)  {figures}  lost {figure(entry.get('lost'))}"
                     + by_mm2)
        pwidth = max([len(f"{r['from_topic']}/{figure(r['partition'])}") for r in parts] + [1])
        exact = [r for r in parts if r.get("reread") == 0 and r.get("lost") == 0] if len(parts) > 4 else []
        for r in parts:
            if any(r is e for e in exact):
                continue  # exact moves of many partitions: counted on the line after the rows
            where = f"{r['from_topic']}/{figure(r['partition'])}"
            reread = (f"re-read {figure(r.get('reread'))}" if r.get("reread") is not None
                      else f"re-read at most {figure(r.get('reread_at_most'))}")
            lines.append(f"    {where:<{pwidth}}  {figure(r.get('old')):>8} -> {r['to_topic']} "
                         f"{figure(r.get('new')):<8}  {reread}, lost {figure(r.get('lost'))}{_how(r)}")
        if exact:
            lines.append(f"    {'...':<{pwidth}}  {len(exact)} more partition(s) moved exactly (re-read 0, lost 0)"
                         if len(exact) < len(parts) else
                         "    every partition moved exactly (re-read 0, lost 0)")
    if not groups:
        lines.append("  no group moved")
    lines += [f"  note: {n}" for n in report.get("notes") or []]
    return "\n".join(lines)
