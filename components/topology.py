"""ReplicationTopology: wires a validated Topology into clusters, Connect and flows."""
from __future__ import annotations

import pulumi

from components.config.mirror import connector_names, connector_secrets, mirror_connector_configs
from components.connect import ConnectCluster
from components.kafka import KafkaCluster
from components.mirror import MirrorMaker2
from components.monitoring import Monitoring
from components.validation import SparkValidationJob


class ReplicationTopology(pulumi.ComponentResource):
    """Outputs: `clusters` (alias → bootstrap servers), `connect` (name → REST
    URL), `flows` (flow → connector states), `validation` (the Spark validation
    job's report, when the topology has a `validation` section; else None),
    `monitoring` (the Monitoring component when it has a `monitoring` section).
    `cluster_secrets` (a secret: alias → {client setting: value}) adds secret
    client settings (e.g. sasl.jaas.config) to the flows of those clusters.
    `validation_run_id` overrides `validation.run_id` (a re-run trigger)."""

    def __init__(self, name: str, topology, platform, *, stack: str, validation_run_id: str | None = None,
                 grafana_password: pulumi.Input[str] | None = None, cluster_secrets: pulumi.Input[dict] | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("mirrorstack:topology:ReplicationTopology", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        metrics = topology.monitoring is not None
        self.clusters = {alias: KafkaCluster(alias, spec, platform, stack=stack, metrics=metrics, opts=child)
                         for alias, spec in topology.clusters.items()}
        self.connect = {name: ConnectCluster(name, spec, self.clusters[spec.kafka], platform, metrics=metrics,
                                             opts=child)
                        for name, spec in topology.connect.items()}
        for target, merged in topology.identity_merges().items():
            # Allowed (the classic aggregation), but say it where a reviewer looks.
            pulumi.log.info(f"identity policy: {', '.join(merged)} merge same-named topics into {target}",
                            resource=self)
        self.flows = {}
        for flow in topology.flows:
            source, target = self.clusters[flow.source], self.clusters[flow.target]
            connect = self.connect[flow.connect]
            configs = pulumi.Output.all(source.bootstrap_servers, target.bootstrap_servers).apply(
                lambda servers, flow=flow, source=source, target=target: mirror_connector_configs(
                    flow, replication_factor=topology.replication_factor(flow),
                    source_bootstrap=servers[0], target_bootstrap=servers[1],
                    source_client=source.client_settings, target_client=target.client_settings))
            secrets = None
            if cluster_secrets is not None:
                secrets = pulumi.Output.from_input(cluster_secrets).apply(
                    lambda by_alias, flow=flow: _flow_secrets(topology, flow, by_alias))
            self.flows[flow.name] = MirrorMaker2(
                flow, connect_url=connect.rest_url, connectors=configs, secrets=secrets,
                restart_trigger=flow.restart_trigger,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*connect.workers, *source.ready, *target.ready]))

        self.monitoring = None
        if metrics:
            self.monitoring = Monitoring("monitoring", topology, self.clusters, self.connect, platform,
                                         grafana_password=grafana_password, opts=child)

        self.validation = None
        if topology.validation is not None:
            self.validation = SparkValidationJob(
                "validation", topology, self.clusters, platform, flows=list(self.flows.values()),
                run_id=validation_run_id, opts=child)

        self.cluster_outputs = pulumi.Output.all(
            **{alias: c.bootstrap_servers for alias, c in self.clusters.items()})
        self.connect_outputs = pulumi.Output.all(**{n: c.rest_url for n, c in self.connect.items()})
        self.flow_outputs = pulumi.Output.all(**{n: f.states for n, f in self.flows.items()})
        self.validation_output = self.validation.report if self.validation else None
        self.register_outputs({"clusters": self.cluster_outputs, "connect": self.connect_outputs,
                               "flows": self.flow_outputs, "validation": self.validation_output})


def _flow_secrets(topology, flow, by_alias: dict | None) -> dict:
    by_alias = by_alias or {}
    unknown = sorted(set(by_alias) - set(topology.clusters))
    if unknown:
        raise ValueError(f"mirrorstack:clusterSecrets: unknown cluster(s) {', '.join(unknown)}; "
                         f"fix: use one of {', '.join(sorted(topology.clusters))}")
    return connector_secrets(connector_names(flow), source_secrets=by_alias.get(flow.source),
                             target_secrets=by_alias.get(flow.target))
