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


def clusters_new_to_the_stack(topology, outputs: dict | None) -> list[str]:
    """The clusters this stack deploys that its last deployment did not: the
    ones this update creates, which a preview need not ask for topics (they
    have none, and do not answer yet). `outputs`: the last deployment's. A stack
    never deployed (or destroyed) has none, so all its clusters are new; one
    whose outputs lack `clusters` (none such is known, but who can tell) has
    none new: its clusters are asked as before. External clusters are never new."""
    deployed = [alias for alias, cluster in topology.clusters.items() if not cluster.is_external]
    if not outputs:
        return deployed
    if "clusters" not in outputs:
        return []
    return [alias for alias in deployed if alias not in (outputs["clusters"] or {})]


def new_clusters(own: pulumi.StackReference, topology) -> pulumi.Output[list[str]]:
    """clusters_new_to_the_stack of the stack's last outputs."""
    return pulumi.Output.unsecret(own.outputs).apply(lambda o: clusters_new_to_the_stack(topology, o))


def controller_change_problem(alias: str, wanted: int, outputs: dict | None) -> str | None:
    """Refuse a new controller count for a deployed cluster: its KRaft quorum is
    static (every node's `controller.quorum.voters`), so resizing it in place
    would leave nodes that agree on no quorum. `outputs`: the last deployment's."""
    outputs = outputs or {}
    before = (outputs.get("controllers") or {}).get(alias)
    if before is None and "controllers" not in outputs and alias in (outputs.get("clusters") or {}):
        before = 1  # deployed before the `controllers` output: one controller
    if before is None or int(before) == wanted:  # outputs come back as JSON numbers (3.0)
        return None
    before = int(before)
    return (f"clusters.{alias}.controllers: the deployed cluster runs {before} controller(s), not {wanted}, and a "
            f"static KRaft quorum cannot change size in place; fix: set it back to {before}, or move the cluster's "
            f"data elsewhere, remove the cluster (`pulumi up`), then add it again with {wanted}")


def quorum_guards(own: pulumi.StackReference, topology) -> dict[str, pulumi.Output]:
    """Per deployed cluster, an Output that fails (before any of its nodes is
    touched: their files wait for it) when its controller count changed."""
    previous = pulumi.Output.unsecret(own.outputs)

    def check(outputs, alias: str, wanted: int) -> int:
        if problem := controller_change_problem(alias, wanted, outputs):
            raise pulumi.RunError(problem)
        return wanted
    return {alias: previous.apply(lambda o, a=alias, n=cluster.controllers: check(o, a, n))
            for alias, cluster in topology.clusters.items() if not cluster.is_external}
