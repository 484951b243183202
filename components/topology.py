"""ReplicationTopology: wires a validated Topology into clusters, Connect and flows."""
from __future__ import annotations

import hashlib
import json

import pulumi

from mirrorstack import extras
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.connect.args import ConnectClusterArgs
from mirrorstack.connect.cluster import ConnectCluster
from mirrorstack.connect.supervision import run_supervisor
from mirrorstack.failover.args import FailoverSwitchArgs
from mirrorstack.failover.drill_resource import FailoverDrill
from mirrorstack.failover.switch import FailoverSwitch, failover_output, flow_piece
from mirrorstack.kafka import acls
from mirrorstack.kafka.acl_resource import KafkaAcls
from mirrorstack.kafka.args import KafkaClusterArgs
from mirrorstack.kafka.cluster import KafkaCluster
from mirrorstack.mirror.args import MirrorMaker2Args
from mirrorstack.mirror.connectors import (PRODUCER_OVERRIDE, connector_names, mirror_connector_configs, push_overrides,
                                         throughput_settings)
from mirrorstack.mirror.resource import MirrorMaker2
from mirrorstack.monitoring.args import MonitoringArgs
from mirrorstack.monitoring.component import Monitoring
from mirrorstack.validation.args import SparkValidationJobArgs
from mirrorstack.validation.continuous import run_continuous_validation
from mirrorstack.validation.job import SparkValidationJob


