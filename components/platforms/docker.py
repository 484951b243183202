"""The `docker` platform: each service is an `apache/kafka` container.

One user-defined network per stack; a container's hostname and network alias
are its service name, so services reach each other at `<service>:<port>` with
fixed ports per port name. Ports the Pulumi program itself needs (Connect's
REST API) are published on 127.0.0.1 only, on deterministic host ports.

The helpers at the top (names, ports, the container command, health probes)
are shared with the kubernetes platform: same image, same shell.

Secrets (PEM keys, password files: `secret_files`, a cluster's client files)
are uploaded 0600, owned by the image's user, with their content a Pulumi
secret; that makes the container's whole `uploads` a secret in state (the
plain files too: Pulumi marks the property, not one entry of it).
"""
from __future__ import annotations

import json
import re
import shlex
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import pulumi
import pulumi_docker as docker

from components import naming, toolchain
from components.config.grafana import grafana_files
from components.config.jmx import jmx_exporter_config
from components.config.logging import log4j2_properties
from components.config.properties import render_properties
from components.config.validation import job_modules, spark_image, spark_submit_argv
from components.model import Resources
from components.platforms.local.platform import PORT_SPAN, default_port_base
from components.versions import image as versions_image
from components.versions import kafka_version, spark_version

HOST = "127.0.0.1"
KAFKA_HOME = "/opt/kafka"
FILES_ROOT = "/opt/mirrorstack"
JOB_DIR = "/opt/mirrorstack/validation"  # the Spark job's files inside its container
AGENT_JAR = "/opt/mirrorstack/jmx/jmx_prometheus_javaagent.jar"  # uploaded from .tools
METRICS_PORT_NAME = "metrics"
# Monitoring services: their files and ports inside the containers.
PROMETHEUS_DIR = "/etc/mirrorstack/prometheus"
GRAFANA_PROVISIONING = "/etc/grafana/provisioning"
GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards"
GRAFANA_PASSWORD_FILE = "/etc/mirrorstack/grafana-admin-password"
SERVICE_PORTS = {"prometheus": 9090, "grafana": 3000, "kafka-ui": 8080, "kafka-exporter": 9308}
DATA_DIR = "/var/lib/kafka/data"  # owned by appuser in the image, so a fresh volume is writable
CONTAINER_PORTS = {"kafka": 9092, "controller": 9093, "rest": 8083}
PREPARE_HEAP = "256m"  # the storage formatter is a short-lived tool
PROBE_HEAP = "64m"  # probe JVMs share the container's memory with the service
CLIENTS_ROOT = "/etc/mirrorstack/clients"  # a cluster's client folder: CLIENTS_ROOT/<alias>
KAFKA_UID = "1000"  # `appuser` of apache/kafka: owns the uploaded secret files
SPARK_UID = "185"  # `spark` of apache/spark
SECRET_MODE = "0600"
# After-start steps (e.g. creating the SCRAM user) retry while the broker comes up;
# the health check reports healthy only once they are done (the marker file).
AFTER_START_DONE = "/tmp/mirrorstack-after-start.done"
AFTER_START_ATTEMPTS = 36
AFTER_START_PAUSE = 5  # seconds between attempts: 3 minutes in all, plus the attempts themselves
HEALTH_CLIENT_FILE = "health-client.properties"  # the probe's client settings (secured listeners)
# librdkafka settings of a health spec (`client.` + name; local/health.py) → the
# Java client settings of the probe's --command-config. The Java tools read a PEM
# keystore holding key and certificate, so both locations must be that one file.
HEALTH_CLIENT_SETTINGS = {
    "client.security.protocol": "security.protocol",
    "client.ssl.ca.location": "ssl.truststore.location",
    "client.ssl.certificate.location": "ssl.keystore.location",
    "client.ssl.key.location": "ssl.keystore.location",
}


def kafka_image(image: str | None = None) -> str:
    return image or f"apache/kafka:{kafka_version()}"


