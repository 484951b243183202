"""Prints the replication plan (components/plan/replication_plan.py) on every preview and
up, as an info line of the topology: `pulumi preview --diff` shows it under
Diagnostics, so the pull-request comment carries it. The flows' specs are
exported (`replication_plan`) so the next preview can say what changed."""
from __future__ import annotations

import pulumi

from components.plan import replication_plan as plan
from components.plan.live_topics import read_names


def report_plan(topology, clusters, previous: pulumi.Output, resource: pulumi.Resource) -> dict:
    """Logs the plan once the clusters' addresses are known; returns the specs to export."""
    specs = {flow.name: plan.plan_spec(flow) for flow in topology.flows}
    aliases = sorted({a for s in specs.values() for a in (s["source"], s["target"])})

    def show(args):
        old, *servers = args
        live = {alias: read_names(bootstrap, clusters[alias].client_settings)
                for alias, bootstrap in zip(aliases, servers)}
        pulumi.log.info(plan.render(plan.build(specs, old, live)), resource=resource)

    if specs:
        pulumi.Output.all(previous, *[clusters[a].bootstrap_servers for a in aliases]).apply(show)
    return specs