class ReplicationTopology(pulumi.ComponentResource):
    """Every component of a topology, built from ReplicationTopologyArgs.
    Outputs: `clusters` (alias → bootstrap servers), `connect` (name → REST
    URL), `flows` (flow → connector states), `validation` (the Spark validation
    job's report, when the topology has a `validation` section; else None),
    `monitoring` (the Monitoring component when it has a `monitoring` section),
    `certificates` (secured deployed clusters: alias → CA fingerprint and
    expiry, each certificate's expiry, the CA rotation phase; else None),
    `continuous_validation` (the continuous validator's /metrics URL, with
    `validation.mode` continuous or both; else None)."""

    def _override_allowlist(self, topology, flows) -> list[str]:
        """Client settings the connectors of these flows override, when one of
        them pushes (its target address and security, every flow's throughput
        settings and any `*.override.*` the flows set); [] (Kafka's default
        policy, All) when none pushes."""
        push = [f for f in flows if topology.connect[f.connect].kafka != f.target]
        if not push:
            return []
        keys = set()
        for flow in push:
            target = self.clusters[flow.target]
            keys |= {k.removeprefix(PRODUCER_OVERRIDE) for k in push_overrides("-", target.client_settings)}
        for flow in (f.description() for f in flows):
            keys |= {k.removeprefix(PRODUCER_OVERRIDE) for k in throughput_settings(flow) if k.startswith(PRODUCER_OVERRIDE)}
            for props in flow.overrides.by_kind().values():
                keys |= {k.split(".override.", 1)[1] for k in props
                         if k.startswith((PRODUCER_OVERRIDE, "consumer.override.", "admin.override."))}
        return sorted(keys)

    def __init__(self, name: str, args: ReplicationTopologyArgs, opts: pulumi.ResourceOptions | None = None):
        for extra in extras.required_by(args.topology.platform, args.topology.validation is not None):
            extras.require(extra)  # before any resource: a missing extra named with its install command
        super().__init__("mirrorstack:topology:ReplicationTopology", name, None, opts)
        self.name_prefix = f"{name}-"  # every resource below: <name>-<its name> (mirrorstack.naming)
        topology, platform, stack = args.topology, args.platform, args.stack
        child = pulumi.ResourceOptions(parent=self)
        metrics = topology.monitoring is not None
        keys = args.cluster_secret_keys or {}
        self.clusters = {alias: KafkaCluster(alias, KafkaClusterArgs(
            cluster=spec, platform=platform, stack=stack, metrics=metrics, secret_keys=frozenset(keys.get(alias, ())),
            secrets=pulumi.Output.from_input(args.cluster_secrets).apply(lambda d, a=alias: (d or {}).get(a))
            if keys.get(alias) else None, quorum_guard=(args.quorum_guards or {}).get(alias),
            authorization=topology.authorizes(alias),
            principals=tuple(n for n, p in topology.principals.items() if p.cluster == alias)), opts=child)
            for alias, spec in topology.clusters.items()}
        by_connect = topology.flows_by_connect()
        # Group ids carry the stack (mirrorstack.stack_history) unless the spec names one.
        groups = {name: pulumi.Output.from_input(spec.group_id or (args.connect_groups or {}).get(name)
                                                 or f"mirrorstack-{stack}-{name}")
                  for name, spec in topology.connect.items()}
        self.acls = self._acls(topology, groups)
        secrets_of_connect = pulumi.Output.secret(pulumi.Output.from_input(args.connect_secrets).apply(
            lambda d: d or {})) if args.connect_secrets is not None else None
        self.connect = {name: ConnectCluster(name, ConnectClusterArgs(
            spec=spec, kafka=self.clusters[spec.kafka], platform=platform, metrics=metrics,
            exactly_once=any(f.exactly_once for f in by_connect[name]),
            clients=[self.clusters[a] for a in dict.fromkeys(x for f in by_connect[name] for x in (f.source, f.target))],
            group_id=groups[name], override_allowlist=self._override_allowlist(topology, by_connect[name]),
            rest_password=secrets_of_connect.apply(lambda d, n=name: (d.get(n) or {}).get("password"))
            if secrets_of_connect is not None else None),
            opts=child) for name, spec in topology.connect.items()}
        for target, merged in topology.identity_merges().items():
            # Allowed (the classic aggregation), but say it where a reviewer looks.
            pulumi.log.info(f"identity policy: {', '.join(merged)} merge same-named topics into {target}",
                            resource=self)
        self.switch = self._failover_switch(topology, platform) if topology.failover is not None else None
        self.flows = {}
        for flow in topology.flows:
            source, target = self.clusters[flow.source], self.clusters[flow.target]
            connect, spec = self.connect[flow.connect], topology.connect[flow.connect]
            # Workers mirrorstack does not run read secrets through references of their own.
            refs = spec.external.secret_references if spec.is_external else {}
            clients = {side.alias: {**side.client_settings, **refs.get(side.alias, {})} for side in (source, target)}
            described = flow.description()  # what the generator and the MirrorMaker2 component take
            configs = pulumi.Output.all(source.bootstrap_servers, target.bootstrap_servers, groups[flow.connect]).apply(
                lambda args, flow=described, rf=topology.replication_factor(flow), clients=clients,
                push=spec.kafka != flow.target: mirror_connector_configs(
                    flow, replication_factor=rf,
                    source_bootstrap=args[0], target_bootstrap=args[1],
                    source_client=clients[flow.source], target_client=clients[flow.target],
                    owner=stack, push=push, offsets_topic=f"{args[2]}-offsets",
                    # foreign workers have no provider for the reference
                    consumer_rack=None if spec.is_external else platform.rack()))
            self.flows[flow.name] = MirrorMaker2(flow.name, MirrorMaker2Args(
                flow=described, connect_url=connect.rest_url, connectors=configs,
                secrets_digest=None if spec.is_external else _secrets_digest(source, target),
                connect_urls=connect.rest_urls if len(connect.workers) > 1 or spec.is_external else None,
                connect_auth=connect.rest_credentials, connect=flow.connect, connect_ca_file=connect.ca_file,
                restart_trigger=flow.restart_trigger, state=topology.flow_state(flow)),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*connect.workers, *source.ready, *target.ready,
                                                                     *self._after_switch(topology, flow)]))

        self.drill = self._failover_drill(topology)
        self.supervisors = self._supervisors(topology, platform, by_connect, metrics)

        validator, self.continuous_validation = [], None
        if topology.validates_continuously:
            target, self.continuous_validation = run_continuous_validation(
                topology, self.clusters, platform, list(self.flows.values()), opts=child)
            validator.append(target)

        self.monitoring = None
        if metrics:
            self.monitoring = Monitoring("monitoring", MonitoringArgs(
                topology=topology, clusters=self.clusters, connect=self.connect, platform=platform,
                grafana_password=args.grafana_password, services=validator,
                drill=self.drill.report if self.drill is not None else None), opts=child)

        self.validation = None
        if topology.validation is not None and topology.validation.runs_once:
            self.validation = SparkValidationJob("validation", SparkValidationJobArgs(
                topology=topology, clusters=self.clusters, platform=platform,
                flows=[*self.flows.values(), *([self.drill] if self.drill is not None else [])],
                run_id=args.validation_run_id, drill=self.drill.report if self.drill is not None else None),
                opts=child)

        self.cluster_outputs = pulumi.Output.all(
            **{alias: c.bootstrap_servers for alias, c in self.clusters.items()})
        self.connect_outputs = pulumi.Output.all(**{n: c.rest_url for n, c in self.connect.items()})
        self.node_ports = {alias: c.node_ports for alias, c in self.clusters.items() if c.node_ports}
        credentials = {n: c.rest_credentials for n, c in self.connect.items() if c.rest_credentials is not None}
        self.connect_credentials = pulumi.Output.secret(pulumi.Output.all(**credentials)) if credentials else None
        users = {name: {"cluster": p.cluster, "username": name,
                        "mechanism": topology.clusters[p.cluster].security.sasl_mechanism,
                        "password": self.clusters[p.cluster].principal_passwords[name]}
                 for name, p in topology.principals.items()}
        self.principal_credentials = pulumi.Output.secret(pulumi.Output.all(**users)) if users else None
        self.flow_outputs = pulumi.Output.all(**{n: f.states for n, f in self.flows.items()})
        self.validation_output = self.validation.report if self.validation else None
        self.connect_groups = pulumi.Output.all(**{n: c.group_id for n, c in self.connect.items()
                                                   if not topology.connect[n].is_external})
        self.failover_output = failover_output(self.switch, self.drill) if self.switch is not None else None
        certs = {alias: c.tls.certificates for alias, c in self.clusters.items() if c.tls is not None}
        self.certificate_outputs = pulumi.Output.all(**certs) if certs else None
        self.register_outputs({"clusters": self.cluster_outputs, "connect": self.connect_outputs,
                               "flows": self.flow_outputs, "validation": self.validation_output,
                               "continuous_validation": self.continuous_validation,
                               "failover": self.failover_output, "certificates": self.certificate_outputs})

    def _supervisors(self, topology, platform, by_connect, metrics: bool) -> dict:
        """Each deployed Connect group's self-healing supervisor, watching the
        connectors of its flows (with the state the topology wants each in); its
        metrics join the group's scrape targets."""
        supervisors = {}
        for name, spec in topology.connect.items():
            if spec.is_external or not spec.self_healing.enabled:
                continue
            flows = [self.flows[f.name] for f in by_connect[name]]
            # From the model, not the flows' outputs: known in a preview, so changing a flow's
            # connectors shows no update of the supervisor unless their names or states change.
            connectors = {n: topology.flow_state(f) for f in by_connect[name] for n in connector_names(f.description())}
            connect = self.connect[name]
            resource, target = run_supervisor(
                name, spec=spec, kafka_alias=spec.kafka, platform=platform, connectors=connectors,
                rest_credentials=connect.rest_credentials,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*connect.workers, *flows]))
            # Where its /metrics answers (in the platform's network on docker/kubernetes).
            supervisors[name] = pulumi.Output.all(resource.urn).apply(lambda _, t=target: f"http://{t.address}/metrics")
            if metrics:
                connect.scrape_targets.append(target)
        return supervisors

    def _acls(self, topology, groups) -> dict[str, KafkaAcls]:
        """One KafkaAcls per authorizing cluster: what its Connect groups, the
        flows and the application principals need there. Clients of the
        cluster (Connect, so MM2 and the validation job) wait for it. On
        external clusters nothing is created: the preview lists what to grant."""
        authorizing = [a for a in topology.clusters if topology.authorizes(a)]
        external = [a for a in topology.clusters if topology.clusters[a].is_external
                    and any(a in (f.source, f.target) for f in topology.flows)]
        if not authorizing and not external:
            return {}
        principals = {**{a: acls.client_principal(a, topology.clusters[a].security) for a in authorizing},
                      **{a: acls.external_principal(topology.clusters[a].external.security) for a in external}}
        planned = pulumi.Output.all(**groups).apply(
            lambda ids: acls.topology_acls(topology, [*authorizing, *external], principals, ids))
        for alias in external:
            planned.apply(lambda p, a=alias: pulumi.log.info(acls.external_plan(a, p[a]), resource=self))
        made = {}
        for alias in authorizing:
            cluster = self.clusters[alias]
            access = cluster.admin_access
            users = cluster.principal_passwords if access["mechanism"] != "PLAIN" else {}  # PLAIN's are in its JAAS
            made[alias] = KafkaAcls(f"{alias}-acls", cluster=alias, bootstrap=access["bootstrap"],
                                    admin_keystore=pulumi.Output.secret(access["admin_keystore"]),
                                    truststore=access["truststore"],
                                    acls=planned.apply(lambda p, a=alias: acls.keyed(p[a])),
                                    users=pulumi.Output.secret(pulumi.Output.all(**users)) if users else None,
                                    mechanism=access["mechanism"], tunnels=access["tunnels"],
                                    opts=pulumi.ResourceOptions(parent=self, depends_on=cluster.ready))
            cluster.client_resources.append(made[alias])  # Connect (so MM2, validation) waits for its rights
        return made

    def _failover_switch(self, topology, platform) -> FailoverSwitch:
        """The failover section's switch: the two flows' pieces, the two sides'
        addresses and client settings, the Connect REST credentials (a secret)."""
        fo = topology.failover
        forward, reverse = topology.forward_flow(), topology.reverse_flow()
        flows = [f for f in (forward, reverse) if f is not None]
        clusters = {alias: {"bootstrap": self.clusters[alias].bootstrap_servers,
                            "client": dict(self.clusters[alias].client_settings)} for alias in (fo.primary, fo.standby)}
        auth = {f.connect: self.connect[f.connect].rest_credentials for f in flows
                if self.connect[f.connect].rest_credentials is not None}
        after = [r for f in flows for r in self.connect[f.connect].workers]
        # Unplanned: the side left is lost, and a failed restart of its services must not hold the switch.
        sides = (fo.active,) if fo.unplanned else (fo.primary, fo.standby)
        after += [r for alias in sides for r in (*self.clusters[alias].ready, *self.clusters[alias].client_resources)]
        self.failover_args = FailoverSwitchArgs(
            failover=fo, clusters=clusters, forward=flow_piece(forward, self.connect[forward.connect]),
            reverse=flow_piece(reverse, self.connect[reverse.connect]) if reverse is not None else None,
            connect_auth=auth or None, runner=platform.switch_runner((fo.primary, fo.standby)))
        return FailoverSwitch("failover", self.failover_args, opts=pulumi.ResourceOptions(parent=self, depends_on=after))

    def _failover_drill(self, topology) -> FailoverDrill | None:
        """failover.drill: after the switch, on the pair's flows as this `up` leaves them."""
        fo = topology.failover
        if fo is None or fo.drill is None:
            return None
        pair = [self.flows[f.name] for f in topology.flows if {f.source, f.target} == {fo.primary, fo.standby}]
        return FailoverDrill("failover-drill", self.failover_args,
                             opts=pulumi.ResourceOptions(parent=self, depends_on=[self.switch, *pair]))

    def _after_switch(self, topology, flow) -> list:
        """The failover pair's flows change only after the switch: its gate runs first."""
        fo = topology.failover
        if self.switch is None or {flow.source, flow.target} != {fo.primary, fo.standby}:
            return []
        return [self.switch]


def _secrets_digest(*clusters) -> pulumi.Output[str] | None:
    """A digest of the clusters' secret client files: when it changes the flow's
    connectors restart and re-read their `${file:...}` references."""
    files = [c.client_files for c in clusters if c.client_files is not None]
    if not files:
        return None
    return pulumi.Output.all(*files).apply(
        lambda contents: hashlib.sha256(json.dumps(contents, sort_keys=True).encode()).hexdigest())
