"""The mirrorstack Pulumi program: read the stack's topology, build it.

The topology model and components arrive with the aggregation stack; until
then the program only reports the pinned tool versions it deploys.
"""
import pulumi

from components import versions

pulumi.export("versions", {
    "kafka": versions.kafka_version(),
    "jmx_exporter": versions.jmx_exporter_version(),
    "spark": versions.spark_version(),
    "pulumi": versions.pulumi_version(),
})
