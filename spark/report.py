"""The report's verdict and its human summary: a group's failures against the
tolerances, and the text printed on stdout."""
from __future__ import annotations

import json

from .config import TOLERANCE_REPORT_KEYS, WAIT_RATE

def group_failures(group: dict, tolerance: dict[str, int | None]) -> list[str]:
    label = f"{group['topic']} on {group['target_bootstrap']}"
    failures = []
    if not group["partitions_ok"]:
        if group["target_partitions"] is None:
            failures.append(f"{label}: the remote topic does not exist")
        else:
            counts = ", ".join(f"{s['flow']}:{s['topic']} has {s['partitions']}" for s in group["sources"])
            failures.append(f"{label}: {group['target_partitions']} partitions, but {counts}")
    for key in TOLERANCE_REPORT_KEYS:
        limit = tolerance.get(key)
        if isinstance(limit, int) and group.get(key, 0) > limit:
            failures.append(f"{label}: {key} {group[key]} > tolerance {limit}")
    bound = group.get("in_flight_bound")
    if tolerance.get("in_flight") == WAIT_RATE and bound is not None and group.get("in_flight", 0) > bound:
        failures.append(f"{label}: in_flight {group['in_flight']} > {bound}, what the target takes in another "
                        f"{group['waited_seconds']:.0f}s wait at the rate it took records during this one; fix: "
                        "find what slows the flow, raise wait_seconds, or set tolerance.in_flight")
    lost_limit = tolerance.get("lost")
    for entry in group.get("failover", []):
        if entry.get("unmatched_regex"):
            failures.append(f"{label}: consumer groups {entry['consumer_group']!r} of {entry['flow']} have no "
                            f"checkpoint in {entry['checkpoints_topic']}")
        elif lost_limit is not None and entry["lost"] > lost_limit:
            failures.append(f"{label}: consumer group {entry['consumer_group']} would lose {entry['lost']} "
                            f"records failing over (> tolerance {lost_limit})")
    for entry in group.get("positions", []):  # a given position is exact or wrong: no tolerance
        if entry["lost"] or entry["reread"]:
            failures.append(f"{label}: {entry['name']} (at the position of group {entry['consumer_group']}"
                            f"{', ' + entry['label'] if entry.get('label') else ''}) would re-read "
                            f"{entry['reread']} and lose {entry['lost']} record(s) of {entry['topic']}")
        if entry.get("unproved"):
            failures.append(f"{label}: {entry['name']} (at the position of group {entry['consumer_group']}) was "
                            f"not proved on partition(s) {entry['unproved']} of {entry['topic']}: its group's "
                            "position lies before the records the run read (validation.window); fix: a longer "
                            "window, or `all`")
    return failures


def _stalled(group: dict) -> str:
    if not group.get("stalled"):
        return ""
    return f" (stalled {group['stalled']}: partitions {group['stalled_partitions']} took nothing during the wait)"


def _set_aside(group: dict) -> str:
    n = group.get("after_snapshot", 0)
    return f"  (set aside: {n} copies of records the sources took after the snapshot)" if n else ""


def summary_text(report: dict) -> str:
    status = report.get("status") or ("passed" if report["passed"] else "failed")
    window = report.get("window") or {}
    checked = (f"{report['records_checked']} record(s) of {report['topics_checked']} topic(s) checked, "
               if "records_checked" in report else "")
    scope = f"since {window['since']}, " if window.get("since") else "whole history, "
    lines = [f"replication check {status.upper().replace('-', ' ')}: {checked}{scope}"
             f"{len(report['groups'])} target topic(s), {report['duration_seconds']:.1f}s"]
    for g in report["groups"]:
        feeds = ", ".join(f"{s['flow']}:{s['topic']}" for s in g["sources"])
        lines.append(f"  {g['topic']} on {g['target_bootstrap']} <- {feeds}")
        lines.append(f"    source {g['source_records']}  target {g['target_records']}  matched {g['matched']}  "
                     f"missing {g['missing']}{_stalled(g)}  in-flight {g['in_flight']}  duplicates {g['duplicates']}  "
                     f"extras {g['extras']}  out-of-order {g['out_of_order']}  purged {g.get('purged', 0)}  "
                     f"partitions {'ok' if g['partitions_ok'] else 'WRONG'}"
                     f"{'  (wait bound expired)' if g['timed_out'] else ''}"
                     f"{_set_aside(g)}")
        for f in g["failover"]:
            if f.get("unmatched_regex"):
                lines.append(f"    failover {f['consumer_group']}: no checkpoint")
            else:
                lines.append(f"    failover {f['consumer_group']} ({f['flow']}): lost {f['lost']}, "
                             f"re-read {f['reread']} over {f['partitions']} partition(s)")
        for f in g.get("positions", []):
            lines.append(f"    position {f['name']} of {f['consumer_group']} ({f['flow']}:{f['topic']}): "
                         f"re-read {f['reread']}, lost {f['lost']} over {len(f['partitions'])} partition(s)")
        for e in g.get("purged_partitions", []):
            lines.append(f"    purged {e['flow']}:{e['topic']}[{e['partition']}]: {e['purged']} record(s) gone from "
                         f"the source before MM2 copied them (log start {e['log_start']}"
                         f"{', ' + str(e['pending']) + ' while not yet reached' if e['pending'] else ''})")
        for name in ("missing", "in_flight", "duplicates", "extras", "out_of_order"):
            if g["samples"].get(name):
                lines.append(f"    {name} e.g. {json.dumps(g['samples'][name][:3])}")
        lines.extend(f"    FAIL {failure}" for failure in g["failures"])
    lines.extend(f"  FAIL {failure}" for failure in report["failures"]
                 if not any(failure in g["failures"] for g in report["groups"]))
    return "\n".join(lines)
