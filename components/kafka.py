"""KafkaCluster: one KRaft controller plus brokers, or an existing (external) cluster."""
from __future__ import annotations

import base64
import uuid

import pulumi

from components.config import broker, jvm
from components.config.prometheus import ScrapeTarget
from components.config.properties import render_properties

CONTROLLER_ID = 1


def cluster_id(stack: str, alias: str) -> str:
    """A stable KRaft cluster id per stack and alias (the storage format needs
    the same id on every node, and re-running `up` must not change it)."""
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"mirrorstack/{stack}/{alias}").bytes
    cid = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return cid if not cid.startswith("-") else "A" + cid[1:]


class KafkaCluster(pulumi.ComponentResource):
    """Outputs: `bootstrap_servers` (comma-separated host:port). With `metrics`,
    every node runs the JMX exporter; `scrape_targets` lists them for Prometheus."""

    bootstrap_servers: pulumi.Output[str]

    def __init__(self, alias: str, cluster, platform, *, stack: str, metrics: bool = False,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("mirrorstack:kafka:KafkaCluster", alias, None, opts)
        self.alias = alias
        self.broker_count = cluster.brokers
        self.scrape_targets: list[ScrapeTarget] = []
        if cluster.external is not None:
            self.bootstrap_servers = _external_servers(alias, cluster.external, pulumi.ResourceOptions(parent=self))
            self.client_settings = {"security.protocol": cluster.external.security.protocol,
                                    **cluster.external.security.properties}
            self.ready: list[pulumi.Resource] = []
            self.register_outputs({"bootstrap_servers": self.bootstrap_servers})
            return
        self.client_settings = {}
        controller = f"{alias}-controller"
        ctrl_host, ctrl_port = platform.address(controller, "controller")
        voters = broker.quorum_voters({CONTROLLER_ID: f"{ctrl_host}:{ctrl_port}"})
        format_args = ["format", "--ignore-formatted", "-t", cluster_id(stack, alias), "-c", "{dir}/server.properties"]
        child = pulumi.ResourceOptions(parent=self)

        ctrl_props = broker.controller_properties(CONTROLLER_ID, host=ctrl_host, port=ctrl_port, voters=voters,
                                                  log_dir=platform.data_dir(controller), broker_count=cluster.brokers,
                                                  listen_host=platform.listen_host)
        ctrl = platform.run_kafka_java(
            controller, main=jvm.BROKER_MAIN, args=["{dir}/server.properties"], heap="256m",
            files={"server.properties": render_properties(ctrl_props)},
            prepare=[(jvm.STORAGE_TOOL_MAIN, format_args)], metrics=metrics,
            health={"kind": "tcp", "host": ctrl_host, "port": str(ctrl_port)}, opts=child)
        self._scrape(platform, controller, "controller", metrics)

        brokers, addresses = [], []
        for i in range(cluster.brokers):
            name = f"{alias}-broker-{i}"
            host, port = platform.address(name, "kafka")
            addresses.append(f"{host}:{port}")
            props = broker.broker_properties(CONTROLLER_ID + 1 + i, host=host, port=port, voters=voters,
                                             log_dir=platform.data_dir(name), broker_count=cluster.brokers,
                                             listen_host=platform.listen_host, overrides=dict(cluster.settings))
            brokers.append(platform.run_kafka_java(
                name, main=jvm.BROKER_MAIN, args=["{dir}/server.properties"],
                files={"server.properties": render_properties(props)},
                prepare=[(jvm.STORAGE_TOOL_MAIN, format_args)], metrics=metrics,
                health={"kind": "kafka", "bootstrap": f"{host}:{port}", "brokers": "1"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[ctrl])))
            self._scrape(platform, name, "broker", metrics)
        self.ready = [ctrl, *brokers]
        self.bootstrap_servers = pulumi.Output.all(*[b.urn for b in brokers]).apply(lambda _: ",".join(addresses))
        self.register_outputs({"bootstrap_servers": self.bootstrap_servers})

    def _scrape(self, platform, service: str, role: str, metrics: bool) -> None:
        if metrics:
            host, port = platform.metrics_address(service)
            self.scrape_targets.append(ScrapeTarget(f"kafka-{self.alias}", f"{host}:{port}",
                                                    {"cluster": self.alias, "role": role}))


def _external_servers(alias: str, external, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """An external cluster's bootstrap servers: given, or another stack's `clusters` output."""
    if external.from_stack is None:
        return pulumi.Output.from_input(external.bootstrap_servers)
    ref = external.from_stack

    def pick(clusters):
        if not clusters or ref.cluster not in clusters:
            raise ValueError(f"clusters.{alias}.external.from_stack: stack {ref.stack} has no cluster {ref.cluster!r} "
                             f"in its `clusters` output (it has: {', '.join(sorted(clusters or {})) or 'none'})")
        return clusters[ref.cluster]
    return pulumi.StackReference(f"{alias}-from-{ref.stack}", stack_name=ref.stack,
                                 opts=opts).get_output("clusters").apply(pick)
