"""The mirrorstack Pulumi program: the stack's topology → resources → outputs.

Config (stacks/Pulumi.<stack>.yaml):
  mirrorstack:topology   the topology (schema: components/schema/topology.schema.json)
  mirrorstack:localDir   local platform: where services keep files (default .mirrorstack/<stack>)
  mirrorstack:portBase   local platform: first port of the stack's range (default: from the stack name)
"""
from pathlib import Path

import pulumi

from components.model import load_topology
from components.platforms.local.platform import LocalPlatform
from components.topology import ReplicationTopology

config = pulumi.Config("mirrorstack")
stack = pulumi.get_stack()
topology = load_topology(config.require_object("topology"))  # raises before any resource exists
if topology.platform != "local":
    raise ValueError(f"platform {topology.platform!r} is not available yet: use platform: local")

platform = LocalPlatform(stack, config.get("localDir") or str(Path(".mirrorstack") / stack),
                         port_base=config.get_int("portBase"))
replication = ReplicationTopology(stack, topology, platform, stack=stack)

pulumi.export("clusters", replication.cluster_outputs)
pulumi.export("connect", replication.connect_outputs)
pulumi.export("flows", replication.flow_outputs)
