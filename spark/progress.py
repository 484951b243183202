"""What the wait for the targets saw: which target partitions took records
while the job waited, and at what rate. It is the evidence that a record not
yet arrived is on its way (in flight) rather than stuck behind a FAILED,
paused or stopped task (missing). Pure: the counts come in as data."""
from __future__ import annotations


class WaitProgress:
    """Per target group (its index), each partition's record count at the first
    poll and the last, and which partitions grew in between."""

    def __init__(self):
        self.first: dict[int, dict[int, int]] = {}
        self.last: dict[int, dict[int, int]] = {}
        self.grew: dict[int, set[int]] = {}

    def observe(self, group: int, counts: dict[int, int]) -> None:
        previous = self.last.get(group)
        if previous is None:
            self.first[group] = dict(counts)
            self.grew[group] = set()
        else:
            self.grew[group] |= {p for p, n in counts.items() if n > previous.get(p, 0)}
        self.last[group] = dict(counts)

    def moving(self, group: int) -> set[int]:
        """The target partitions that took at least one record during the wait."""
        return set(self.grew.get(group, ()))

    def taken(self, group: int) -> int:
        """Records the target took during the wait."""
        first, last = self.first.get(group, {}), self.last.get(group, {})
        return sum(max(0, n - first.get(p, 0)) for p, n in last.items())

    def in_flight_bound(self, group: int, waited: float, wait_seconds: float) -> int:
        """The most records still missing that can honestly be called in flight:
        what the target, at the rate it took records during this wait, takes in
        another wait of the same bound. A stalled target gets 0."""
        if waited <= 0:
            return 0
        return int(self.taken(group) / waited * max(wait_seconds, waited))


def partitions_behind(expected: dict[int, int], held: dict[int, int], held_total: int) -> int:
    """Records the target still lacks: per partition it holds (`held`, {partition:
    records}), against what its sources' windows put there (`expected`). Partitions
    the target does not have count in the topic's total only (a wrong partition
    count is the report's `partitions_ok`, not a reason to wait)."""
    short = sum(max(0, n - held[p]) for p, n in expected.items() if p in held)
    return max(short, sum(expected.values()) - held_total)


def why(kind: str) -> str:
    """The reason a record counted where it did, for the report's samples."""
    return {
        "missing": ("no copy on the target, though later records of its partition arrived (or the target holds "
                    "as many records as the window): not on its way"),
        "stalled": ("after the last record of its partition that arrived, and that target partition took no "
                    "record during the wait: stuck (a FAILED, paused or stopped task, or a broken flow)"),
        "in_flight": ("after the last record of its partition that arrived, and that target partition was still "
                      "taking records when the wait ended: on its way"),
    }[kind]
