"""ConnectCluster: a distributed Kafka Connect worker group (MirrorMaker 2's runtime)."""
from __future__ import annotations

import pulumi

from mirrorstack import naming
from mirrorstack.connect import worker as connect
from mirrorstack.connect.args import ConnectClusterArgs
from mirrorstack.platforms import jvm
from mirrorstack.platforms.base import ServiceGroup
from mirrorstack.kafka import security
from mirrorstack.monitoring.jmx import jmx_exporter_config
from mirrorstack.platforms.descriptions import JavaService, ScrapeTarget, ServiceSet
from mirrorstack.properties import render_properties, with_env_provider
from mirrorstack.secrets import GeneratedPassword

CLIENT_PREFIXES = ("", "producer.", "consumer.", "admin.")  # the worker's own clients, then its tasks'
REST_USER = "mirrorstack"
BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
REST_CREDENTIALS = "secrets/rest-credentials.properties"


def rest_jaas(credentials_file: str) -> str:
    """The JAAS file naming the credentials file (a path, no secret)."""
    return ("KafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n"
            f'  file="{credentials_file}";\n}};\n')


class ConnectCluster(pulumi.ComponentResource):
    """A Connect worker group built from ConnectClusterArgs.
    Outputs: `rest_url` (the first worker's REST API), `rest_urls` (every
    worker's; any serves the whole API). With `metrics`, every
    worker runs the JMX exporter; `scrape_targets` lists them for Prometheus.
    `clients`: the KafkaClusters whose client folders its connectors reference
    (secured clusters). `exactly_once`: the workers support exactly-once source
    connectors (KIP-618). With `spec.rest_auth` the REST API requires basic
    auth: `rest_credentials` (a secret {username, password}, else None)."""

    rest_url: pulumi.Output[str]

    def __init__(self, name: str, args: ConnectClusterArgs, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:connect:ConnectCluster", name, opts)
        spec, kafka, platform, metrics = args.spec, args.kafka, args.platform, args.metrics
        exporter = jmx_exporter_config() if metrics else None  # the JMX exporter's rules, for the platform
        exactly_once, override_allowlist = args.exactly_once, args.override_allowlist
        members, urls = [], []
        self.scrape_targets: list[ScrapeTarget] = []
        self.group_id = pulumi.Output.from_input(spec.group_id or args.group_id or f"mirrorstack-{name}")
        self.ca_file = None
        clients = [c for c in args.clients if c.client_files is not None]
        self.rest_credentials = None
        if spec.external is not None:  # an existing group: nothing deployed, only how to reach it
            ext = spec.external
            self.workers, self.ca_file = [], ext.ca_file
            if ext.username is not None:
                self.rest_credentials = pulumi.Output.secret(pulumi.Output.from_input(args.rest_password).apply(
                    lambda pw: {"username": ext.username, "password": pw}))
            self.rest_url = pulumi.Output.from_input(ext.urls[0])
            self.rest_urls = pulumi.Output.from_input(list(ext.urls))
            self.register_outputs({"rest_url": self.rest_url, "rest_urls": self.rest_urls})
            return
        if spec.rest_auth:
            password = GeneratedPassword(f"connect-{name}-rest-password", opts=pulumi.ResourceOptions(parent=self))
            self.rest_credentials = pulumi.Output.secret(
                password.result.apply(lambda pw: {"username": REST_USER, "password": pw}))
        for i in range(spec.workers):
            worker = f"connect-{name}-{i}"
            host, port = platform.address(worker, "rest")
            urls.append(platform.host_url(worker, "rest"))
            extra, secret_files = self._client_overrides(worker, kafka, clients, platform, exactly_once)
            if platform.rack() is not None:  # the connectors' `${env:...}` rack of their consumers
                extra = with_env_provider(extra)
            if override_allowlist:  # push flows: their connectors may override exactly these client settings
                extra.update({"connector.client.config.override.policy": "Allowlist",
                              "connector.client.config.override.allowlist": ",".join(override_allowlist)})
            # kind `connect`: containers probe its REST API; a process platform asks
            # readiness.check (the kind's entry point, pyproject.toml)
            files, jvm_options, health = {}, [], {"kind": "connect", "url": f"http://{host}:{port}"}
            if self.rest_credentials is not None:
                folder = platform.service_dir(worker)
                extra["rest.extension.classes"] = BASIC_AUTH_EXTENSION
                files["rest-jaas.conf"] = rest_jaas(f"{folder}/{REST_CREDENTIALS}")
                jvm_options = ["-Djava.security.auth.login.config={dir}/rest-jaas.conf"]
                health["auth_file"] = f"{folder}/{REST_CREDENTIALS}"
                secret_files = pulumi.Output.all(secret_files, self.rest_credentials).apply(
                    lambda a: {**(a[0] or {}), REST_CREDENTIALS: f"{a[1]['username']}: {a[1]['password']}\n"})
            props = pulumi.Output.all(kafka.bootstrap_servers, self.group_id).apply(
                lambda a, host=host, port=port, extra=extra: render_properties(
                connect.worker_properties(a[1], bootstrap_servers=a[0], host=host,
                                          rest_port=port, kafka_broker_count=kafka.broker_count,
                                          listen_host=platform.listen_host,
                                          overrides={**extra, **spec.settings})))
            members.append(JavaService(
                worker, main=jvm.CONNECT_DISTRIBUTED_MAIN, args=["{dir}/worker.properties"],
                files={"worker.properties": props, **files}, secret_files=secret_files,
                uses_clients=[c.alias for c in clients], jvm_options=jvm_options, health=health, metrics=exporter,
                resources=spec.resources))
            if metrics:
                m_host, m_port = platform.metrics_address(worker)
                self.scrape_targets.append(ScrapeTarget(f"connect-{name}", f"{m_host}:{m_port}",
                                                        {"cluster": spec.kafka, "role": "connect", "connect": name}))
        # One worker at a time (rolling restarts): each after the one before is healthy again.
        workers = platform.run_set(
            ServiceSet(ServiceGroup.workers(name, spec.kafka), tuple(members)),
            each_after=[*kafka.ready, *(r for c in clients for r in c.client_resources)],
            opts=pulumi.ResourceOptions(parent=self))
        self.workers = workers
        self.rest_url = pulumi.Output.all(*[w.urn for w in workers]).apply(lambda _: urls[0])
        self.rest_urls = pulumi.Output.all(*[w.urn for w in workers]).apply(lambda _: list(urls))
        self.register_outputs({"rest_url": self.rest_url, "rest_urls": self.rest_urls})

    @staticmethod
    def _client_overrides(worker: str, kafka, clients: list, platform, exactly_once: bool):
        """Worker settings for its own (secured) cluster, read from a 0600 copy
        of that cluster's client files in the worker's `secrets/` (a rotated
        secret restarts the worker); the file config provider for the
        connectors' `${file:...}` references; exactly-once support."""
        extra: dict[str, str] = {"exactly.once.source.support": "enabled"} if exactly_once else {}
        secret_files = None
        allowed = [platform.client_dir(c.alias) for c in clients]
        if kafka.client_files is not None:
            own = f"{platform.service_dir(worker)}/secrets"
            allowed.append(own)
            settings = kafka.client_settings_in(own)
            extra.update({f"{p}{k}": v for p in CLIENT_PREFIXES for k, v in settings.items()})
            secret_files = kafka.client_files.apply(lambda files: {f"secrets/{k}": v for k, v in files.items()})
        elif kafka.client_settings:  # secured without secrets (e.g. SSL to a public CA)
            extra.update({f"{p}{k}": v for p in CLIENT_PREFIXES for k, v in kafka.client_settings.items()})
        if allowed:
            extra.update(security.file_provider(",".join(allowed)))
        return extra, secret_files
