"""ReplicationTopology: wires a validated Topology into clusters, Connect and flows."""
from __future__ import annotations

import pulumi

import hashlib
import json

from components.config.mirror import mirror_connector_configs
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
    `cluster_secrets` (a secret: alias → {client setting: value}; `password`
    is the SASL password) are an external cluster's secret client settings;
    `cluster_secret_keys` (alias → the keys set there) is what the graph is
    built from (a secret's value is known only at deployment).
    `validation_run_id` overrides `validation.run_id` (a re-run trigger)."""

    def __init__(self, name: str, topology, platform, *, stack: str, validation_run_id: str | None = None,
                 grafana_password: pulumi.Input[str] | None = None, cluster_secrets: pulumi.Input[dict] | None = None,
                 cluster_secret_keys: dict[str, set[str]] | None = None, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mirrorstack:topology:ReplicationTopology", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        metrics = topology.monitoring is not None
        keys = cluster_secret_keys or {}
        self.clusters = {alias: KafkaCluster(
            alias, spec, platform, stack=stack, metrics=metrics, secret_keys=frozenset(keys.get(alias, ())),
            secrets=pulumi.Output.from_input(cluster_secrets).apply(lambda d, a=alias: (d or {}).get(a))
            if keys.get(alias) else None, opts=child) for alias, spec in topology.clusters.items()}
        by_connect = topology.flows_by_connect()
        self.connect = {name: ConnectCluster(
            name, spec, self.clusters[spec.kafka], platform, metrics=metrics,
            exactly_once=any(f.exactly_once for f in by_connect[name]),
            clients=[self.clusters[a] for a in dict.fromkeys(x for f in by_connect[name] for x in (f.source, f.target))],
            opts=child) for name, spec in topology.connect.items()}
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
            self.flows[flow.name] = MirrorMaker2(
                flow, connect_url=connect.rest_url, connectors=configs, secrets_digest=_secrets_digest(source, target),
                connect_urls=connect.rest_urls if len(connect.workers) > 1 else None,
                connect_auth=connect.rest_credentials,
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
        credentials = {n: c.rest_credentials for n, c in self.connect.items() if c.rest_credentials is not None}
        self.connect_credentials = pulumi.Output.secret(pulumi.Output.all(**credentials)) if credentials else None
        self.flow_outputs = pulumi.Output.all(**{n: f.states for n, f in self.flows.items()})
        self.validation_output = self.validation.report if self.validation else None
        self.register_outputs({"clusters": self.cluster_outputs, "connect": self.connect_outputs,
                               "flows": self.flow_outputs, "validation": self.validation_output})


def _secrets_digest(*clusters) -> pulumi.Output[str] | None:
    """A digest of the clusters' secret client files: when it changes the flow's
    connectors restart and re-read their `${file:...}` references."""
    files = [c.client_files for c in clusters if c.client_files is not None]
    if not files:
        return None
    return pulumi.Output.all(*files).apply(
        lambda contents: hashlib.sha256(json.dumps(contents, sort_keys=True).encode()).hexdigest())
