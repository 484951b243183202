"""KafkaCluster: KRaft controllers (1, 3 or 5) plus brokers, or an existing (external) cluster."""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

import pulumi

from mirrorstack import naming
from mirrorstack.certificates.args import ClusterCertificatesArgs
from mirrorstack.certificates.resource import ClusterCertificates
from mirrorstack.kafka import acls, broker
from mirrorstack.kafka.broker_logins import BrokerLogins
from mirrorstack.kafka.args import KafkaClusterArgs
from mirrorstack.platforms import jvm
from mirrorstack.platforms.base import ServiceGroup
from mirrorstack.kafka import security
from mirrorstack.certificates.lifecycle import CLIENT
from mirrorstack.monitoring.jmx import jmx_exporter_config
from mirrorstack.platforms.descriptions import TOOLS_CONFIG, JavaService, ScrapeTarget, ServiceSet
from mirrorstack.properties import render_properties
from mirrorstack.model.spec import Resources
from mirrorstack.secrets import GeneratedPassword

CONTROLLER_ID = 1  # the first controller; broker i is CONTROLLER_ID + 1 + i (2, 3, …)
# Controllers after the first (clusters.<alias>.controllers: 3 or 5): node ids
# 1001, 1002, … never meet a broker's (at most 9 brokers).
EXTRA_CONTROLLER_ID_BASE = 1000
# The controller holds only the metadata log: a fixed small JVM.
CONTROLLER_RESOURCES = Resources(heap="256m", memory_mib=768)


def cluster_id(stack: str, alias: str) -> str:
    """A stable KRaft cluster id per stack and alias (the storage format needs
    the same id on every node, and re-running `up` must not change it)."""
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"mirrorstack/{stack}/{alias}").bytes
    cid = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return cid if not cid.startswith("-") else "A" + cid[1:]


def controller_nodes(alias: str, count: int) -> list[tuple[str, int]]:
    """(service name, node id) of a cluster's controllers. The first keeps the
    name and id of single-controller clusters (deployed stacks must not see them
    change); the others are `<alias>-controller-<k>` with id 1000 + k."""
    return [(f"{alias}-controller", CONTROLLER_ID),
            *((f"{alias}-controller-{k}", EXTRA_CONTROLLER_ID_BASE + k) for k in range(1, count))]


@dataclass(frozen=True)
class _NodeCommon:
    """What every node of a deployed cluster shares: the quorum, the storage format's
    arguments, the certificates (None: plaintext), the authorizer's settings and the
    JMX exporter's config (None: no metrics)."""
    voters: str
    format_args: list[str]
    certs: ClusterCertificates | None
    authorizer: dict[str, str]
    exporter: str | None