def dns_label(name: str, max_len: int = 63) -> str:
    """A DNS-1035 label (lowercase, [a-z0-9-], starts with a letter). A name
    that had to change gets a hash suffix, so `US_east` and `us-east` differ."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not label[:1].isalpha():
        label = f"s-{label}".strip("-")
    if label != name or len(label) > max_len:
        suffix = f"{zlib.crc32(name.encode()):08x}"[:6]
        label = f"{label[:max_len - 7].rstrip('-')}-{suffix}"
    return label


def container_port(port_name: str, taken: set[int]) -> int:
    """Fixed ports for the known port names; others hashed into 9100-9899."""
    port = CONTAINER_PORTS.get(port_name) or 9100 + zlib.crc32(port_name.encode()) % 800
    while port in taken:
        port += 1
    return port


def hashed_host_port(port_base: int, key: str, taken: set[int]) -> int:
    """Deterministic per stack and key (LocalPlatform's scheme), probed on clash."""
    port = port_base + zlib.crc32(key.encode()) % PORT_SPAN
    while port in taken:
        port = port_base + (port - port_base + 1) % PORT_SPAN
    return port


def _tool_command(main: str, args: list[str]) -> str:
    # KAFKA_OPTS= : tools and probes must not start the service's JMX agent (its port is taken).
    run_class = f"{KAFKA_HOME}/bin/kafka-run-class.sh"
    return f"KAFKA_OPTS= KAFKA_HEAP_OPTS=-Xmx{PREPARE_HEAP} {shlex.join([run_class, main, *args])}"


def container_script(main: str, args: list[str], prepare=(), after_start=()) -> str:
    """The `sh -c` script: the one-time preparation steps (idempotent), then
    `exec` the service, so the JVM replaces the shell as PID 1 and receives the
    stop signal itself (a clean, controlled shutdown).

    With `after_start` steps (run once the service answers, e.g. creating the
    SCRAM user) the shell stays: it starts the service in the background,
    retries each step until it succeeds (the broker needs a few seconds),
    touches AFTER_START_DONE (which the health check requires), then waits
    for the service, forwarding TERM/INT to it, and exits with its status.
    A step that never succeeds stops the service (exit 1, so the container
    restarts and the steps run again)."""
    steps = [_tool_command(m, a) for m, a in prepare]
    service = shlex.join([f"{KAFKA_HOME}/bin/kafka-run-class.sh", main, *args])
    if not after_start:
        return " && ".join([*steps, "exec " + service])
    lines = [f"rm -f {AFTER_START_DONE}", *(f"{step} || exit $?" for step in steps),
             f"{service} &",
             "pid=$!",
             "stopping=",
             "trap 'stopping=1; kill -TERM \"$pid\" 2>/dev/null' TERM INT",
             "failed="]
    for i, (m, a) in enumerate(after_start):
        lines += [
            "n=0",
            # Stop trying when stopping, after a failed step, or when the service is gone (its status tells).
            f"until [ -n \"$stopping$failed\" ] || ! kill -0 \"$pid\" 2>/dev/null || {_tool_command(m, a)}; do",
            "  n=$((n + 1))",
            f"  if [ \"$n\" -ge {AFTER_START_ATTEMPTS} ]; then",
            f"    echo 'mirrorstack: after-start step {i + 1} ({m}) did not succeed; stopping the service' >&2",
            "    failed=1; kill -TERM \"$pid\" 2>/dev/null; break",
            "  fi",
            f"  sleep {AFTER_START_PAUSE}",
            "done"]
    lines += [f"[ -n \"$stopping$failed\" ] || ! kill -0 \"$pid\" 2>/dev/null || touch {AFTER_START_DONE}",
              # `wait` returns early when a trapped signal arrives: wait again until the JVM is gone.
              "wait \"$pid\"; status=$?",
              "while kill -0 \"$pid\" 2>/dev/null; do wait \"$pid\"; status=$?; done",
              "[ -z \"$failed\" ] || exit 1",
              "exit \"$status\""]
    return "\n".join(lines)


def kafka_opts(jvm_options, agent: str | None = None) -> str | None:
    """KAFKA_OPTS of a service: the JMX agent and `-D...` options (kafka-run-class.sh
    splits it on blanks, so an option must have none). Tools and probes clear it."""
    options = [*([agent] if agent else []), *jvm_options]
    blank = [o for o in options if not o or any(c.isspace() for c in o)]
    if blank:
        raise ValueError(f"JVM options must be non-empty and without blanks (KAFKA_OPTS is split on them): {blank!r}")
    return " ".join(options) or None


def add_health_client_file(files: dict[str, str], health: dict, folder: str) -> str | None:
    """A secured listener's probe needs client settings: add them to `files`
    and return the file's path for `--command-config` (None when plain)."""
    client_props = health_client_properties(health)
    if client_props is None:
        return None
    files[HEALTH_CLIENT_FILE] = render_properties(client_props)
    return f"{folder}/{HEALTH_CLIENT_FILE}"


def health_client_properties(spec: dict) -> dict[str, str] | None:
    """The probe's Java client settings for a health spec with `client.*`
    (librdkafka) settings, e.g. a secured broker's TLS listener; None without."""
    client = {k: v for k, v in spec.items() if k.startswith("client.")}
    if not client:
        return None
    unknown = sorted(set(client) - set(HEALTH_CLIENT_SETTINGS))
    if unknown:
        raise ValueError(f"health check {spec.get('kind')!r}: no Java client setting for {', '.join(unknown)}")
    key, cert = client.get("client.ssl.key.location"), client.get("client.ssl.certificate.location")
    if key != cert:
        raise ValueError("health check: the Java tools read a PEM keystore, so client.ssl.key.location and "
                         f"client.ssl.certificate.location must be one file (got {key!r} and {cert!r})")
    props = {"security.protocol": client.get("client.security.protocol", "plaintext").upper()}
    if "client.ssl.ca.location" in client:
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": client["client.ssl.ca.location"]})
    if cert:
        props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": cert})
    return props


def _http_get(host: str, port: int, path: str, auth_file: str | None = None) -> str:
    # No curl/wget in the image: plain HTTP/1.0 over bash's /dev/tcp.
    if auth_file is None:
        request = r"'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n'"  # printf turns \r\n into CR LF
        return f"exec 3<>/dev/tcp/{host}/{port} && printf {request} {shlex.quote(path)} {host} >&3 && cat <&3"
    # Basic auth from a Connect credentials file (`user: password`), read at probe time:
    # the password is in no command line (printf is a shell builtin; base64 reads stdin).
    request = r"'GET %s HTTP/1.0\r\nHost: %s\r\nAuthorization: Basic %s\r\n\r\n'"
    read = ('{ IFS= read -r line || [ -n "$line" ]; } < ' + shlex.quote(auth_file) + ' && user="${line%%:*}" && '
            'password="${line#*:}" && '
            'password="${password# }" && auth="$(printf %s:%s "$user" "$password" | base64 | tr -d \'\\n\')"')
    return (f"{read} && exec 3<>/dev/tcp/{host}/{port} && "
            f"printf {request} {shlex.quote(path)} {host} \"$auth\" >&3 && cat <&3")


def probe_command(spec: dict, in_network, *, command_config: str | None = None,
                  ready_file: str | None = None) -> list[str]:
    """A health spec (see local/health.py::check) as a command run inside the
    container. `in_network(host, port)` turns an address the Pulumi program
    uses (a published port) into the one reachable from inside.
    `command_config`: the client settings file of a `kafka` check whose spec
    has `client.*` settings (see `health_client_properties`), required then.
    `ready_file`: must exist too (the after-start steps are done)."""
    command = _probe(spec, in_network, command_config)
    if ready_file:
        return ["bash", "-c", f"test -f {shlex.quote(ready_file)} && exec {shlex.join(command)}"]
    return command


def _probe(spec: dict, in_network, command_config: str | None) -> list[str]:
    kind = spec["kind"]
    if kind == "tcp":
        host, port = in_network(spec["host"], int(spec["port"]))
        return ["bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"]
    if kind == "kafka":
        servers = [in_network(h, int(p)) for h, _, p in (s.rpartition(":") for s in spec["bootstrap"].split(","))]
        command = ["env", "KAFKA_OPTS=", f"KAFKA_HEAP_OPTS=-Xmx{PROBE_HEAP}", f"{KAFKA_HOME}/bin/kafka-broker-api-versions.sh",
                   "--bootstrap-server", ",".join(f"{h}:{p}" for h, p in servers)]
        if health_client_properties(spec) is not None:
            if not command_config:
                raise ValueError("a kafka health check with client settings needs its command_config file")
            command += ["--command-config", command_config]
        return command
    if kind in ("http", "connect"):
        url = urlsplit(spec["url"])
        host, port = in_network(url.hostname, url.port or 80)
        if kind == "connect":  # as local: the REST API lists the MirrorMaker 2 connectors
            return ["bash", "-c", _http_get(host, port, "/connector-plugins", spec.get("auth_file"))
                    + " | grep -q MirrorSourceConnector"]
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        return ["bash", "-c", _http_get(host, port, path) + " | head -n 1 | grep -q ' 200 '"]
    raise ValueError(f"unknown health check kind {kind!r}")


class DockerPlatform:
    """Services as containers; see the module docstring for the addressing."""

    name = "docker"
    listen_host = "0.0.0.0"  # inside the container; advertised by service name

    def __init__(self, stack: str, network_name: str | None = None, image: str | None = None,
                 port_base: int | None = None):
        self.stack = stack
        self.prefix = dns_label(f"mirrorstack-{stack}")  # containers of several stacks share one engine
        self.network_name = network_name or self.prefix
        self.image_name = kafka_image(image)
        self.port_base = port_base if port_base is not None else default_port_base(stack)
        self._ports: dict[str, dict[str, int]] = {}  # service → port name → port inside the network
        self._host_ports: dict[tuple[str, str], int] = {}  # (service, port name) → published host port
        self._inside: dict[tuple[str, int], tuple[str, int]] = {}  # host address → in-network address
        self._network: docker.Network | None = None
        self._image: docker.RemoteImage | None = None
        self._client_files: dict[str, pulumi.Output] = {}  # alias → its client files (a secret dict)
        self.containers: dict[str, docker.Container] = {}

    def address(self, service: str, port_name: str) -> tuple[str, int]:
        host = dns_label(service)
        ports = self._ports.setdefault(host, {})
        if port_name not in ports:
            ports[port_name] = container_port(port_name, set(ports.values()))
        return host, ports[port_name]

    def host_address(self, service: str, port_name: str) -> tuple[str, int]:
        """The published port on 127.0.0.1; ask before `run_kafka_java`, which publishes it."""
        inside = self.address(service, port_name)
        key = (inside[0], port_name)
        if key not in self._host_ports:
            if inside[0] in self.containers:
                raise RuntimeError(f"{service}: host_address({port_name!r}) must come before run_kafka_java")
            self._host_ports[key] = hashed_host_port(self.port_base, "/".join(key), set(self._host_ports.values()))
            self._inside[(HOST, self._host_ports[key])] = inside
        return HOST, self._host_ports[key]

    def metrics_address(self, service: str) -> tuple[str, int]:
        """Where Prometheus (on the stack network) scrapes the service's JMX exporter."""
        return self.address(service, METRICS_PORT_NAME)

    def in_network(self, host: str, port: int) -> tuple[str, int]:
        return self._inside.get((host, port), (host, port))

    def service_dir(self, service: str) -> str:
        return f"{FILES_ROOT}/{dns_label(service)}"

    def data_dir(self, service: str) -> str:
        return DATA_DIR

    def client_dir(self, alias: str) -> str:
        """A cluster's client folder (CA, client key, secret settings) in every
        container that reads it (`uses_clients`, the validation job)."""
        return f"{CLIENTS_ROOT}/{alias}"

    def client_files(self, alias: str, files, opts: pulumi.ResourceOptions | None = None) -> None:
        """Remember a cluster's client files (a secret dict): they are uploaded
        into each container that uses them, so nothing is created here."""
        self._client_files[alias] = pulumi.Output.secret(files)
        return None

    def _clients(self, aliases, service: str) -> list[tuple[str, pulumi.Output]]:
        missing = [a for a in aliases if a not in self._client_files]
        if missing:
            raise ValueError(f"{service}: no client files for {', '.join(missing)}; "
                             "client_files(alias) must come before the services that use them")
        return [(self.client_dir(a), self._client_files[a]) for a in dict.fromkeys(aliases)]

    @staticmethod
    def _with_secret_uploads(uploads: list, sources: list[tuple[str, object]], owner: str):
        """`uploads` plus the files of each (folder, secret dict of relative path →
        content) source: 0600, owned by `owner`, the content a Pulumi secret
        (which makes the whole `uploads` property a secret in state)."""
        if not sources:
            return uploads
        folders = [folder for folder, _ in sources]

        def entries(parts) -> list[dict]:
            return [{"file": f"{folder}/{name}", "content": content, "owner": owner, "group": owner,
                     "permissions": SECRET_MODE}
                    for folder, files in zip(folders, parts) for name, content in sorted((files or {}).items())]
        secret = pulumi.Output.secret(pulumi.Output.all(*[files for _, files in sources]).apply(entries))
        return pulumi.Output.all(pulumi.Output.from_input(uploads), secret).apply(lambda both: [*both[0], *both[1]])

    def _shared(self, opts: pulumi.ResourceOptions | None) -> tuple[docker.Network, docker.RemoteImage]:
        # Created on first use, under the first service's parent (so a provider passed to
        # the component reaches them); every cluster of the stack uses them.
        if self._network is None:
            parent = pulumi.ResourceOptions(parent=opts.parent if opts else None)
            self._network = docker.Network(*naming.scoped("network", parent, was_root="docker:index/network:Network"),
                                           name=self.network_name)
            # keep_locally: destroying one stack must not delete an image others run.
            self._image = docker.RemoteImage(
                *naming.scoped("kafka-image", parent, was_root="docker:index/remoteImage:RemoteImage"),
                name=self.image_name, keep_locally=True)
        return self._network, self._image

    def run_kafka_java(self, service: str, *, main: str, args: list[str], files: dict[str, str],
                       health: dict[str, str], resources: Resources = Resources(), prepare: list[tuple[str, list[str]]] = (),
                       secret_files=None, after_start: list[tuple[str, list[str]]] = (),
                       uses_clients: list[str] = (), jvm_options: list[str] = (), metrics: bool = False,
                       opts: pulumi.ResourceOptions | None = None) -> docker.Container:
        """Run one of Kafka's main classes in a container; `{dir}` in `args`,
        `prepare`, `after_start` and `jvm_options` (the service JVM's `-D...`
        options, in KAFKA_OPTS) is the folder the `files` are uploaded to,
        `secret_files` (a secret dict) too, 0600. `after_start` steps run once
        the service answers (see `container_script`); the health check waits
        for them. `uses_clients`: aliases whose client files are uploaded to
        `client_dir(alias)`. With `metrics`, the pinned JMX exporter agent
        (uploaded from .tools, nothing downloaded) serves on
        `metrics_address(service)` inside the network."""
        network, image = self._shared(opts)
        host, folder = dns_label(service), self.service_dir(service)
        fill = lambda items: [a.replace("{dir}", folder) for a in items]  # noqa: E731
        files = {"log4j2.properties": log4j2_properties(), **files}
        command_config = add_health_client_file(files, health, folder)
        secrets = self._clients(uses_clients, service)
        if secret_files is not None:
            secrets.insert(0, (folder, pulumi.Output.secret(secret_files)))
        envs, uploads, agent = [], [], None
        if metrics:
            files["jmx-exporter.yaml"] = jmx_exporter_config()
            _, port = self.metrics_address(service)
            agent = f"-javaagent:{AGENT_JAR}={port}:{folder}/jmx-exporter.yaml"
            uploads.append({"file": AGENT_JAR, "source": str(toolchain.jmx_agent_jar())})
        options = kafka_opts(fill(jvm_options), agent)
        if options:
            envs.append(f"KAFKA_OPTS={options}")
        # A volume per service, Connect's too (stays empty; keeps every container alike).
        volume = docker.Volume(*naming.scoped(f"{host}-data", pulumi.ResourceOptions(parent=opts.parent if opts else None)),
                               name=f"{self.prefix}-{host}-data")
        published = [{"internal": self._ports[host][port_name], "external": port, "ip": HOST}
                     for (name, port_name), port in self._host_ports.items() if name == host]
        resource_name, opts = naming.scoped(host, opts)
        container = docker.Container(
            resource_name, name=f"{self.prefix}-{host}", image=image.name, hostname=host,
            networks_advanced=[{"name": network.name, "aliases": [host]}],
            entrypoints=["/bin/sh", "-c"],  # bypass the image's launcher: we bring our own files
            command=[container_script(main, fill(args), [(m, fill(a)) for m, a in prepare],
                                      [(m, fill(a)) for m, a in after_start])],
            envs=[f"KAFKA_HEAP_OPTS=-Xmx{resources.heap}",
                  f"KAFKA_LOG4J_OPTS=-Dlog4j2.configurationFile={folder}/log4j2.properties", *envs],
            uploads=self._with_secret_uploads(
                [*({"file": f"{folder}/{name}", "content": content} for name, content in files.items()), *uploads],
                secrets, KAFKA_UID),
            volumes=[{"volume_name": volume.name, "container_path": DATA_DIR}],
            ports=published,
            healthcheck={"tests": ["CMD", *probe_command(health, self.in_network, command_config=command_config,
                                                         ready_file=AFTER_START_DONE if after_start else None)],
                         "interval": "5s", "timeout": "30s", "start_period": "120s", "retries": 5},
            memory=resources.container_memory_mib,
            **({"cpus": format(resources.cpus, "g")} if resources.cpus else {}),
            restart="unless-stopped",
            # Like the local platform, creation returns only once the service is healthy,
            # so `depends_on` on this container means "the service answers".
            wait=True, wait_timeout=300,
            labels=[{"label": "mirrorstack.stack", "value": self.stack},
                    {"label": "mirrorstack.service", "value": service}],
            opts=opts)
        self.containers[host] = container
        return container

    def run_spark_job(self, name: str, *, job_file, job_sha256: str, config, settings,
                      uses_clients: list[str] | None = None,
                      opts: pulumi.ResourceOptions | None = None) -> docker.Container:
        """Run the validation job once in the official Spark image, on the stack's
        network (the flows' in-network bootstrap servers), with the project's
        spark-sql-kafka jars uploaded: nothing is fetched at run time. The
        container is replaced (the job re-runs) when the job, its flows or
        `run_id` change; `report` says where its output is.
        `uses_clients`: the aliases whose client folders the job's config
        references (uploaded to `client_dir(alias)`); None: every cluster
        whose client files this platform was given."""
        network, _ = self._shared(opts)
        clients = self._clients(self._client_files if uses_clients is None else uses_clients, name)
        label = dns_label(name)
        image = docker.RemoteImage(*naming.scoped("spark-image", pulumi.ResourceOptions(parent=opts.parent if opts else None)),
                                   name=spark_image(settings.image, spark_version()), keep_locally=True)
        jars = toolchain.spark_kafka_jars()
        modules = job_modules(job_file)
        argv = spark_submit_argv(settings, job_path=f"{JOB_DIR}/validate_replication.py",
                                 config_path=f"{JOB_DIR}/flows.json", jars=[f"{JOB_DIR}/jars/{j.name}" for j in jars],
                                 py_files=[f"{JOB_DIR}/{m.name}" for m in modules])
        resource_name, opts = naming.scoped(label, opts)
        container = docker.Container(
            resource_name, name=f"{self.prefix}-{label}", image=image.name,
            networks_advanced=[{"name": network.name}], command=argv,
            uploads=self._with_secret_uploads(
                [{"file": f"{JOB_DIR}/validate_replication.py", "content": Path(job_file).read_text()},
                 *({"file": f"{JOB_DIR}/{m.name}", "content": m.read_text()} for m in modules),
                 {"file": f"{JOB_DIR}/flows.json", "content": config.apply(lambda c: json.dumps(c, indent=2))},
                 *({"file": f"{JOB_DIR}/jars/{j.name}", "source": str(j)} for j in jars)],
                clients, SPARK_UID),
            # Runs to the end inside `up`; its output is kept as the container's logs.
            must_run=False, attach=True, logs=True, restart="no",
            envs=[f"MIRRORSTACK_RUN_ID={settings.run_id}", f"MIRRORSTACK_JOB_SHA256={job_sha256}"],
            labels=[{"label": "mirrorstack.stack", "value": self.stack},
                    {"label": "mirrorstack.service", "value": name}],
            opts=opts)
        container.report = pulumi.Output.all(container.name, container.exit_code).apply(
            lambda out: _job_outcome(out[0], out[1]))
        return container

    def _run_image(self, service: str, image_key: str, *, port: int, publish: bool,
                   command: list[str] | None = None, envs=(), uploads=(), opts=None) -> tuple[docker.Container, str]:
        """A plain image (monitoring, UIs) on the stack network; `publish` puts its port
        on 127.0.0.1 of the host. Returns (container, URL: published, or in-network)."""
        network, _ = self._shared(opts)
        host = dns_label(service)
        self._ports.setdefault(host, {})["http"] = port
        image = docker.RemoteImage(*naming.scoped(f"{host}-image", pulumi.ResourceOptions(parent=opts.parent if opts else None)),
                                   name=versions_image(image_key), keep_locally=True)
        url = f"http://{host}:{port}"
        ports = []
        if publish:
            _, host_port = self.host_address(service, "http")
            ports = [{"internal": port, "external": host_port, "ip": HOST}]
            url = f"http://{HOST}:{host_port}"
        resource_name, opts = naming.scoped(host, opts)
        container = docker.Container(
            resource_name, name=f"{self.prefix}-{host}", image=image.name, hostname=host,
            networks_advanced=[{"name": network.name, "aliases": [host]}], command=command, envs=list(envs),
            uploads=list(uploads), ports=ports, restart="unless-stopped",
            labels=[{"label": "mirrorstack.stack", "value": self.stack},
                    {"label": "mirrorstack.service", "value": service}], opts=opts)
        self.containers[host] = container
        return container, url

    def run_prometheus(self, service: str, *, files: dict[str, str], opts=None):
        """The official Prometheus image, its files uploaded; published on 127.0.0.1."""
        uploads = [{"file": f"{PROMETHEUS_DIR}/{n}", "content": c.replace("{dir}", PROMETHEUS_DIR)} for n, c in files.items()]
        return self._run_image(service, "prometheus", port=SERVICE_PORTS["prometheus"], publish=True,
                          command=[f"--config.file={PROMETHEUS_DIR}/prometheus.yml", "--storage.tsdb.path=/prometheus"],
                          uploads=uploads, opts=opts)


    def run_grafana(self, service: str, *, prometheus: str, admin_password, opts=None):
        """Grafana with the datasource (Prometheus in the network) and dashboards
        provisioned; the admin password is read from an uploaded file (Grafana's
        `__FILE` variables), so it appears in no environment or command line."""
        in_network = f"http://{dns_label('prometheus')}:{SERVICE_PORTS['prometheus']}"
        files = grafana_files(in_network, GRAFANA_DASHBOARDS)
        uploads = [{"file": (f"{GRAFANA_PROVISIONING}/{n[len('provisioning/'):]}" if n.startswith("provisioning/")
                             else f"{GRAFANA_DASHBOARDS}/{n[len('dashboards/'):]}"), "content": c} for n, c in files.items()]
        uploads.append({"file": GRAFANA_PASSWORD_FILE, "content": pulumi.Output.secret(admin_password)})
        return self._run_image(service, "grafana", port=SERVICE_PORTS["grafana"], publish=True,
                          envs=[f"GF_SECURITY_ADMIN_PASSWORD__FILE={GRAFANA_PASSWORD_FILE}", "GF_USERS_ALLOW_SIGN_UP=false"],
                          uploads=uploads, opts=opts)


    def run_extras(self, topology, clusters, opts=None) -> list:
        """Kafka UI (one, every cluster) and kafka-exporter (one per cluster, scraped)."""
        from components.config.prometheus import ScrapeTarget
        settings, targets = topology.monitoring, []
        if settings.kafka_ui:
            envs = [env for i, (alias, c) in enumerate(sorted(clusters.items())) for env in (
                f"KAFKA_CLUSTERS_{i}_NAME={alias}",
                c.bootstrap_servers.apply(lambda s, i=i: f"KAFKA_CLUSTERS_{i}_BOOTSTRAPSERVERS={s}"))]
            self._run_image("kafka-ui", "kafka_ui", port=SERVICE_PORTS["kafka-ui"], publish=True, envs=envs, opts=opts)
        if settings.kafka_exporter:
            for alias, cluster in sorted(clusters.items()):
                service = f"kafka-exporter-{alias}"
                command = cluster.bootstrap_servers.apply(lambda s: [f"--kafka.server={b}" for b in s.split(",")])
                self._run_image(service, "kafka_exporter", port=SERVICE_PORTS["kafka-exporter"], publish=False,
                                command=command, opts=opts)
                targets.append(ScrapeTarget(f"kafka-exporter-{alias}", f"{dns_label(service)}:{SERVICE_PORTS['kafka-exporter']}",
                                            {"cluster": alias, "role": "kafka-exporter"}))
        return targets


def _job_outcome(container: str, exit_code: int | None) -> dict:
    # With report_only the job exits 0 on a failed validation; other non-zero exits fail `up`.
    if exit_code not in (None, 0):
        raise RuntimeError(f"the validation job in container {container} exited {exit_code} (1: validation "
                           f"failed, 2: bad input, 3: could not run); see `docker logs {container}`")
    return {"platform": "docker", "container": container, "exit_code": exit_code,
            "logs": f"docker logs {container}"}
