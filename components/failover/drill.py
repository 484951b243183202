"""A failover drill against live clusters: the switch's translation and exact
search run for copies of the groups on the side that would take over, while the
flow and every consumer go on. Nothing real is touched: no connector is
stopped and no real group is written; the copies (named mirrorstack-drill.<run>.<group>) are
proved by record identity and deleted.

The order: the flow must run and stay within the recovery point objective
(RPO: records of the active side not yet on the other side, and the age of
the oldest of them); the groups' positions are read; each copy is written where
the switch would put its group; RTO is the time from the start until then; each
copy is proved against its group's position; the copies are deleted."""
from __future__ import annotations

import time
from datetime import datetime, timezone

from mirrorstack.failover import rules
from mirrorstack.failover.clusters import Cluster, identity, latest_checkpoints, offset_syncs
from mirrorstack.failover.procedure import GateFailed, Switch

POLL_SECONDS = 2.0
LAST_RECORDS = 20  # read back from a copy's end to its last record (transaction markers take offsets)


class DrillFailed(GateFailed):
    """The drill did not pass: why, one reason per line; no real group, connector or flow was touched."""


def copy_group(run: str, group: str) -> str:
    return f"{rules.DRILL_PREFIX}{run}.{group}"


class Drill:
    def __init__(self, spec: dict, progress):
        self.switch = Switch(spec, progress)
        self.spec, self.progress = spec, progress
        self.objective = spec["drill"]
        self.run_name = self.objective["run"]
        self.flow = self.switch.flow

    # -- the flow runs, within the objective ------------------------------------
    def flow_problems(self) -> list[str]:
        """The flow's source and checkpoint connectors and all their tasks must run."""
        problems = []
        for kind in ("source", "checkpoint"):
            name = self.switch.piece["connectors"].get(kind)
            if not name:
                continue
            status = self.switch.connect().status(name)
            if status is None:
                problems.append(f"flow {self.flow.name}: connector {name} does not exist")
                continue
            states = {status["connector"]["state"], *(t["state"] for t in status.get("tasks") or [])}
            if states != {"RUNNING"}:
                problems.append(f"flow {self.flow.name}: {name} is {'/'.join(sorted(states))}, not RUNNING: a drill "
                                "rehearses a switch of a running flow; fix: resume it (or let the supervisor)")
        return problems

    def copied(self, source: Cluster, target: Cluster, keys: list[rules.Key], syncs) -> dict[rules.Key, dict]:
        """Per partition of `from`: its end, the offset of the last record the copy holds (found by identity
        from MM2's offset syncs on) and how many records and seconds past it are not copied yet (none when
        the copy, read after the end, already holds newer records)."""
        ends_from = {k: hi for k, (_, hi) in source.watermarks(keys).items()}
        remote = {k: (self.flow.selection().remote(k[0]), k[1]) for k in keys}
        marks_to = Switch._marks(target, set(remote.values()))
        now_ms = int(time.time() * 1000)
        bound, out = int(self.switch.exact["search_records"]), {}
        for key in keys:
            end_from, last, end_to = ends_from[key], None, None
            if remote[key] in marks_to:
                low_to, end_to = marks_to[remote[key]]
                tail = list(target.records(remote[key][0], key[1], max(low_to, end_to - LAST_RECORDS), end_to))
                last = tail[-1] if tail else None
            upto = self._original_offset(source, key, last, end_from, syncs) if last is not None else -1
            measured = {"end": end_from, "end_to": end_to, "copied_upto": upto, "records": None, "seconds": None}
            if upto is not None:
                first_missing = source.first_record(key[0], key[1], upto + 1, end_from)
                behind = end_from - (upto + 1)  # offsets; counted in records (transaction markers are none)
                measured["records"] = source.count(key[0], key[1], upto + 1, end_from) if 0 < behind <= bound \
                    else max(0, behind)
                measured["seconds"] = round(max(0, now_ms - first_missing[1][3]) / 1000, 1) if first_missing else 0.0
            out[key] = measured
        return out

    def _original_offset(self, source: Cluster, key: rules.Key, last, end_from: int, syncs) -> int | None:
        """The offset on `from` of the record whose copy is `last`: searched by identity from the offset
        sync at or below its position (MM2 writes one at least every offset.lag.max records)."""
        sync = rules.downstream_to_upstream(syncs.get(key), last.offset())
        # now: with producers writing, the copy may hold records newer than `end_from`, read before it
        low_from, high_from = source.watermarks([key])[key]
        start = max(sync[0] if sync else low_from, low_from)
        bound = int(self.switch.exact["search_records"])
        at, _ = source.find_copy(key[0], key[1], start, min(max(end_from, high_from), start + bound), identity(last))
        return at

    def rpo(self, measured: dict[rules.Key, dict]) -> dict:
        unknown = sorted(f"{t}/{p}" for (t, p), m in measured.items() if m["records"] is None)
        behind = sorted([t, p, m["records"], m["seconds"]] for (t, p), m in measured.items() if m["records"])
        return {"records": sum(m["records"] or 0 for m in measured.values()),
                "seconds": max([m["seconds"] or 0.0 for m in measured.values()] + [0.0]),
                "partitions_behind": behind, "unknown": unknown}

    def rpo_problems(self, rpo: dict) -> list[str]:
        problems, most = [], self.objective.get("rpo_records")
        to = self.switch.to_alias
        if rpo["unknown"]:
            problems.append(f"RPO unknown: the last copy on {to} of {', '.join(rpo['unknown'])} was not found on "
                            f"{self.switch.from_alias} by identity within failover.exact_search_records")
        if rpo["seconds"] > float(self.objective["rpo_seconds"]):
            problems.append(f"RPO {rpo['seconds']:.1f}s: records not yet on {to} are that old (failover.drill."
                            f"rpo_seconds allows {float(self.objective['rpo_seconds']):g}); behind: "
                            + _behind(rpo) + "; wait for replication to catch up, or look at the flow's lag")
        if most is not None and rpo["records"] > int(most):
            problems.append(f"RPO {rpo['records']} record(s) not yet on {to} (failover.drill.rpo_records allows "
                            f"{int(most)}); behind: {_behind(rpo)}")
        return problems

    def unchecked(self, source: Cluster, target: Cluster, groups: list[str]) -> list[str]:
        """"group topic/partition" of each partition a group has records left to read in and no checkpoint
        of on `to` yet: there MM2's translation, the exact search's lower bound, is unknown."""
        checkpoints = latest_checkpoints(target, self.flow.checkpoints_topic())
        commits = {g: source.committed(g) for g in groups}
        ends = {k: hi for k, (_, hi) in source.watermarks(sorted({k for c in commits.values() for k in c
                                                                  if rules.flow_topic(self.flow, k[0])})).items()}
        return [f"{g} {t}/{p}" for g, offsets in sorted(commits.items()) for (t, p), at in sorted(offsets.items())
                if (t, p) in ends and at < ends[(t, p)]
                and (g, self.flow.selection().remote(t), p) not in checkpoints]

    def within_objective(self, source: Cluster, target: Cluster, keys, groups: list[str], started: float) -> dict:
        """The RPO, once the flow runs, it is within the objective and every group's partition with records
        left to read has a checkpoint on `to`; DrillFailed after wait_seconds."""
        wait = float(self.objective["wait_seconds"])
        syncs = offset_syncs(target, self.flow.offset_syncs_topic())
        next_line = started + rules.PROGRESS_SECONDS
        while True:
            problems = self.flow_problems()
            rpo = None
            if not problems:
                rpo = self.rpo(self.copied(source, target, keys, syncs))
                problems = self.rpo_problems(rpo)
                if unchecked := self.unchecked(source, target, groups):
                    problems.append(
                        f"no checkpoint on {self.switch.to_alias} yet of {', '.join(unchecked[:5])}"
                        + (f" and {len(unchecked) - 5} more" if len(unchecked) > 5 else "")
                        + ": MM2's checkpoint connector writes one every emit.checkpoints.interval.seconds; "
                        "check that it runs and emits checkpoints for these groups (groups, groups_exclude)")
            waited = time.monotonic() - started
            if not problems:
                return {**rpo, "waited_seconds": round(waited, 1)}
            if waited + POLL_SECONDS > wait:
                raise DrillFailed(f"the failover drill {self.run_name} did not pass (waited {waited:.0f}s of "
                                  f"failover.drill.wait_seconds {wait:g}):\n" + "\n".join(f"- {p}" for p in problems)
                                  + "\nno real group, connector or flow was touched")
            if time.monotonic() >= next_line:
                self.progress(f"drill waiting ({waited:.0f}s of {wait:g}s): " + "; ".join(
                    p.split(";")[0] for p in problems))
                next_line = time.monotonic() + rules.PROGRESS_SECONDS
            time.sleep(POLL_SECONDS)
            syncs = offset_syncs(target, self.flow.offset_syncs_topic())

    # -- the copies -------------------------------------------------------------
    def prove(self, source: Cluster, target: Cluster, commits: dict, moved: dict, copies: dict,
              syncs) -> dict:
        """Per copy and partition, by record identity: the records its group had not read on `from` that are
        on `to` by now (at most proof_records of them), against what the copy reads from the offset written
        on `to` (read back). re-read: what the copy reads before the first of them; lost: those of them the
        copy does not read."""
        window = int(self.objective.get("proof_records", 100))
        keys = sorted({(r["from_topic"], r["partition"]) for e in moved.values() for r in e["partitions"]
                       if rules.flow_topic(self.flow, r["from_topic"])})
        copied = self.copied(source, target, keys, syncs) if keys else {}
        proved = {}
        for group, copy in sorted(copies.items()):
            written = target.committed(copy)
            rows = []
            for row in moved[group]["partitions"]:
                key_from, key_to = (row["from_topic"], row["partition"]), (row["to_topic"], row["partition"])
                rows.append(self._prove_row(source, target, commits[group].get(key_from), written.get(key_to),
                                            key_from, key_to, copied.get(key_from), window))
            proved[group] = {"copy": copy, "reread": sum(r["reread"] for r in rows),
                             "lost": sum(r["lost"] for r in rows), "compared": sum(r["compared"] for r in rows),
                             "partitions": rows}
        return proved

    @staticmethod
    def _prove_row(source: Cluster, target: Cluster, committed: int | None, written: int | None,
                   key_from: rules.Key, key_to: rules.Key, copied: dict | None, window: int) -> dict:
        row = {"from_topic": key_from[0], "to_topic": key_to[0], "partition": key_from[1], "committed": committed,
               "copy_at": written}
        if written is None:
            return {**row, "reread": 0, "lost": 0, "compared": 0, "why": "the copy's offset was not written"}
        upto = (copied or {}).get("copied_upto")
        stop = min(upto + 1, (committed or 0) + window) if upto is not None else (committed or 0)
        unread = [identity(m) for m in source.records(key_from[0], key_from[1], committed or 0, stop)]
        wanted, reread, found = set(unread), 0, set()
        # the copy's end when `copied` was measured: what lies before it is a copy of a record up to `upto`
        end_to = (copied or {}).get("end_to") or written
        for msg in target.records(key_to[0], key_to[1], written, min(end_to, written + 2 * window + len(unread))):
            ident = identity(msg)
            if ident in wanted:
                found.add(ident)
                if len(found) == len(wanted):
                    break
            elif not found:
                reread += 1  # read by its group already (or a copy of such a record)
        return {**row, "reread": reread, "lost": len(wanted - found), "compared": len(unread)}

    def unmoved(self, commits: dict, moved: dict) -> list[str]:
        """Partitions of the flow a group committed on that the translation could not move (the switch's
        notes say why): the drill proved nothing for them."""
        rows = {(g, r["from_topic"], r["partition"]) for g, e in moved.items() for r in e["partitions"]}
        return [f"{g}: {t}/{p} not moved (see the notes)" for g, offsets in sorted(commits.items())
                for t, p in sorted(offsets) if rules.flow_topic(self.flow, t) and (g, t, p) not in rows]

    def delete_copies(self, target: Cluster, copies: dict) -> list[str]:
        """Deletes the copies; the notes of those that could not be (a drill leaves none knowingly)."""
        if not copies:
            return []
        try:
            failed = target.delete_groups(sorted(copies.values()))
        except Exception as exc:  # noqa: BLE001 - said in the report, never hides the drill's outcome
            failed = {c: str(exc)[:300] for c in copies.values()}
        return [f"the drill copy {g} could not be deleted on {self.switch.to_alias}: {why}; delete it by hand "
                "(kafka-consumer-groups --delete)" for g, why in sorted(failed.items())]

    def run(self) -> dict:
        started = time.monotonic()
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        from_alias, to_alias = self.switch.from_alias, self.switch.to_alias
        source = Cluster(from_alias, self.spec["clusters"][from_alias])
        target = Cluster(to_alias, self.spec["clusters"][to_alias])
        copies: dict[str, str] = {}
        try:
            parts = source.partitions()
            keys = [(t, p) for t in self.flow.selection().selected_topics(parts) for p in parts[t]]
            groups = [g for g in rules.switch_groups(self.flow, source.group_ids(), self.switch.narrowed)
                      if not g.startswith(rules.DRILL_PREFIX)]
            rpo = self.within_objective(source, target, keys, groups, started)
            self.progress(f"drill {self.run_name}: flow {self.flow.name} runs; RPO {rpo['records']} record(s), "
                          f"{rpo['seconds']:.1f}s")
            taken = [g for g in target.group_ids() if g.startswith(copy_group(self.run_name, ""))]
            if taken:  # never written over, never deleted: only what this drill wrote is
                raise DrillFailed(f"the failover drill {self.run_name} did not start: {to_alias} has group(s) "
                                  f"named as its copies: {', '.join(taken)} (left by a drill that was cut off?); "
                                  "fix: delete them (kafka-consumer-groups --delete --group NAME) or name the drill "
                                  "anew (failover.drill.run); no real group, connector or flow was touched")
            commits, moved = self.switch.positions(source, target, groups)
            copies = self.switch.write(target, moved, named=lambda group: copy_group(self.run_name, group))
            rto = round(time.monotonic() - started, 1)
            self.progress(f"drill {self.run_name}: {len(copies)} group copy(ies) written on {to_alias} after {rto}s")
            proof = self.prove(source, target, commits, moved, copies,
                               offset_syncs(target, self.flow.offset_syncs_topic()))
        finally:
            notes = self.delete_copies(target, copies)
            for cluster in (source, target):
                cluster.close()
        self.switch.notes += notes
        failed = [f"{g} (copy {p['copy']}): re-read {p['reread']}, lost {p['lost']}"
                  for g, p in sorted(proof.items()) if p["reread"] or p["lost"]]
        failed += self.unmoved(commits, moved)
        return {"mode": "drill", "run": self.run_name, "from": from_alias, "to": to_alias, "at": at,
                "passed": not failed and not notes, "rpo": rpo, "rto_seconds": rto,
                "objective": {k: self.objective.get(k) for k in ("rpo_seconds", "rpo_records", "wait_seconds")},
                "groups": {g: {**moved[g], "proof": proof.get(g)} for g in moved}, "failed": failed,
                "notes": self.switch.notes}


def _behind(rpo: dict) -> str:
    rows = rpo["partitions_behind"]
    shown = ", ".join(f"{t}/{p} {n} ({s:.1f}s)" for t, p, n, s in rows[:5])
    return shown + (f" and {len(rows) - 5} more" if len(rows) > 5 else "") if rows else "none"


def run_drill(spec: dict, progress) -> dict:
    return Drill(spec, progress).run()
