"""The topology's optional extras, images run as they are on a platform that
runs containers: Kafka UI (one, every cluster) and kafka-exporter (one per
cluster, scraped by Prometheus). Described here once for every such platform
(its `run`)."""
from __future__ import annotations

from dataclasses import replace

from mirrorstack.platforms.descriptions import ImageService, ScrapeTarget

KAFKA_UI = ImageService("kafka-ui", "kafka_ui", 8080, user=1000, publish=True)  # its image's user and port
KAFKA_EXPORTER_PORT, KAFKA_EXPORTER_USER = 9308, 65534  # nobody


def run_extras(platform, settings, clusters, opts=None) -> list[ScrapeTarget]:
    """Run the extras `settings` (the topology's `monitoring`) turn on for `clusters`
    (alias → KafkaCluster); returns the kafka-exporters' scrape targets."""
    targets = []
    if settings.kafka_ui:
        env = tuple(pair for i, (alias, cluster) in enumerate(sorted(clusters.items())) for pair in (
            (f"KAFKA_CLUSTERS_{i}_NAME", alias), (f"KAFKA_CLUSTERS_{i}_BOOTSTRAPSERVERS", cluster.bootstrap_servers)))
        platform.run(replace(KAFKA_UI, env=env), opts=opts)
    if settings.kafka_exporter:
        for alias, cluster in sorted(clusters.items()):
            service = f"kafka-exporter-{alias}"
            args = cluster.bootstrap_servers.apply(lambda servers: [f"--kafka.server={b}" for b in servers.split(",")])
            ran = platform.run(ImageService(service, "kafka_exporter", KAFKA_EXPORTER_PORT, args=args,
                                            user=KAFKA_EXPORTER_USER), opts=opts)
            targets.append(ScrapeTarget(service, "%s:%d" % ran.address, {"cluster": alias, "role": "kafka-exporter"}))
    return targets
