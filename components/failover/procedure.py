"""The switch procedure against live clusters (SPEC-17 §3): gate, stop the
flow's connectors, translate the selected groups' offsets, write them into
`to`'s groups, report. The decisions are components/failover/rules.py's,
the reads and writes of each cluster clusters.py's; this module says in
what order, and stops the connectors (mirrorstack.connect.api's client).

`run_switch(spec, progress)` takes plain JSON-able data (what a dynamic
resource's props carry; secrets only as `${file:...}` references, resolved
here; each flow as its description, FlowDescription.to_dict, beside its
connectors and Connect) and returns the report. A gate that does not pass raises GateFailed
before anything changes."""
from __future__ import annotations

import sys
import time
from collections import Counter
from datetime import datetime, timezone

from mirrorstack.failover import rules
from mirrorstack.failover.clusters import Cluster, identity, latest_checkpoints, offset_syncs, source_offsets
from mirrorstack.mm2.flows import FlowDescription

PROBE_TIMEOUT = 5  # seconds: does the side being left answer at all (unplanned)


class GateFailed(RuntimeError):
    """The gate did not pass: every failing check, one per line, and "nothing was changed"."""


def _say(message: str) -> None:
    print(f"mirrorstack: {message}", file=sys.stderr, flush=True)


class Switch:
    def __init__(self, spec: dict, progress):
        self.spec, self.progress = spec, progress
        self.from_alias, self.to_alias = spec["from"], spec["to"]
        # The flows' descriptions; the pieces keep their connectors and Connect.
        self.piece = spec["flow"]
        self.flow = FlowDescription.from_dict(self.piece["description"])
        back = spec.get("back_flow")
        self.back = FlowDescription.from_dict(back["description"]) if back else None
        self.narrowed = spec.get("groups")
        self.gate = {**rules.DEFAULT_GATE, **(spec.get("gate") or {})}
        self.exact = {**rules.DEFAULT_EXACT, **(spec.get("exact") or {})}
        self.notes: list[str] = []
        self._connect = None

    def connect(self):
        if self._connect is None:
            from mirrorstack.connect.api import client_from
            self._connect = client_from(self.piece["connect"])
        return self._connect

    # -- planned --------------------------------------------------------------
    def observe(self, source: Cluster, target: Cluster) -> dict:
        """Everything the gate and the translation need, read now."""
        parts = source.partitions()
        keys = [(t, p) for t in self.flow.selection().selected_topics(parts) for p in parts[t]]
        marks = source.watermarks(keys)
        copied = source_offsets(self.connect(), self.piece["connectors"]["source"], self.flow)
        flying = {k: rules.in_flight(marks[k][1], marks[k][0], copied.get(k)) for k in keys}
        groups = rules.switch_groups(self.flow, source.group_ids(), self.narrowed)
        commits = {g: source.committed(g) for g in groups}
        checkpoints = latest_checkpoints(target, self.flow.checkpoints_topic())
        syncs = offset_syncs(target, self.flow.offset_syncs_topic())
        stale: dict[str, list[dict]] = {}
        checked: dict[str, int] = {}
        for group, offsets in commits.items():
            rows = []
            for (topic, p), committed in sorted(offsets.items()):
                if not rules.flow_topic(self.flow, topic):
                    continue
                checkpoint = checkpoints.get((group, self.flow.selection().remote(topic), p))
                start, end = marks.get((topic, p), (None, None))
                if start == end == committed:
                    continue  # nothing there to translate: it moves to the copy's end
                checked[group] = checked.get(group, 0) + 1
                if not rules.checkpoint_fresh(committed, checkpoint, syncs.get((topic, p))):
                    rows.append({"topic": topic, "partition": p, "committed": committed,
                                 "checkpoint": checkpoint[0] if checkpoint else None})
            stale[group] = rows
        figures = rules.gate_figures(flying, stale, checked, source.members(groups), target.members(groups))
        return {"figures": figures, "groups": groups, "commits": commits, "checkpoints": checkpoints,
                "ends_from": {k: hi for k, (_, hi) in marks.items()}}

    def wait_for_gate(self, source: Cluster, target: Cluster) -> dict:
        started = time.monotonic()
        next_line = started + rules.PROGRESS_SECONDS
        while True:
            seen = self.observe(source, target)
            problems = rules.gate_problems(seen["figures"], self.gate, self.from_alias, self.to_alias)
            waited = time.monotonic() - started
            if not problems:
                seen["figures"]["waited_seconds"] = round(waited, 1)
                return seen
            if waited + rules.GATE_POLL_SECONDS > float(self.gate["wait_seconds"]):
                raise GateFailed(rules.gate_failed_message(problems, waited))
            if time.monotonic() >= next_line:
                self.progress(f"failover gate waiting ({waited:.0f}s of {float(self.gate['wait_seconds']):.0f}s): "
                              + "; ".join(p.split(";")[0] for p in problems))
                next_line = time.monotonic() + rules.PROGRESS_SECONDS
            time.sleep(rules.GATE_POLL_SECONDS)

    def planned(self, source: Cluster, target: Cluster) -> tuple[dict, dict]:
        seen = self.wait_for_gate(source, target)
        self.progress(f"failover gate passed: {seen['figures']['in_flight']} in flight, "
                      f"{len(seen['groups'])} group(s) checkpointed")
        self.stop_connectors(strict=True)
        # After the stop: the checkpoints and positions the groups move with.
        _, groups = self.positions(source, target, seen["groups"])
        return seen["figures"], groups

    def positions(self, source: Cluster, target: Cluster, groups: list[str]) -> tuple[dict, dict]:
        """Each group's committed offsets on `from` now, and where it moves on `to` (MM2's translation,
        then, with `exact`, by record identity), as the report's rows."""
        checkpoints = latest_checkpoints(target, self.flow.checkpoints_topic())
        back_syncs = offset_syncs(source, self.back.offset_syncs_topic()) if self.back else {}
        commits = {g: source.committed(g) for g in groups}
        ends_from = self._ends(source, {k for c in commits.values() for k in c})
        ends_to = self._ends(target, {(self.flow.selection().remote(t), p) for c in commits.values() for t, p in c
                                      if rules.flow_topic(self.flow, t)})
        moved = {}
        for group in groups:
            moved[group], notes = rules.translate_planned(group, commits[group], self.flow, self.back, checkpoints,
                                                          back_syncs, ends_from, ends_to)
            self.notes += notes
        if self.exact["enabled"]:
            self.move_exactly(moved, source, target)
        return commits, moved

    def move_exactly(self, groups: dict, source: Cluster, target: Cluster) -> None:
        """Each moved partition to the copy on `to` of the first record its group has not read on `from`,
        found by identity from MM2's translated offset on (a lower bound: MM2 translates so that a group
        re-reads, never skips). MM2 keeps a partition's records in order in one partition of the copy, so
        whatever came before that copy the group has read (or is an earlier duplicate). Not found within
        `search_records`: MM2's translation stays, and a note says why."""
        rows = [r for entry in groups.values() for r in entry["partitions"]]
        marks_from = self._marks(source, {(r["from_topic"], r["partition"]) for r in rows})
        marks_to = self._marks(target, {(r["to_topic"], r["partition"]) for r in rows})
        found = {}  # groups at the same position with the same translation: one search
        for group, entry in groups.items():
            moved = []
            for row in entry["partitions"]:
                key = (row["from_topic"], row["to_topic"], row["partition"], row["old"], row["new"])
                if key not in found:
                    found[key] = self.exact_or_why_not(row, source, target, marks_from.get((key[0], key[2])),
                                                       marks_to.get((key[1], key[2])))
                exact, how, passed = found[key]
                if exact is None:
                    self.notes.append(f"{group}: {row['from_topic']}/{row['partition']} at {row['old']}: {how}; "
                                      f"moved to MM2's translated offset {row['new']} on {row['to_topic']}")
                    moved.append(rules.translated_row(row))
                else:
                    moved.append(rules.exact_row(row, exact, how, passed))
            groups[group] = rules.group_entry(moved)

    def exact_or_why_not(self, row: dict, source: Cluster, target: Cluster, marks_from, marks_to):
        """exact_position, or why there is none. The connectors are stopped by now: a read that fails
        leaves that partition on MM2's translation rather than the switch half done."""
        if marks_from is None or marks_to is None:
            return None, f"{row['to_topic']}/{row['partition']} is not on {self.to_alias}", 0
        try:
            return self.exact_position(row, source, target, marks_from, marks_to)
        except Exception as exc:  # noqa: BLE001 - any read error: the translation MM2 made still holds
            return None, f"the search failed ({type(exc).__name__}: {str(exc)[:200]})", 0

    def exact_position(self, row: dict, source: Cluster, target: Cluster, marks_from: tuple[int, int],
                       marks_to: tuple[int, int]) -> tuple[int | None, str, int]:
        """(the exact offset, "identity" or "end", the records MM2's translation would re-read), or
        (None, why not, 0)."""
        (low_from, end_from), (low_to, end_to) = marks_from, marks_to
        old, bound = row["old"], int(self.exact["search_records"])
        if old < low_from:
            return None, f"that record is gone from {self.from_alias} (its log now starts at {low_from})", 0
        start = max(row["new"], low_to)
        first = source.first_record(row["from_topic"], row["partition"], old, end_from)
        if first is None:  # it had read everything: the end of what the copy holds
            passed = end_to - start if end_to - start > bound else \
                target.count(row["to_topic"], row["partition"], start, end_to)
            return end_to, "end", passed
        stop = min(end_to, start + bound)
        at, passed = target.find_copy(row["to_topic"], row["partition"], start, stop, first[1])
        if at is None:
            limit = f" (failover.exact_search_records: {bound})" if stop < end_to else ""
            return None, (f"no copy of its record at {first[0]} among the {passed} record(s) of {row['to_topic']}/"
                          f"{row['partition']} from {start}{limit}"), 0
        return at, "identity", passed

    # -- unplanned ------------------------------------------------------------
    def unplanned(self, target: Cluster) -> dict:
        why = self.probe_from()
        self.notes.append(f"unplanned: no gate; {self.from_alias} "
                          + ("answered, but the switch proceeds from the last checkpoints as asked" if why is None
                             else f"did not answer ({why})"))
        checkpoints = latest_checkpoints(target, self.flow.checkpoints_topic())
        groups = rules.checkpointed_groups(self.flow, checkpoints, self.narrowed)
        if problems := rules.members_to_problems(target.members(groups), self.to_alias):
            raise GateFailed(rules.gate_failed_message(problems, 0))
        self.stop_connectors(strict=False)
        checkpoints = latest_checkpoints(target, self.flow.checkpoints_topic())
        ends_to = self._ends(target, {(remote, p) for _, remote, p in checkpoints
                                      if rules.original_topic(self.flow, remote) is not None})
        moved = self.in_records(target, {g: rules.translate_unplanned(g, self.flow, checkpoints, ends_to)
                                         for g in groups})
        if self.back:
            self.notes.append(f"positions on {self.from_alias}'s topics that came from {self.to_alias} cannot be "
                              "read: those are not moved")
        self.notes.append(rules.lost_note(self.from_alias))
        return moved

    def in_records(self, target: Cluster, groups: dict) -> dict:
        """An unplanned move's re-read bounds counted in records on `to`, not offsets (an exactly-once
        flow's transaction markers take offsets too); a bound above `search_records` stays in offsets."""
        bound, counted = int(self.exact["search_records"]), {}
        for entry in groups.values():
            for row in entry["partitions"]:
                most = row["reread_at_most"]
                if most and most <= bound:
                    key = (row["to_topic"], row["partition"], row["new"], most)
                    if key not in counted:
                        counted[key] = target.count(key[0], key[1], key[2], key[2] + most)
                    row["reread_at_most"] = counted[key]
        return {g: rules.group_entry(entry["partitions"]) for g, entry in groups.items()}

    # -- the side an unplanned switch left, back ----------------------------------
    def returned(self, source: Cluster, target: Cluster) -> dict:
        """The side an unplanned switch left answers again: for each group and partition that switch
        moved (spec["moved"], its report's groups), what the group re-read on the side joined and what
        it lost, by record identity (rules.returned_row)."""
        moved = self.spec["moved"] or {}
        rows = [r for entry in moved.values() for r in entry.get("partitions") or []]
        marks_from = self._marks(source, {(r["from_topic"], int(r["partition"])) for r in rows})
        marks_to = self._marks(target, {(r["to_topic"], int(r["partition"])) for r in rows})
        groups = {}
        for group, entry in sorted(moved.items()):
            committed = source.committed(group)
            counted = []
            for row in entry.get("partitions") or []:
                key_from, key_to = (row["from_topic"], int(row["partition"])), (row["to_topic"], int(row["partition"]))
                if key_from not in marks_from or key_to not in marks_to:
                    self.notes.append(f"{group}: {key_from[0]}/{key_from[1]}: not on {self.from_alias} or "
                                      f"{self.to_alias} any more: not counted")
                    continue
                counted.append(self.returned_row(row, committed.get(key_from), source, target, marks_from[key_from],
                                                 marks_to[key_to]))
            groups[group] = rules.group_entry(counted)
        return groups

    def returned_row(self, row: dict, committed: int | None, source: Cluster, target: Cluster,
                     marks_from: tuple[int, int], marks_to: tuple[int, int]) -> dict:
        """One partition, by identity: the records the group had not read on the side left (from its
        committed offset there, which nothing moved since) against what it reads on the side joined from
        where the switch put it. One of those not on the copy there it lost (skipped, or never copied
        before the loss); a record there that is none of them it re-read."""
        (low_from, end_from), (low_to, end_to) = marks_from, marks_to
        p, new, bound = int(row["partition"]), int(row["new"]), int(self.exact["search_records"])
        at = max(committed or 0, low_from)
        unread = [identity(m) for m in source.records(row["from_topic"], p, at, min(end_from, at + bound))]
        start = max(new, low_to)
        reads = [(m.offset(), identity(m)) for m in target.records(row["to_topic"], p, start,
                                                                   min(end_to, start + bound + len(unread)))]
        matched = sum((Counter(unread) & Counter(i for _, i in reads)).values())
        if not unread:
            return rules.returned_row(row, committed, end_to, "end", len(reads), 0)
        exact = next((o for o, i in reads if i == unread[0]), None)
        if end_from - at > bound or end_to - start > bound + len(unread):
            self.notes.append(f"{row['to_topic']}/{p}: counted over the first {bound} record(s) "
                              "(failover.exact_search_records)")
        return rules.returned_row(row, committed, exact, "identity" if exact is not None else "not copied",
                                  len(reads) - matched, len(unread) - matched)

    def probe_from(self) -> str | None:
        try:
            probe = Cluster(self.from_alias, self.spec["clusters"][self.from_alias], timeout=PROBE_TIMEOUT)
        except RuntimeError as exc:
            return str(exc)
        return probe.answers()

    # -- shared ---------------------------------------------------------------
    def _ends(self, cluster: Cluster, keys) -> dict[rules.Key, int]:
        return {k: hi for k, (_, hi) in self._marks(cluster, keys).items()}

    @staticmethod
    def _marks(cluster: Cluster, keys) -> dict[rules.Key, tuple[int, int]]:
        """(start, end) of each of `keys` the cluster has."""
        parts = cluster.partitions()
        return cluster.watermarks([(t, p) for t, p in keys if p in parts.get(t, [])])

    def stop_connectors(self, strict: bool) -> None:
        """Nothing moves any more, and MM2's own group offset sync cannot
        overwrite the offsets written next. Every stop is asked for first, then
        each is waited for: with `from` lost each connector takes MM2's admin
        timeout (60 s by default) to stop, and they take it at the same time."""
        from mirrorstack.connect.api import ConnectError
        names = [n for n in (self.piece["connectors"].get(k) for k in ("source", "checkpoint", "heartbeat")) if n]
        asked = []
        for name in names:
            try:
                self.connect().request_stop(name)
            except ConnectError as exc:
                self._not_stopped(name, exc, strict)
                continue
            asked.append(name)
        for name in asked:
            try:
                self.connect().wait_stopped(name)
            except ConnectError as exc:
                self._not_stopped(name, exc, strict)
                continue
            self.progress(f"{name} stopped")

    def _not_stopped(self, name: str, exc: Exception, strict: bool) -> None:
        if strict:
            raise exc
        self.notes.append(f"{name} could not be stopped ({str(exc)[:300]}): MM2 may still sync group "
                          f"offsets into {self.to_alias}")

    def write(self, target: Cluster, groups: dict, named=lambda group: group) -> dict[str, str]:
        """Each group's new offsets, written on `to` under `named(group)`; {group: the name written}."""
        written = {}
        for group, entry in groups.items():
            offsets = {(r["to_topic"], r["partition"]): r["new"] for r in entry["partitions"]}
            if offsets:
                written[group] = named(group)
                target.write_offsets(written[group], offsets)
                self.progress(f"{written[group]}: {len(offsets)} offset(s) written on {self.to_alias}")
        return written

    def run(self) -> dict:
        mode = self.spec["mode"]
        if mode not in ("planned", "unplanned", "returned"):
            raise ValueError(f"mode {mode!r}: planned, unplanned or returned")
        target = Cluster(self.to_alias, self.spec["clusters"][self.to_alias])
        source = Cluster(self.from_alias, self.spec["clusters"][self.from_alias]) if mode != "unplanned" else None
        try:
            if mode == "planned":
                gate, groups = self.planned(source, target)
            elif mode == "unplanned":
                gate, groups = None, self.unplanned(target)
            else:  # counts only: nothing is written
                gate, groups = None, self.returned(source, target)
            if mode != "returned":
                self.write(target, groups)
        finally:
            for cluster in (source, target):
                if cluster is not None:
                    cluster.close()
        return {"from": self.from_alias, "to": self.to_alias, "mode": mode,
                "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "gate": gate, "notes": self.notes, "groups": groups}


def run_switch(spec: dict, progress=_say) -> dict:
    """Move the selected groups from spec["from"] to spec["to"] (SPEC-17 §3);
    returns the report (mirrorstack.failover.rules.render_report shows it).
    Mode "drill" moves no one: copies of the groups (failover/drill.py)."""
    if spec["mode"] == "drill":
        from mirrorstack.failover.drill import run_drill
        return run_drill(spec, progress)
    return Switch(spec, progress).run()
