"""A drill's report as the `up` log shows it: the verdict, RPO and RTO, one
line per group copy with what the proof compared, then the notes. Missing keys
(a report that went through Pulumi's state, which drops nulls) read as unknown."""
from __future__ import annotations

from mirrorstack.failover.rules import figure


def render_drill(report: dict) -> str:
    rpo, objective = report.get("rpo") or {}, report.get("objective") or {}
    verdict = "passed" if report.get("passed") else "FAILED"
    lines = [f"drill {report['run']} {report['from']} -> {report['to']} at {report['at']}: {verdict}",
             f"  RPO: {figure(rpo.get('records'))} record(s) not yet on {report['to']}, the oldest "
             f"{float(rpo.get('seconds') or 0):.1f}s old (objective {figure(objective.get('rpo_seconds'))}s)",
             f"  RTO: {float(report.get('rto_seconds') or 0):.1f}s until every group could resume on {report['to']}"]
    groups = report.get("groups") or {}
    width = max([len(g) for g in groups] + [5])
    for group, entry in sorted(groups.items()):
        proof = entry.get("proof") or {}
        if not proof:
            lines.append(f"  {group:<{width}}  no copy written (no position on {report['to']}: see the notes)")
            continue
        lines.append(f"  {group:<{width}}  {len(entry.get('partitions') or [])} partition(s)  re-read "
                     f"{figure(proof.get('reread'))}  lost {figure(proof.get('lost'))}  by identity over "
                     f"{figure(proof.get('compared'))} unread record(s)"
                     + (f"  (MM2's translation alone: re-read {figure(entry['translated_reread'])})"
                        if entry.get("translated_reread") is not None else ""))
    if not groups:
        lines.append("  no group to rehearse")
    lines += [f"  failed: {f}" for f in report.get("failed") or []]
    lines += [f"  note: {n}" for n in report.get("notes") or []]
    return "\n".join(lines)


def describe_drill(primary: str, standby: str, active: str, drill: dict | None, last_run: str | None) -> str | None:
    """What `up` will do about failover.drill, said in the preview; None when no drill runs."""
    if not drill or drill["run"] == last_run:
        return None
    other = standby if active == primary else primary
    return (f"drill {drill['run']} rehearses a switch {active} -> {other} after the flows: RPO within "
            f"{float(drill['rpo_seconds']):g}s, copies of the groups proved by record identity and deleted; nothing "
            "real is touched")