class KafkaCluster(pulumi.ComponentResource):
    """A KafkaCluster named after its alias, built from KafkaClusterArgs.
    Outputs: `bootstrap_servers` (comma-separated host:port). With `metrics`,
    every node runs the JMX exporter; `scrape_targets` lists them for Prometheus.

    For clients: `client_settings` (plain Kafka client settings; secret ones are
    `${file:...}` references into the platform's client folder of this cluster),
    `client_files` (a secret: the files of that folder, or None), and
    `client_resources` (what writes them). A secured deployed cluster gets a
    generated CA, certificates and SASL password; an external one takes its
    secrets from `secrets` (mirrorstack:clusterSecrets.<alias>, whose keys are
    `secret_keys`)."""

    bootstrap_servers: pulumi.Output[str]

    def __init__(self, alias: str, args: KafkaClusterArgs, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:kafka:KafkaCluster", alias, opts)
        cluster, platform, metrics = args.cluster, args.platform, args.metrics
        exporter = jmx_exporter_config() if metrics else None  # the JMX exporter's rules, for the platform
        self.alias = alias
        self.broker_count = cluster.brokers
        # Published outside a kubernetes cluster: broker i on NodePort node_ports + i.
        self.node_ports = ([cluster.node_ports + i for i in range(cluster.brokers)]
                           if cluster.node_ports is not None else None)
        self.scrape_targets: list[ScrapeTarget] = []
        self.client_settings: dict[str, str] = {}
        self.client_files: pulumi.Output[dict] | None = None
        self.client_resources: list[pulumi.Resource] = []
        self.tls: ClusterCertificates | None = None  # a secured deployed cluster's CA and certificates
        self.principal_passwords: dict[str, pulumi.Output[str]] = {}  # application users (topology `principals`)
        self.admin_access: dict | None = None  # how the ACL resource reaches a secured cluster
        self.renew_before_days = cluster.security.certificates.renew_before_days
        self._platform = platform
        self._quorum_guard = args.quorum_guard  # fails when the controller count changed (mirrorstack.stack_history)
        if cluster.external is not None:
            self.bootstrap_servers = _external_servers(alias, cluster.external, pulumi.ResourceOptions(parent=self))
            self._external_clients(cluster.external.security, args.secrets, args.secret_keys)
            self.ready: list[pulumi.Resource] = []
            self.register_outputs({"bootstrap_servers": self.bootstrap_servers})
            return
        sec = cluster.security
        controllers = controller_nodes(alias, cluster.controllers)
        ctrl_addresses = {node_id: platform.address(name, "controller") for name, node_id in controllers}
        voters = broker.quorum_voters({node_id: f"{h}:{p}" for node_id, (h, p) in ctrl_addresses.items()})
        broker_names = [f"{alias}-broker-{i}" for i in range(cluster.brokers)]
        # The ACL resource's listener where INTERNAL does not answer this machine (docker, kubernetes).
        admin = {name: listener for name in broker_names if (listener := platform.admin_listener(name))} \
            if args.authorization and sec.secured else {}
        certs, password = self._credentials(args, [name for name, _ in controllers], broker_names, admin)
        authorizer = acls.authorizer_settings() if args.authorization else {}
        admin_address = None
        if args.authorization and certs:  # from where the program runs: ADMIN, else INTERNAL
            # Every broker: with only the first, a refresh failed whenever broker 0 was down.
            admin_address = ",".join(admin[name][0] if admin else "%s:%d" % platform.host_address(name, "internal")
                                     for name in broker_names)
        common = _NodeCommon(voters=voters, certs=certs, authorizer=authorizer, exporter=exporter,
                             format_args=["format", "--ignore-formatted", "-t", cluster_id(args.stack, alias),
                                          "-c", "{dir}/server.properties"])
        ctrls = self._run_controllers(cluster, controllers, ctrl_addresses, common, metrics)
        brokers, logins, addresses = self._run_brokers(cluster, broker_names, admin, password, common,
                                                       admin_address, ctrls[-1:], metrics)
        self.ready = [*ctrls, *brokers, *logins]
        if certs:
            self._deployed_clients(sec, certs, password)
            if admin_address is not None:  # the ACL resource acts as the first broker (a super user)
                self.admin_access = {"bootstrap": admin_address, "admin_keystore": certs.keystore(broker_names[0]),
                                     "truststore": certs.truststore, "mechanism": sec.sasl_mechanism,
                                     "tunnels": [tunnel for _, _, tunnel in admin.values() if tunnel]}
        self.bootstrap_servers = pulumi.Output.all(*[b.urn for b in brokers]).apply(lambda _: ",".join(addresses))
        self.register_outputs({"bootstrap_servers": self.bootstrap_servers})

    def _credentials(self, args: KafkaClusterArgs, controllers: list[str], broker_names: list[str], admin: dict):
        """(certificates, the stack's SASL password) of a secured cluster, else (None, None); the
        application principals' passwords in `principal_passwords`."""
        sec, child = args.cluster.security, pulumi.ResourceOptions(parent=self)
        if not sec.secured:
            return None, None
        nodes = self._node_hosts(controllers, broker_names)
        for name, (advertised, _, _) in admin.items():  # the client checks the name it dialled
            nodes[name] = sorted({*nodes[name], advertised.rpartition(":")[0]})
        self.tls = ClusterCertificates(f"{self.alias}-tls", ClusterCertificatesArgs(
            cluster=self.alias, nodes=nodes, settings=sec.certificates), opts=child)
        password = None
        if sec.sasl_mechanism:
            password = GeneratedPassword(f"{self.alias}-{sec.user}-password", opts=child).result
            self.principal_passwords = {name: GeneratedPassword(f"{self.alias}-{name}-password", opts=child).result
                                        for name in args.principals}
        return self.tls, password

    def _run_controllers(self, cluster, controllers: list[tuple[str, int]], ctrl_addresses: dict,
                         common: _NodeCommon, metrics: bool) -> list[pulumi.Resource]:
        """The controllers, one at a time (rolling restarts, also on create)."""
        platform, certs = self._platform, common.certs
        members: list[JavaService] = []
        for controller, node_id in controllers:
            ctrl_host, ctrl_port = ctrl_addresses[node_id]
            files, health = {}, {"kind": "tcp", "host": ctrl_host, "port": str(ctrl_port)}
            if len(controllers) > 1:  # wait until it is a caught-up voter again before the next one goes
                health = {"kind": "controller", "host": ctrl_host, "port": str(ctrl_port), "node_id": str(node_id),
                          "quorum": ",".join(f"{h}:{p}" for h, p in ctrl_addresses.values())}
                if certs:
                    files["admin.properties"] = render_properties(security.admin_properties(*self._node_tls(controller)))
                    health["command_config"] = f"{platform.service_dir(controller)}/admin.properties"
            ctrl_props = broker.controller_properties(
                node_id, host=ctrl_host, port=ctrl_port, voters=common.voters, log_dir=platform.data_dir(controller),
                broker_count=cluster.brokers, listen_host=platform.listen_host,
                overrides={**security.controller_tls_settings(*self._node_tls(controller)), **common.authorizer}
                if certs else None)
            members.append(JavaService(
                controller, main=jvm.BROKER_MAIN, args=["{dir}/server.properties"],
                resources=self._controller_resources(cluster),
                files={"server.properties": self._guarded(render_properties(ctrl_props)), **files},
                secret_files=self._node_secret_files(certs, controller),
                prepare=[(jvm.STORAGE_TOOL_MAIN, common.format_args)],
                metrics=common.exporter, health=health, keeps_data=True))
            self._scrape(platform, controller, "controller", metrics)
        return platform.run_set(ServiceSet(ServiceGroup.controllers(self.alias), tuple(members)),
                                opts=pulumi.ResourceOptions(parent=self))

    def _run_brokers(self, cluster, names: list[str], admin: dict, password, common: _NodeCommon,
                     admin_address: str | None, after: list[pulumi.Resource], metrics: bool):
        """The brokers, one at a time after `after` (the last controller); where the platform starts
        them in containers, the program logs in as the stack's users after each start (the local
        platform does it in the broker's own start), and the next broker waits for that check.
        Returns (brokers, login checks, "host:port" of each)."""
        platform, sec, certs = self._platform, cluster.security, common.certs
        members, addresses, logins, checks = [], [], [], {}
        for i, name in enumerate(names):
            host, port = platform.address(name, "kafka")
            addresses.append(f"{host}:{port}")
            login = platform.client_login(name, "kafka") if certs and password is not None else None
            if login is not None:
                checks[name] = login
            members.append(self._broker(cluster, i, name, (host, port), admin.get(name), password, common))
            self._scrape(platform, name, "broker", metrics)

        def logged_in(member: JavaService, ran: pulumi.Resource) -> BrokerLogins | None:
            if member.name not in checks:
                return None
            logins.append(self._logins(sec, member.name, checks[member.name], ran, certs, password,
                                       admin_address, admin, names[0]))
            return logins[-1]
        brokers = platform.run_set(ServiceSet(ServiceGroup.brokers(self.alias), tuple(members)),
                                   first_after=after, then=logged_in, opts=pulumi.ResourceOptions(parent=self))
        return brokers, logins, addresses

    def _broker(self, cluster, i: int, name: str, address: tuple[str, int], admin: tuple | None, password,
                common: _NodeCommon) -> JavaService:
        """Broker `i` (node id CONTROLLER_ID + 1 + i); `admin`: its ADMIN listener
        (advertised, listen, tunnel) where the cluster has one."""
        platform, sec, certs, (host, port) = self._platform, cluster.security, common.certs, address
        overrides, health, after_start, extra_files = (
            dict(cluster.settings), {"kind": "kafka", "bootstrap": f"{host}:{port}", "brokers": "1"}, [], {})
        if certs:
            overrides, health, after_start, extra_files = self._secured_broker(
                sec, name, host, port, i, {**common.authorizer, **cluster.settings})
        # Healthy once registered and no partition waits for a replica to rejoin its ISR.
        health["node_id"] = str(CONTROLLER_ID + 1 + i)
        props = broker.broker_properties(CONTROLLER_ID + 1 + i, host=host, port=port, voters=common.voters,
                                         log_dir=platform.data_dir(name), broker_count=cluster.brokers,
                                         listen_host=platform.listen_host, overrides=overrides)
        if admin is not None:
            props = security.with_admin_listener(props, advertised=admin[0], listen=admin[1])
        if (rack := platform.rack()) is not None:
            props = broker.with_rack(props, rack)
        node_ports = {"external": cluster.node_ports + i} if cluster.node_ports is not None else {}
        if node_ports:  # the model allows it on kubernetes only
            advertised, listen = platform.node_port(name, "external", node_ports["external"])
            props = broker.with_external_listener(props, advertised=advertised, listen=listen)
        secret_files = self._node_secret_files(certs, name)
        if certs and password is not None:
            # Only PLAIN's brokers hold the application users' passwords; a SCRAM principal added
            # must not make every broker's files unknown in a preview (the ACL resource creates it).
            users = self.principal_passwords if sec.sasl_mechanism == "PLAIN" else {}
            secret_files = pulumi.Output.all(secret_files, password, users).apply(
                lambda a: {**a[0], **security.broker_secret_files(sec, a[1], a[2])})
        return JavaService(
            name, main=jvm.BROKER_MAIN, args=["{dir}/server.properties"],
            files={"server.properties": self._guarded(render_properties(props)), **extra_files},
            secret_files=secret_files, health_secrets=self._sasl_users(sec, password),
            prepare=[(jvm.STORAGE_TOOL_MAIN, common.format_args)], after_start=after_start, metrics=common.exporter,
            resources=cluster.resources, health=health, keeps_data=True, node_ports=node_ports)

    @staticmethod
    def _controller_resources(cluster) -> Resources:
        """A controller's small heap, with the cluster's JVM options (its brokers' own)."""
        return CONTROLLER_RESOURCES.model_copy(update={"jvm_options": list(cluster.resources.jvm_options)})

    def _guarded(self, text: str) -> pulumi.Input[str]:
        """A node's server.properties, known only once the quorum guard passed."""
        return text if self._quorum_guard is None else self._quorum_guard.apply(lambda _: text)

    def _node_tls(self, service: str) -> tuple[str, str]:
        """(PEM keystore, PEM truststore) paths of a node, as the node sees them."""
        folder = self._platform.service_dir(service)
        return f"{folder}/secrets/server.pem", f"{folder}/secrets/ca.pem"

    def _node_hosts(self, controllers: list[str], brokers: list[str]) -> dict[str, list[str]]:
        """node → the names its certificate is for: how others reach it, and localhost."""
        ports = {**{n: ("controller",) for n in controllers}, **{n: ("kafka", "internal") for n in brokers}}
        return {n: sorted({*(self._platform.address(n, p)[0] for p in ps), "localhost"}) for n, ps in ports.items()}

    @staticmethod
    def _node_secret_files(certs, node: str) -> pulumi.Output[dict] | None:
        """The node's own keystore and the cluster's truststore: a renewal or a
        rotation phase changes them, and so restarts the node."""
        if certs is None:
            return None
        return pulumi.Output.all(certs.keystore(node), certs.truststore).apply(
            lambda pems: {"secrets/server.pem": pems[0], "secrets/ca.pem": pems[1]})

    def _sasl_users(self, sec, password) -> pulumi.Output[dict] | None:
        """The SASL users a secured broker's clients use, {name: password}: the
        stack's own and the application principals. At each start its readiness
        sets the SCRAM ones again and logs in as each on its CLIENT listener
        (local: security.sasl_readiness, in the broker's start; docker and
        kubernetes: BrokerLogins, in the program)."""
        if password is None:
            return None
        return pulumi.Output.secret(pulumi.Output.all(password, self.principal_passwords).apply(
            lambda a: {sec.user: a[0], **a[1]}))

    def _logins(self, sec, name: str, login, ran, certs, password, admin_address, admin, first: str) -> BrokerLogins:
        """The program's check, after each start of broker `name`, that the
        stack's SASL users log in on its CLIENT listener (SCRAM ones set again
        first, as a node, where the cluster has the ACL resource's way in)."""
        node = None
        if admin_address is not None and sec.sasl_mechanism != "PLAIN":
            node = pulumi.Output.secret(pulumi.Output.all(certs.keystore(first), certs.truststore).apply(
                lambda pems: {"bootstrap": admin_address, "admin_keystore": pems[0], "truststore": pems[1],
                              "tunnels": [tunnel for _, _, tunnel in admin.values() if tunnel]}))
        return BrokerLogins(
            f"{name}-logins", cluster=self.alias, broker=name, address=login.address, tunnel=login.tunnel,
            protocol=sec.protocol, mechanism=sec.sasl_mechanism, truststore=certs.truststore,
            keystore=pulumi.Output.secret(certs.keystore(CLIENT)) if sec.mtls else None,
            users=self._sasl_users(sec, password), admin=node, started=self._platform.started(ran), logs=login.logs,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ran]))

    def _secured_broker(self, sec, name: str, host: str, port: int, index: int, settings):
        """(overrides, health check, after-start steps, extra files) of a secured broker."""
        platform = self._platform
        i_host, i_port = platform.address(name, "internal")
        keystore, truststore = self._node_tls(name)
        folder = platform.service_dir(name)
        listen = platform.listen_host or host
        overrides = {**security.broker_listener_settings(
            sec, client=f"{host}:{port}", internal=f"{i_host}:{i_port}", listen_client=f"{listen}:{port}",
            listen_internal=f"{listen}:{i_port}", keystore=keystore, truststore=truststore,
            secrets_file=f"{folder}/secrets/broker.properties"), **settings}
        # Health over INTERNAL with the node's own certificate: no password needed.
        health = {"kind": "kafka", "bootstrap": f"{i_host}:{i_port}", "brokers": "1",
                  "client.security.protocol": "ssl", "client.ssl.ca.location": truststore,
                  "client.ssl.certificate.location": keystore, "client.ssl.key.location": keystore,
                  TOOLS_CONFIG: "admin.properties",  # Kafka's tools on INTERNAL: a container's readiness gate
                  # then, as its clients: the stack's SASL users get in on CLIENT
                  **security.sasl_readiness(sec, listener=f"{host}:{port}", keystore=keystore, truststore=truststore)}
        after_start = []
        args = security.scram_user_args(sec, bootstrap=f"{i_host}:{i_port}", command_config="{dir}/admin.properties",
                                        scram_file="{dir}/secrets/scram.properties")
        if args and index == 0:
            after_start = [(jvm.CONFIG_COMMAND_MAIN, args)]
        files = {"admin.properties": render_properties(security.admin_properties(keystore, truststore))}
        return overrides, health, after_start, files

    def _deployed_clients(self, sec, certs, password) -> None:
        """Client settings and files for the generated credentials."""
        folder = self._platform.client_dir(self.alias)
        mechanism = sec.sasl_mechanism
        self.client_settings = security.client_settings(
            sec.protocol, mechanism=mechanism, folder=folder, mtls=sec.mtls,
            secret_keys=["sasl.jaas.config"] if mechanism else [])

        def files(args):
            ca, client_pem, pw = args
            out = {security.CA_FILE: ca}
            if sec.mtls:
                out[security.CLIENT_KEYSTORE_FILE] = client_pem
            if mechanism:
                out[security.CLIENT_SECRETS_FILE] = security.secret_properties(
                    {"sasl.jaas.config": security.jaas_config(mechanism, sec.user, pw)})
            return out
        self.client_files = pulumi.Output.secret(pulumi.Output.all(
            certs.truststore, certs.keystore(CLIENT), password).apply(files))
        self._publish_client_files()

    def _external_clients(self, cs, secrets, secret_keys: frozenset[str]) -> None:
        """An existing cluster: the model's settings plus clusterSecrets.<alias>;
        `password` becomes a JAAS config for the configured user and mechanism."""
        keys = sorted({"sasl.jaas.config" if k == "password" else k for k in secret_keys})
        folder = self._platform.client_dir(self.alias)
        self.client_settings = security.client_settings(
            cs.protocol, mechanism=cs.mechanism, folder=folder, mtls=False, secret_keys=keys,
            extra=cs.properties, truststore=False)
        if not keys:
            return
        mechanism = cs.mechanism or "SCRAM-SHA-512"

        def files(values):
            values = dict(values or {})
            if "password" in values:
                values["sasl.jaas.config"] = security.jaas_config(mechanism, cs.username, values.pop("password"))
            return {security.CLIENT_SECRETS_FILE: security.secret_properties(values)}
        self.client_files = pulumi.Output.secret(pulumi.Output.from_input(secrets).apply(files))
        self._publish_client_files()

    def client_settings_in(self, folder: str) -> dict[str, str]:
        """`client_settings` for a copy of the client files in `folder` (a
        service's own secrets folder)."""
        shared = self._platform.client_dir(self.alias)
        return {k: v.replace(shared, folder) for k, v in self.client_settings.items()}

    def _publish_client_files(self) -> None:
        written = self._platform.client_files(self.alias, self.client_files, opts=pulumi.ResourceOptions(parent=self))
        self.client_resources = [written] if written is not None else []

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
    name, opts = naming.scoped(f"{alias}-from-{ref.stack}", opts)
    return pulumi.StackReference(name, stack_name=ref.stack, opts=opts).get_output("clusters").apply(pick)
