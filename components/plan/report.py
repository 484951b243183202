"""Prints the replication plan (components/plan/replication_plan.py) on every preview and
up, as an info line of the topology: `pulumi preview --diff` shows it under
Diagnostics, so the pull-request comment carries it. The flows' descriptions are
exported (`replication_plan`) so the next preview can say what changed.

Clusters this update creates are not asked (they have no topics yet and do not
answer: asking would only wait LIVE_TIMEOUT for nothing); the others are asked
all at once, so clusters that do not answer cost one wait, not one each."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pulumi

from mirrorstack.plan import replication_plan as plan
from mirrorstack.plan.live_topics import read_names
from mirrorstack.plan.replication_plan import Live


def read_clusters(servers: dict[str, str], client_settings: dict[str, dict], created=()) -> dict[str, Live]:
    """alias → Live: the clusters in `created` as Live.to_be_created(), the others read in parallel."""
    asked = [alias for alias in servers if alias not in set(created)]
    with ThreadPoolExecutor(max_workers=max(len(asked), 1)) as pool:
        read = dict(zip(asked, pool.map(lambda a: read_names(servers[a], client_settings[a]), asked)))
    return {alias: read[alias] if alias in read else Live.to_be_created() for alias in servers}


def report_plan(topology, clusters, previous: pulumi.Output, resource: pulumi.Resource,
                created: pulumi.Input[list[str]] | None = None) -> dict:
    """Logs the plan once the clusters' addresses are known; returns the flows to export.
    `created`: the aliases of clusters this update creates (mirrorstack.stack_history.new_clusters)."""
    specs = {flow.name: flow.description() for flow in topology.flows}
    aliases = sorted({a for s in specs.values() for a in (s.source, s.target)})

    def show(args):
        old, new, *servers = args
        live = read_clusters(dict(zip(aliases, servers)), {a: clusters[a].client_settings for a in aliases}, new)
        pulumi.log.info(plan.render(plan.build(specs, plan.previous(old), live)), resource=resource)

    if specs:
        pulumi.Output.all(previous, created or [], *[clusters[a].bootstrap_servers for a in aliases]).apply(show)
    return plan.exported(specs)
