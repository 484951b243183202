"""mirrorstack: Kafka MirrorMaker 2 replication topologies as Pulumi stacks.

Layers (see README): model -> config generators -> platforms -> components.
The model and the generators import nothing from pulumi.
"""
