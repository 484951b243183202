"""mirrorstack: Kafka MirrorMaker 2 replication topologies as Pulumi stacks.

One folder per concept (model, kafka, connect, mirror, certificates, failover,
monitoring, plan, validation, platforms); docs/design.md says where to find
what. The model and the generators import nothing from pulumi.
"""
