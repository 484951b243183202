"""edge-to-core: a project of its own that imports mirrorstack's components.

It deploys an `edge` Kafka cluster on this machine and mirrors its `sensors.*`
topics into a cluster another stack already runs, found through that stack's
`clusters` output (a StackReference), so the two stacks stay independent.

Config:
  coreStack    the other stack, e.g. organization/mirrorstack/aggregation
  coreCluster  the alias in its `clusters` output to mirror into (default central)
  localDir, portBase   as in mirrorstack's own program
Installed as a library, mirrorstack finds the tools `make setup` installed
through MIRRORSTACK_TOOLS_DIR (the checkout's .tools).
"""
from pathlib import Path

import pulumi

from mirrorstack.model.spec import Cluster, ExternalCluster, Flow, StackOutput, Topology
from mirrorstack.platforms import make_platform
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.topology import ReplicationTopology

config = pulumi.Config()
stack = pulumi.get_stack()
# The core cluster is whatever the other stack's `clusters` output says when this one deploys.
core = StackOutput(stack=config.require("coreStack"), cluster=config.get("coreCluster") or "central")

# The topology in code, with the same model (and the same checks) as a stack file.
topology = Topology(
    platform="local",
    clusters={"edge": Cluster(brokers=1), "core": Cluster(brokers=1, external=ExternalCluster(from_stack=core))},
    flows=[Flow(source="edge", target="core", topics=["sensors\\..*"], checkpoints=False, heartbeats=False,
                # new sensors.* topics are picked up within 10 s (a demo value; the default is 60 s)
                refresh_seconds=10)],
)
platform = make_platform(topology.platform, stack, local_dir=config.get("localDir") or str(Path(".mirrorstack") / stack),
                         port_base=config.get_int("portBase"))
edge = ReplicationTopology(stack, ReplicationTopologyArgs(topology=topology, platform=platform, stack=stack))

pulumi.export("clusters", edge.cluster_outputs)
pulumi.export("flows", edge.flow_outputs)
