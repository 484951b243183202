"""ConnectCluster: a distributed Kafka Connect worker group (MirrorMaker 2's runtime)."""
from __future__ import annotations

import pulumi

from components.config import connect, jvm
from components.config.prometheus import ScrapeTarget
from components.config.properties import render_properties


class ConnectCluster(pulumi.ComponentResource):
    """Outputs: `rest_url` (the first worker's REST API). With `metrics`, every
    worker runs the JMX exporter; `scrape_targets` lists them for Prometheus."""

    rest_url: pulumi.Output[str]

    def __init__(self, name: str, spec, kafka, platform, *, metrics: bool = False,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("mirrorstack:connect:ConnectCluster", name, None, opts)
        workers, urls = [], []
        self.scrape_targets: list[ScrapeTarget] = []
        for i in range(spec.workers):
            worker = f"connect-{name}-{i}"
            host, port = platform.address(worker, "rest")
            urls.append("http://%s:%d" % platform.host_address(worker, "rest"))
            props = kafka.bootstrap_servers.apply(lambda servers, host=host, port=port: render_properties(
                connect.worker_properties(f"mirrorstack-{name}", bootstrap_servers=servers, host=host,
                                          rest_port=port, kafka_broker_count=kafka.broker_count,
                                          listen_host=platform.listen_host, overrides=dict(spec.settings))))
            workers.append(platform.run_kafka_java(
                worker, main=jvm.CONNECT_DISTRIBUTED_MAIN, args=["{dir}/worker.properties"],
                files={"worker.properties": props},
                health={"kind": "connect", "url": f"http://{host}:{port}"}, metrics=metrics,
                opts=pulumi.ResourceOptions(parent=self, depends_on=kafka.ready)))
            if metrics:
                m_host, m_port = platform.metrics_address(worker)
                self.scrape_targets.append(ScrapeTarget(f"connect-{name}", f"{m_host}:{m_port}",
                                                        {"cluster": spec.kafka, "role": "connect", "connect": name}))
        self.workers = workers
        self.rest_url = pulumi.Output.all(*[w.urn for w in workers]).apply(lambda _: urls[0])
        self.register_outputs({"rest_url": self.rest_url})
