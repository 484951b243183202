"""What this stack's last deployment exported, for names that must not change
under a deployed stack (a Connect group's id names its storage topics, which
hold the connectors and their source offsets)."""
from __future__ import annotations

import pulumi


def connect_group_ids(stack: str, names) -> dict[str, pulumi.Output[str]]:
    """A Connect group id per deployed Connect cluster: the one the stack's last
    deployment exported (`connect_groups`); `mirrorstack-<name>` for a cluster a
    stack from before that output already runs; else `mirrorstack-<stack>-<name>`,
    so stacks whose Connect clusters share one Kafka cluster never share a group."""
    names = list(names)
    if not names:
        return {}
    own = pulumi.StackReference(f"{pulumi.get_organization()}/{pulumi.get_project()}/{stack}")

    def pick(outputs, name: str) -> str:
        outputs = outputs or {}
        if name in (outputs.get("connect_groups") or {}):
            return outputs["connect_groups"][name]
        if "connect_groups" not in outputs and name in (outputs.get("connect") or {}):
            return f"mirrorstack-{name}"  # deployed before group ids carried the stack
        return f"mirrorstack-{stack}-{name}"
    return {name: own.outputs.apply(lambda o, n=name: pick(o, n)) for name in names}
