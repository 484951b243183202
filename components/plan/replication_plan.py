"""The replication plan: which live topics (and groups) each flow mirrors, under
which names on the target, what a change starts or stops mirroring, and what
looks wrong. Pure: the live topic lists come in as data (components/plan/live_topics.py
reads them), the previous flows as the descriptions the stack exported last time.

Flows are mirrorstack.mm2.flows.FlowDescription; which topics and groups a flow
selects and their remote names are the one meaning of a flow (its `selection()`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from mirrorstack.mm2.flows import FlowDescription

MAX_TOPIC_NAME = 249  # Kafka's limit (org.apache.kafka.common.internals.Topic)
Flows = dict[str, FlowDescription]  # name -> flow


def exported(specs: Flows) -> dict[str, dict]:
    """The stack output `replication_plan`: each flow's description keyed by its
    name, so the next preview can say what a change starts or stops mirroring."""
    return {name: spec.to_dict(named=False) for name, spec in specs.items()}


def previous(output) -> Flows | None:
    """The flows of the last deployment's `replication_plan` output (None: the
    stack has none). A flow the output cannot describe counts as new."""
    if output is None:
        return None
    flows = {}
    for name, value in dict(output).items():
        try:
            flows[name] = FlowDescription.from_dict(value, name)
        except ValueError:
            continue
    return flows


def selected_topics(spec: FlowDescription, topics) -> list[str]:
    """The topics MM2 mirrors for this flow, out of the source's topic names, as
    MirrorSourceConnector decides: never its internal topics (named with the
    flow's separator), never a topic that came from the target (a cycle),
    heartbeats topics whatever `topics` says."""
    return spec.selection().selected_topics(topics)


def selected_groups(spec: FlowDescription, groups) -> list[str]:
    if not spec.checkpoints:
        return []
    return spec.selection().selected_groups(groups)


def remote_name(spec: FlowDescription, topic: str) -> str:
    return spec.selection().remote(topic)


def _collision(name: str, existing) -> str | None:
    """An existing topic whose name differs from `name` only by '.' and '_'
    (Kafka refuses to create such a topic: org.apache.kafka.common.internals.Topic.hasCollision)."""
    key = name.replace(".", "_")
    return next((t for t in existing if t != name and t.replace(".", "_") == key), None)


def rename_collisions(spec: FlowDescription, source_topics, target_topics) -> list[tuple[str, str]]:
    """(new name, existing topic) for every topic a renamed flow would write on its
    target, remote and internal (checkpoints, offset syncs), that Kafka refuses
    beside an existing one: a separator swapping '.' and '_' collides with the
    flow's own old topics."""
    names = [remote_name(spec, t) for t in selected_topics(spec, source_topics)]
    names += [spec.checkpoints_topic(), spec.offset_syncs_topic()]
    return [(name, clash) for name in names if (clash := _collision(name, target_topics))]


# What `up` does when a live flow's names change (components/mirror/reconcile.py, NAMING_KEYS).
RENAME_WARNING = ("replication_policy or separator changed: every remote topic and MM2's internal topics "
                  "(checkpoints, offset syncs) get new names; up resets the flow's connector offsets, so the "
                  "source topics are copied again from their start under the new names; the old remote topics "
                  "stay on the target (delete them once no consumer reads them); groups' translated offsets "
                  "start over in the new checkpoints topic")


def collision_message(name: str, clash: str, target: str) -> str:
    return (f"{name}: collides with {clash} on {target} (Kafka treats '.' and '_' in topic names alike): MM2 "
            f"cannot create it and the copy stalls; up refuses the rename; fix: delete {clash} first (once no "
            f"consumer reads it), or choose a separator that does not swap '.' and '_'")


def renames(old: FlowDescription | None, spec: FlowDescription) -> bool:
    """Whether a deployed flow's change renames what it writes."""
    return spec.renames(old)


@dataclass
class Live:
    """A cluster's names as read now; `error` says why they could not be read;
    `created`: the cluster is created by this update, so it has none yet and was
    not asked (Live.to_be_created())."""
    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    error: str | None = None
    limits: dict[str, int] = field(default_factory=dict)  # max.message.bytes set on a topic
    default_limit: int | None = None  # the brokers' message.max.bytes: every other topic's
    created: bool = False

    @classmethod
    def to_be_created(cls) -> Live:
        """A cluster this update creates: no topics, no groups, nothing to ask."""
        return cls(created=True)

    def limit(self, topic: str) -> int | None:
        return self.limits.get(topic, self.default_limit)


@dataclass
class FlowPlan:
    name: str
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # mark, topic, remote, note
    groups: list[tuple[str, str]] = field(default_factory=list)  # mark, group
    warnings: list[str] = field(default_factory=list)
    unchecked: str | None = None


def _identity_feeds(specs: Flows, live: dict[str, Live]) -> dict[tuple[str, str], list[str]]:
    """(target, topic) → the identity flows of this stack that write it."""
    feeds: dict[tuple[str, str], list[str]] = {}
    for name, spec in specs.items():
        src = live.get(spec.source)
        if spec.replication_policy == "identity" and src and src.error is None:
            for topic in selected_topics(spec, src.topics):
                feeds.setdefault((spec.target, topic), []).append(name)
    return feeds


def flow_plan(name: str, spec: FlowDescription, old: FlowDescription | None, live: dict[str, Live],
              previous_remotes: set[tuple[str, str]], feeds: dict[tuple[str, str], list[str]]) -> FlowPlan:
    """One flow's plan. `old`: its spec at the last deployment (None: a new flow);
    `previous_remotes`: (target, topic) this stack's flows wrote last time."""
    plan = FlowPlan(name)
    source, target = live.get(spec.source), live.get(spec.target)
    if source is not None and source.created:  # nothing to select from yet; a created target alone is just empty
        new = [a for a, c in ((spec.source, source), (spec.target, target)) if c is not None and c.created]
        plan.unchecked = f"{', '.join(new)}: created by this update, nothing to check yet"
        return plan
    if source is None or source.error is not None:
        plan.unchecked = (f"{spec.source}: not reachable from here, plan not checked"
                          + (f" ({source.error})" if source and source.error else ""))
        if old is None:
            plan.warnings.append("new flow (its topics are not checked)")
        elif changed := spec.changes(old):
            plan.warnings.append(f"changed: {', '.join(changed)} (which topics that moves is not checked)")
        if renames(old, spec):
            plan.warnings.append(RENAME_WARNING)
        return plan
    now = selected_topics(spec, source.topics)
    before = selected_topics(old, source.topics) if old is not None else []
    for pattern in spec.topics:
        if not any(re.fullmatch(pattern, t) for t in now):
            excluded = [t for t in source.topics if re.fullmatch(pattern, t)]
            plan.warnings.append(f"topics {pattern!r} matches only excluded topics ({', '.join(excluded[:3])})"
                                 if excluded else f"topics {pattern!r} matches no topic on {spec.source}")
    for topic in sorted({*now, *before}):
        mark = "+" if topic not in before else "-" if topic not in now else " "
        remote = remote_name(spec if topic in now else old, topic)
        note = {"+": "starts", "-": "stops", " ": ""}[mark]
        if mark == " " and (was := remote_name(old, topic)) != remote:
            mark, note = "~", f"renamed from {was}: copied again from the start; {was} stays"
            if target and target.error is None and (clash := _collision(remote, target.topics)):
                plan.warnings.append(collision_message(remote, clash, spec.target))
        if topic in now:
            merged = feeds.get((spec.target, remote), [])
            if len(merged) > 1:
                note = _join(note, f"merged with {', '.join(n for n in merged if n != name)}")
                if spec.sync_topic_configs:
                    plan.warnings.append(f"{remote}: identity merge with sync_topic_configs on: each source "
                                         "overwrites the merged topic's config")
            if spec.replication_policy == "identity" and target and target.error is None \
                    and remote in target.topics and (spec.target, remote) not in previous_remotes:
                note = _join(note, "exists on target")
                plan.warnings.append(f"{remote}: exists on {spec.target} and is not fed by this stack's "
                                     "flows: other producers write into the merged topic")
            if len(remote) > MAX_TOPIC_NAME:
                plan.warnings.append(f"{remote[:40]}...: {len(remote)} characters, over Kafka's "
                                     f"{MAX_TOPIC_NAME}: MM2 cannot create it")
            if target and target.error is None and (warning := _size_warning(spec, topic, remote, source, target)):
                plan.warnings.append(warning)
        plan.rows.append((mark, topic, remote, note))
    if not now:
        plan.warnings.append(f"selects no topic on {spec.source}")
    elif spec.compression == "none":
        plan.warnings.append("compression none: records go to the target uncompressed, so a record the source "
                             "stored compressed that is larger, whole, than the remote topic's max.message.bytes "
                             "stops the flow; fix: throughput.compression zstd (the default)")
    if renames(old, spec):
        plan.warnings.append(RENAME_WARNING)
    groups_now = selected_groups(spec, source.groups)
    groups_before = selected_groups(old, source.groups) if old is not None else []
    plan.groups = [("+" if g not in groups_before else "-" if g not in groups_now else " ", g)
                   for g in sorted({*groups_now, *groups_before})]
    return plan


def _size_warning(spec: FlowDescription, topic: str, remote: str, source: Live, target: Live) -> str | None:
    """Where the remote topic takes smaller batches than the source topic: a record
    the source took can then stop the flow (the target refuses it, the task dies)."""
    takes = source.limit(topic)
    if spec.sync_topic_configs and topic in source.limits:
        gets = source.limits[topic]  # MM2 copies a limit set on the source topic
    else:
        gets = target.limit(remote)
    if takes is None or gets is None:
        return None
    fix = (f"fix: set max.message.bytes={takes} on {remote} (or message.max.bytes on {spec.target}'s brokers)")
    if gets < takes:
        # Measured (issue 46): 20 duplicates after 4 restarts, and the large record out of order after the fix.
        resend = ("" if spec.exactly_once else
                  "; until then each restart re-writes the records sent after the last committed offset "
                  "(duplicates), and once it passes, the large record lands after records that followed it")
        return (f"{remote}: takes batches up to {gets} bytes on {spec.target}, {topic} up to {takes} on "
                f"{spec.source}: a larger record stops the flow{resend}; {fix}")
    return None


def _join(a: str, b: str) -> str:
    return f"{a}, {b}" if a else b


def build(specs: Flows, olds: Flows | None, live: dict[str, Live]) -> list[FlowPlan]:
    """Every flow's plan; `olds` None when the stack has no previous plan (then
    nothing is marked as starting: there is no before to compare with)."""
    first = olds is None
    olds = olds or {}
    previous_remotes = set()
    for spec in olds.values():
        src = live.get(spec.source)
        if src and src.error is None:
            previous_remotes |= {(spec.target, remote_name(spec, t)) for t in selected_topics(spec, src.topics)}
    feeds = _identity_feeds(specs, live)
    plans = [flow_plan(name, spec, spec if first else olds.get(name), live, previous_remotes, feeds) for name, spec in specs.items()]
    for name in olds.keys() - specs.keys():
        plans.append(FlowPlan(name, warnings=["removed: its connectors are deleted, nothing is mirrored any more"]))
    return plans


def render(plans: list[FlowPlan]) -> str:
    """Short, aligned, one line per topic: what a reviewer reads."""
    width = max([len(r[1]) for p in plans for r in p.rows] + [1])
    rwidth = max([len(r[2]) for p in plans for r in p.rows] + [1])
    lines = ["replication plan"]
    for plan in plans:
        lines.append(f"  {plan.name}")
        if plan.unchecked:
            lines.append(f"    ? {plan.unchecked}")
        for mark, topic, remote, note in plan.rows:
            lines.append(f"    {mark} {topic:<{width}} -> {remote:<{rwidth}}  {note}".rstrip())
        moved = [f"{m}{g}" for m, g in plan.groups if m != " "]
        if plan.groups:
            lines.append(f"    groups: {len([g for m, g in plan.groups if m != '-'])} mirrored"
                         + (f" ({' '.join(moved)})" if moved else ""))
        lines += [f"    ! {w}" for w in plan.warnings]
    return "\n".join(lines)
