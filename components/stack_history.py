"""What this stack's last deployment exported, for names that must not change
under a deployed stack (a Connect group's id names its storage topics, which
hold the connectors and their source offsets)."""
from __future__ import annotations

import pulumi


def own_stack(stack: str) -> pulumi.StackReference:
    """A reference to this stack's own last outputs; make one per program (a
    second one of the same name would clash) and pass it around."""
    return pulumi.StackReference(f"{pulumi.get_organization()}/{pulumi.get_project()}/{stack}")


def previous_output(own: pulumi.StackReference, key: str) -> pulumi.Output:
    """An output of the stack's last deployment (None when it has none); its
    value unsecreted: only outputs that are never secret are read this way."""
    return pulumi.Output.unsecret(own.outputs).apply(lambda o: (o or {}).get(key))


def connect_group_ids(stack: str, names, own: pulumi.StackReference | None = None) -> dict[str, pulumi.Output[str]]:
    """A Connect group id per deployed Connect cluster: the one the stack's last
    deployment exported (`connect_groups`); `mirrorstack-<name>` for a cluster a
    stack from before that output already runs; else `mirrorstack-<stack>-<name>`,
    so stacks whose Connect clusters share one Kafka cluster never share a group."""
    names = list(names)
    if not names:
        return {}
    own = own or own_stack(stack)

    def pick(groups, connect, name: str) -> str:
        if groups is not None:  # `[]` when every Connect cluster was external
            return (groups or {}).get(name) or f"mirrorstack-{stack}-{name}"
        if name in (connect or {}):
            return f"mirrorstack-{name}"  # deployed before group ids carried the stack
        return f"mirrorstack-{stack}-{name}"
    # `outputs` is secret as soon as any output is; the two read here never are.
    previous = pulumi.Output.unsecret(own.outputs)
    return {name: previous.apply(lambda o, n=name: pick((o or {}).get("connect_groups"), (o or {}).get("connect"), n))
            for name in names}
