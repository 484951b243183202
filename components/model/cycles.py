"""Cycles of flows, and whether copies travel round one back to where they began.

MM2 stops a copy from going round only when a flow's own policy can read where
the copy came from (`isCycle`: the topic's source alias, by the flow's separator,
is its target). With identity, or with flows that split names by different
separators (`east-orders` read by '.' has no source alias), a copy arrives back
on its origin cluster under a new name and goes round again, forever. Whether it
does is worked out with the one meaning of a flow (FlowSelection.selects/remote),
walking example topics round each cycle. Pure: no pulumi.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from mirrorstack.mm2.flows import HEARTBEATS, FlowSelection
from mirrorstack.model.regex_witness import examples

MAX_EXAMINED = 500  # simple cycles walked per topology (a dense mesh has more; each is a few name checks)


def simple_cycles(flows: Sequence, starts: Sequence[int] | None = None, limit: int = MAX_EXAMINED
                  ) -> list[tuple[str, ...]]:
    """Each simple cycle of the flow graph once (smallest alias first), through one of
    the `starts` flows (every flow when None): ('a', 'b') is a -> b -> a."""
    succ: dict[str, list[str]] = {}
    for f in flows:
        if f.source != f.target and f.target not in succ.setdefault(f.source, []):
            succ[f.source].append(f.target)
    for targets in succ.values():
        targets.sort()

    def closing_paths(path: list[str]) -> Iterator[list[str]]:
        for nxt in succ.get(path[-1], []):
            if nxt == path[0]:
                yield path
            elif nxt not in path:
                yield from closing_paths([*path, nxt])

    pairs = sorted({(flows[i].source, flows[i].target) for i in (range(len(flows)) if starts is None else starts)
                    if flows[i].source != flows[i].target})
    cycles: set[tuple[str, ...]] = set()
    for path in (p for pair in pairs for p in closing_paths(list(pair))):
        k = path.index(min(path))  # one rotation per cycle
        cycles.add(tuple(path[k:] + path[:k]))
        if len(cycles) >= limit:
            break
    return sorted(cycles)


def cycle_flows(flows: Sequence, cycle: tuple[str, ...]) -> list[int]:
    """The indexes of the flows along `cycle`, in its order (every flow of a pair)."""
    ring = [*cycle, cycle[0]]
    return [i for a, b in zip(ring, ring[1:]) for i, f in enumerate(flows) if (f.source, f.target) == (a, b)]


@dataclass(frozen=True)
class ReturningCopy:
    """A topic that, copied round a cycle, arrives back on the cluster it began on."""
    trail: tuple[tuple[str, str], ...]  # (cluster, topic name) from the start, round and back
    endless: bool  # the copy that came back is selected again: it goes round for ever

    def describe(self) -> str:
        return " -> ".join(f"{name!r} on {cluster}" for cluster, name in self.trail)


def returning_copy(flows: Sequence, cycle: tuple[str, ...]) -> ReturningCopy | None:
    """The first example topic whose copies come back round `cycle`, trying each
    starting cluster and each flow's example names; None when none can."""
    indexes = cycle_flows(flows, cycle)
    ring = [flows[i].selection() for i in indexes]
    if len(ring) != len(cycle):  # duplicate flows of a pair are refused elsewhere
        return None
    for k in range(len(ring)):
        order = ring[k:] + ring[:k]
        for topic in _example_topics(order):
            found = _walk(order, topic)
            if found is not None:
                return found
    return None


def _example_topics(order: list[FlowSelection]) -> list[str]:
    names = [HEARTBEATS]  # MM2 copies heartbeats whatever the topic filter says
    for selection in order:
        for pattern in selection.topics:
            names += examples(pattern)
    return list(dict.fromkeys(n for n in names if n))


def _walk(order: list[FlowSelection], topic: str) -> ReturningCopy | None:
    start = order[0].source
    trail = [(start, topic)]
    name = topic
    for selection in order:
        if not selection.selects(name):
            return None
        name = selection.remote(name)
        trail.append((selection.target, name))
    assert trail[-1][0] == start
    return ReturningCopy(tuple(trail), endless=order[0].selects(name))
