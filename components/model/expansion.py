"""The flow list shorthands: one flow entry with `sources: [a, b]` or
`targets: [a, b]` stands for one flow per alias, the other fields shared.
Each flow keeps its origin, where it sits in the stack file, so that a message
about it points there (`flows[0].sources[1]`), not into the expansion. Pure.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

from mirrorstack.model.paths import field_path as _path

SHORTHAND = {"sources": "source", "targets": "target"}  # list key -> the flow field it fills


@dataclass(frozen=True)
class FlowOrigin:
    """Where a flow sits in the stack file: `flows[index]`, or item `item` of
    that entry's `key` list (`sources`/`targets`) when it was expanded from one."""

    index: int
    key: str | None = None
    item: int = 0

    def loc(self, rest: tuple = ()) -> tuple:
        """The stack-file location of the model location ('flows', k, *rest)."""
        if self.key and rest[:1] == (SHORTHAND[self.key],):
            return ("flows", self.index, self.key, self.item, *rest[1:])
        return ("flows", self.index, *rest)

    def path(self, field: str | None = None) -> str:
        """`flows[1].target`; the whole flow is `flows[0].targets[2]` when expanded."""
        if field is None:
            return _path(("flows", self.index, self.key, self.item) if self.key else ("flows", self.index))
        return _path(self.loc((field,)))


def expand_flows(entries: list) -> tuple[list, tuple[FlowOrigin, ...], list[str]]:
    """`sources: [a, b]` / `targets: [a, b]` → one flow per alias, other fields shared."""
    flows, origins, problems = [], [], []
    for i, entry in enumerate(entries):
        known = len(problems)
        lists = [many for many in SHORTHAND if isinstance(entry, Mapping) and many in entry]
        for many in lists:
            one, value = SHORTHAND[many], entry[many]
            if one in entry:
                problems.append(f"flows[{i}].{many}: give either {one} or {many}, not both; "
                                f"fix: remove {one}, or add it to {many}")
            if not isinstance(value, list) or not value:
                problems.append(f"flows[{i}].{many}: must be a non-empty list of cluster aliases (got {value!r}); "
                                f"fix: write e.g. `{many}: [a, b]`, or `{one}: a` for one cluster")
        if len(lists) == 2:
            problems.append(f"flows[{i}].targets: sources and targets are both lists; fix: keep one list and "
                            "write a flow entry per alias of the other (pairs are rarely all meant)")
        if len(lists) != 1 or len(problems) > known:
            flows.append(entry)
            origins.append(FlowOrigin(i))
            continue
        (many,) = lists
        shared = {k: v for k, v in entry.items() if k != many}
        for j, alias in enumerate(entry[many]):
            flows.append({**copy.deepcopy(shared), SHORTHAND[many]: alias})
            origins.append(FlowOrigin(i, many, j))
    return flows, tuple(origins), problems
