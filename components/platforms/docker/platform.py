"""The `docker` platform: each service is a container (`apache/kafka` by default).

One user-defined network per stack; a container's hostname and network alias
are its service name, so services reach each other at `<service>:<port>` with
fixed ports per port name. Ports the Pulumi program itself needs (Connect's
REST API, a broker's ADMIN listener) are reached as `rest_access` says:

- "published" (the default with a local engine: a unix socket): published on
  127.0.0.1 of the Docker host only, on deterministic host ports;
- "tunnel" (the default when the engine is reached over the network,
  `docker:host` or DOCKER_HOST tcp:// or ssh://): published nowhere; the
  program's clients open their own tunnel over the Docker API on first use
  (docker:// addresses, components/platforms/docker/tunnel.py), a broker's
  ADMIN one on the same deterministic port of 127.0.0.1 it is advertised at.

A Kafka container runs the local platform's java command lines
(`java_service`) with the image's paths, under the start script and health
probes shared with the kubernetes platform (containers.py, which also states
what an image must hold).

Secrets (PEM keys, password files: `secret_files`, a cluster's client files)
are uploaded 0600, owned by the image's user, with their content a Pulumi
secret; that makes the container's whole `uploads` a secret in state (the
plain files too: Pulumi marks the property, not one entry of it).
"""
from __future__ import annotations

import base64
import json
import os

import pulumi
import pulumi_docker as docker

from mirrorstack import naming, toolchain
from mirrorstack.platforms.containers import (
    ADMIN_PORT_NAME, AFTER_START_DONE, CLIENTS_ROOT, FILES_ROOT, HOST, IMAGE_DATA_DIR, IMAGE_KAFKA_UID, OFFICIAL_IMAGES,
    IMAGE_SPARK_JARS, IMAGE_SPARK_UID, JOB_DIR, JOB_TIMEOUT_SECONDS, PYTHON_SERVICE_PORT, container_port,
    container_script, dns_label, image_jmx_agent, image_runtime, image_spark_jars, probe_command, python_service,
)
from mirrorstack.platforms.docker import tunnel as docker_tunnel
from mirrorstack.platforms.descriptions import (ImageService, Images, JavaService, JobOutput, PythonModuleService, Ran,
                                                Service, ServiceSet, SparkJob)
from mirrorstack.platforms.java_service import java_service
from mirrorstack.platforms.base import (STOP_GRACE_SECONDS, ClientLogin, UnsupportedService, default_port_base,
                                      hashed_host_port, no_node_ports, run_in_turn)

METRICS_PORT_NAME = "metrics"
KAFKA_UID = str(IMAGE_KAFKA_UID)  # owns the uploaded secret files
SPARK_UID = str(IMAGE_SPARK_UID)
SECRET_MODE = "0600"
REST_ACCESS = ("published", "tunnel")  # how the program reaches Connect and the ADMIN listeners


def engine_host() -> str | None:
    """The engine the docker provider reaches: `docker:host`, else DOCKER_HOST (None: the local socket)."""
    return pulumi.Config("docker").get("host") or os.environ.get("DOCKER_HOST") or None


def fixed_name(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Options of a container, volume or network: they have fixed names (people
    and tools find them by name), so a replacement deletes the old one first;
    created first, the new one would fail ("name already in use")."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True))


class DockerPlatform:  # a Platform (components/platforms/base.py)
    """Services as containers; see the module docstring for the addressing."""

    name = "docker"
    listen_host = "0.0.0.0"  # inside the container; advertised by service name

    def __init__(self, stack: str, network_name: str | None = None, images: Images | None = None,
                 port_base: int | None = None, rest_access: str | None = None, docker_host: str | None = None):
        """`docker_host`: the engine's URL as the docker provider reaches it (give a
        provider's `host` here); None: `docker:host`, else DOCKER_HOST, else the local
        socket. `rest_access`: "published" or "tunnel" (module docstring); None:
        "tunnel" for an engine reached over the network, else "published"."""
        self.docker_host = docker_host or engine_host()
        self.rest_access = rest_access or ("tunnel" if docker_tunnel.is_remote(self.docker_host) else "published")
        if self.rest_access not in REST_ACCESS:
            raise ValueError(f"mirrorstack:restAccess {self.rest_access!r} is not one of docker's {', '.join(REST_ACCESS)}; "
                             "fix: `tunnel` for an engine on another machine, `published` for one on this machine, "
                             "or unset it (chosen from docker:host / DOCKER_HOST)")
        if self.rest_access == "tunnel" and not docker_tunnel.is_remote(self.docker_host):
            raise ValueError("mirrorstack:restAccess tunnel needs the engine's URL (tcp:// or ssh://) in docker:host or "
                             f"DOCKER_HOST, not {self.docker_host or 'the local socket'}; fix: set one, or use "
                             "`published` (the engine is on this machine)")
        self.stack = stack
        self.prefix = dns_label(f"mirrorstack-{stack}")  # containers of several stacks share one engine
        self.network_name = network_name or self.prefix
        self.images = images or OFFICIAL_IMAGES  # the topology's `images:`, else the official ones
        self.image_name = self.images.of("kafka")
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

    node_port = no_node_ports("docker")

    def rack(self) -> str | None:
        return None  # one machine: no zones


    @property
    def tunnelled(self) -> bool:
        return self.rest_access == "tunnel"

    def host_url(self, service: str, port_name: str) -> str:
        """published: http:// on the published port; tunnel: a docker:// address its
        clients open themselves (docker_tunnel), at the engine the provider uses."""
        if self.tunnelled:
            return docker_tunnel.address(self._container(service), self.address(service, port_name)[1],
                                         host=self.docker_host, cert_path=pulumi.Config("docker").get("certPath"))
        return "http://%s:%d" % self.host_address(service, port_name)

    def _container(self, service: str) -> str:
        return f"{self.prefix}-{dns_label(service)}"

    def host_address(self, service: str, port_name: str) -> tuple[str, int]:
        """The port on 127.0.0.1 where this machine reaches it: published there
        (published), or where its tunnel opens (tunnel, deterministic as well);
        ask before `run_set`, which publishes it."""
        inside = self.address(service, port_name)
        key = (inside[0], port_name)
        if key not in self._host_ports:
            if inside[0] in self.containers:
                raise RuntimeError(f"{service}: host_address({port_name!r}) must come before run_set")
            self._host_ports[key] = hashed_host_port(self.port_base, "/".join(key), set(self._host_ports.values()))
            self._inside[(HOST, self._host_ports[key])] = inside
        return HOST, self._host_ports[key]

    def admin_listener(self, service: str) -> tuple[str, str, str | None]:
        """Advertised on 127.0.0.1 at a port of its own, published there or (tunnel)
        where the ACL resource opens its docker:// tunnel first: the resource's
        client, on this machine, reaches every broker at the address it is told."""
        _, port = self.address(service, ADMIN_PORT_NAME)
        host, local = self.host_address(service, ADMIN_PORT_NAME)
        tunnel = docker_tunnel.address(self._container(service), port, host=self.docker_host, local_port=local,
                                       cert_path=pulumi.Config("docker").get("certPath")) if self.tunnelled else None
        return f"{host}:{local}", f"{self.listen_host}:{port}", tunnel

    def client_login(self, service: str, port_name: str) -> ClientLogin:
        """published: on 127.0.0.1 (like ADMIN), dialled as `localhost`, a name
        every node's certificate holds; tunnel: a docker:// tunnel the check
        opens (on a free port, dialled as `localhost` too). Still advertised
        by service name: the check needs only the connection it dials."""
        logs = f"docker logs {self._container(service)}"
        if self.tunnelled:
            tunnel = docker_tunnel.address(self._container(service), self.address(service, port_name)[1],
                                           host=self.docker_host, cert_path=pulumi.Config("docker").get("certPath"))
            return ClientLogin(address=None, tunnel=tunnel, logs=logs)
        _, published = self.host_address(service, port_name)
        return ClientLogin(address=f"localhost:{published}", tunnel=None, logs=logs)

    def started(self, ran: docker.Container) -> pulumi.Output[str]:
        return ran.id  # a change replaces the container: a new id

    def metrics_address(self, service: str) -> tuple[str, int]:
        """Where Prometheus (on the stack network) scrapes the service's JMX exporter."""
        return self.address(service, METRICS_PORT_NAME)

    def in_network(self, host: str, port: int) -> tuple[str, int]:
        return self._inside.get((host, port), (host, port))

    def service_dir(self, service: str) -> str:
        return f"{FILES_ROOT}/{dns_label(service)}"

    def data_dir(self, service: str) -> str:
        return IMAGE_DATA_DIR

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
            resource_name, network_opts = naming.scoped("network", parent, was_root="docker:index/network:Network")
            self._network = docker.Network(resource_name, name=self.network_name, opts=fixed_name(network_opts))
            # keep_locally: destroying one stack must not delete an image others run.
            self._image = docker.RemoteImage(
                *naming.scoped("kafka-image", parent, was_root="docker:index/remoteImage:RemoteImage"),
                name=self.image_name, keep_locally=True)
        return self._network, self._image

    def run_set(self, services: ServiceSet, *, first_after=(), each_after=(), then=None,
                opts: pulumi.ResourceOptions | None = None) -> list[docker.Container]:
        """The members as containers, one at a time (base.run_in_turn). `group`
        is not used: one engine has nothing to spread over, and a container's
        labels cannot change without replacing it."""
        return run_in_turn(services.members, lambda member, depends: self._run_member(
            member, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends))),
            first_after=first_after, each_after=each_after, then=then)

    def _run_member(self, member: JavaService, opts: pulumi.ResourceOptions) -> docker.Container:
        """One of Kafka's main classes in a container: the java command
        lines of `java_service` (as the local platform runs them) under
        `container_script`. `{dir}` is the folder the `files` are uploaded to,
        `secret_files` too, 0600. `after_start` steps run once the service
        answers; the health check waits for them. `uses_clients`: aliases whose
        client files are uploaded to `client_dir(alias)`. With `metrics` (the
        exporter's config), the pinned JMX exporter agent (uploaded from .tools to
        `image_jmx_agent()`, nothing downloaded) serves on `metrics_address` inside
        the network. Every member gets a volume (`keeps_data` or not: Connect's
        stays empty and keeps every container alike). `health_secrets` is not
        used: the program logs in as a broker's SASL users after each start
        (`client_login`, mirrorstack.kafka.broker_logins), not the probe."""
        service, resources = member.name, member.resources
        network, image = self._shared(opts)
        host, folder = dns_label(service), self.service_dir(service)
        spec = java_service(
            image_runtime(), folder=folder, main=member.main, args=member.args, files=member.files, heap=resources.heap,
            user_jvm_options=resources.jvm_options,
            prepare=member.prepare, after_start=member.after_start, jvm_options=member.jvm_options,
            metrics=(self.listen_host, self.metrics_address(service)[1], member.metrics) if member.metrics else None)
        secrets = self._clients(member.uses_clients, service)
        if member.secret_files is not None:
            secrets.insert(0, (folder, pulumi.Output.secret(member.secret_files)))
        uploads = [{"file": f"{folder}/{name}", "content": content} for name, content in spec.files.items()]
        if member.metrics:  # the pinned agent from .tools, where an image built for mirrorstack holds it
            uploads.append({"file": image_jmx_agent(), "source": str(toolchain.jmx_agent_jar())})
        volume_name, volume_opts = naming.scoped(f"{host}-data", pulumi.ResourceOptions(parent=opts.parent if opts else None))
        volume = docker.Volume(volume_name, name=f"{self.prefix}-{host}-data", opts=fixed_name(volume_opts))
        published = [] if self.tunnelled else [  # tunnel: the program's clients come in over the Docker API
            {"internal": self._ports[host][port_name], "external": port, "ip": HOST}
            for (name, port_name), port in self._host_ports.items() if name == host]
        resource_name, opts = naming.scoped(host, fixed_name(opts))
        container = docker.Container(
            resource_name, name=self._container(service), image=image.name, hostname=host,
            networks_advanced=[{"name": network.name, "aliases": [host]}],
            entrypoints=["/bin/sh", "-c"],  # not the image's launcher: the local platform's java command lines
            command=[container_script(spec.argv, spec.prepare, spec.after_start)],
            uploads=self._with_secret_uploads(uploads, secrets, KAFKA_UID),
            volumes=[{"volume_name": volume.name, "container_path": IMAGE_DATA_DIR}],
            ports=published,
            healthcheck={"tests": ["CMD", *probe_command(member.health, self.in_network,
                                                         ready_file=AFTER_START_DONE if member.after_start else None)],
                         "interval": "5s", "timeout": "30s", "start_period": "120s", "retries": 5},
            memory=resources.container_memory_mib,
            **({"cpus": format(resources.cpus, "g")} if resources.cpus else {}),
            restart="unless-stopped",
            # Stopped with TERM and this grace, as on local: without destroy_grace_seconds a replaced
            # container is removed by force (KILL), and a Connect worker's tasks skip their final
            # offset commit (records copied again) and a broker its controlled shutdown.
            stop_timeout=STOP_GRACE_SECONDS, destroy_grace_seconds=STOP_GRACE_SECONDS,
            # Like the local platform, creation returns only once the service is healthy,
            # so `depends_on` on this container means "the service answers".
            wait=True, wait_timeout=300,
            labels=[{"label": "mirrorstack.stack", "value": self.stack},
                    {"label": "mirrorstack.service", "value": service}],
            opts=opts)
        self.containers[host] = container
        return container

    def run_job(self, name: str, *, job: SparkJob, config, settings,
                uses_clients: list[str] | None = None,
                      opts: pulumi.ResourceOptions | None = None) -> docker.Container:
        """Run the validation job once in the official Spark image, on the stack's
        network (the flows' in-network bootstrap servers), with the project's
        spark-sql-kafka jars uploaded where an image built for mirrorstack holds
        them (containers.IMAGE_SPARK_JARS): nothing is fetched at run time. The
        container is replaced (the job re-runs) when the job, its flows or
        `run_id` change; `report` says where its output is.
        `uses_clients`: the aliases whose client folders the job's config
        references (uploaded to `client_dir(alias)`); None: every cluster
        whose client files this platform was given."""
        network, _ = self._shared(opts)
        clients = self._clients(self._client_files if uses_clients is None else uses_clients, name)
        label = dns_label(name)
        image = docker.RemoteImage(*naming.scoped("spark-image", pulumi.ResourceOptions(parent=opts.parent if opts else None)),
                                   name=self.images.of("spark"), keep_locally=True)
        jars = toolchain.spark_kafka_jars()
        argv = job.submit_argv(settings, job_path=f"{JOB_DIR}/{job.entry.name}",
                               config_path=f"{JOB_DIR}/flows.json", jars=image_spark_jars(),
                               py_files=[f"{JOB_DIR}/{job.zip_name}"])
        resource_name, opts = naming.scoped(label, fixed_name(opts))
        container = docker.Container(
            resource_name, name=f"{self.prefix}-{label}", image=image.name,
            # `up` waits for the container to end (attach): bounded, as on the other platforms
            networks_advanced=[{"name": network.name}], command=[*TIMEOUT, str(JOB_TIMEOUT_SECONDS), *argv],
            uploads=self._with_secret_uploads(
                # the main file, and the package's zip beside it (binary: base64) for --py-files
                [{"file": f"{JOB_DIR}/{job.entry.name}", "content": job.entry_text},
                 {"file": f"{JOB_DIR}/{job.zip_name}", "content_base64": base64.b64encode(job.zip_bytes).decode()},
                 {"file": f"{JOB_DIR}/flows.json", "content": config.apply(lambda c: json.dumps(c, indent=2))},
                 *({"file": f"{IMAGE_SPARK_JARS}/{j.name}", "source": str(j)} for j in jars)],
                clients, SPARK_UID),
            # Runs to the end inside `up`; its output is kept as the container's logs.
            must_run=False, attach=True, logs=True, restart="no",
            envs=[f"MIRRORSTACK_RUN_ID={settings.run_id}", f"MIRRORSTACK_JOB_SHA256={job.sha256}"],
            labels=[{"label": "mirrorstack.stack", "value": self.stack},
                    {"label": "mirrorstack.service", "value": name}],
            opts=opts)
        container.report = pulumi.Output.all(container.name, container.exit_code, container.container_logs).apply(
            lambda out: _job_outcome(name, out[0], out[1], out[2], job.output))
        return container

    def _run_image(self, service: str, image_key: str, *, port: int, publish: bool,
                   command: list[str] | None = None, envs=(), uploads=(), opts=None) -> tuple[docker.Container, str]:
        """An image on the stack network; `publish` puts its port on 127.0.0.1 of
        the host. Returns (container, URL: published, or in-network)."""
        network, _ = self._shared(opts)
        host = dns_label(service)
        self._ports.setdefault(host, {})["http"] = port
        image = docker.RemoteImage(*naming.scoped(f"{host}-image", pulumi.ResourceOptions(parent=opts.parent if opts else None)),
                                   name=self.images.of(image_key), keep_locally=True)
        url = f"http://{host}:{port}"
        ports = []
        if publish:
            _, host_port = self.host_address(service, "http")
            ports = [{"internal": port, "external": host_port, "ip": HOST}]
            url = f"http://{HOST}:{host_port}"
        resource_name, opts = naming.scoped(host, fixed_name(opts))
        container = docker.Container(
            resource_name, name=f"{self.prefix}-{host}", image=image.name, hostname=host,
            networks_advanced=[{"name": network.name, "aliases": [host]}], command=command, envs=list(envs),
            uploads=uploads if isinstance(uploads, pulumi.Output) else list(uploads), ports=ports, restart="unless-stopped",
            labels=[{"label": "mirrorstack.stack", "value": self.stack},
                    {"label": "mirrorstack.service", "value": service}], opts=opts)
        self.containers[host] = container
        return container, url

    def run(self, service: Service, opts=None) -> Ran:
        """A container of an ImageService (the image's own user; its files and
        secret files uploaded where its `paths` say, the secret ones with their
        content a Pulumi secret), or of mirrorstack's Python."""
        if isinstance(service, PythonModuleService):
            return self._run_python(service, opts)
        if not isinstance(service, ImageService):
            raise UnsupportedService(self.name, service)
        envs = [f"{name}={value}" if isinstance(value, str) else
                pulumi.Output.from_input(value).apply(lambda v, name=name: f"{name}={v}") for name, value in service.env]
        uploads = [*({"file": service.paths[key], "content": content} for key, content in service.files.items()),
                   *({"file": service.paths[key], "content": pulumi.Output.secret(content)}
                     for key, content in service.secret_files.items())]
        container, url = self._run_image(service.name, service.image, port=service.port, publish=service.publish,
                                         command=service.args, envs=envs, uploads=uploads, opts=opts)
        return Ran(container, (dns_label(service.name), service.port), url)

    def _run_python(self, service: PythonModuleService, opts) -> Ran:
        """In the spark image (python3, urllib3), the modules' source and its
        config uploaded, the secrets and the client folders it reads 0600 for the
        image's user; not published."""
        spec = python_service(service.name, service.module, service.ships, service.secret_config is not None,
                              service.runs_spark)
        uploads = [*({"file": path, "content": text} for path, text in sorted(spec.code.items())),
                   {"file": spec.config_file, "content": pulumi.Output.from_input(service.config).apply(spec.config_text)}]
        secret_folders = self._clients(service.uses_clients, service.name)
        if service.secret_config is not None:
            secrets = pulumi.Output.from_input(service.secret_config).apply(lambda c: {"config.json": json.dumps(c)})
            secret_folders.append((spec.secrets_file.rsplit("/", 1)[0], secrets))
        uploads = self._with_secret_uploads(uploads, secret_folders, SPARK_UID)
        container, url = self._run_image(service.name, "spark", port=PYTHON_SERVICE_PORT, publish=False,
                                         command=spec.argv, envs=[f"PYTHONPATH={spec.code_dir}"], uploads=uploads,
                                         opts=opts)
        return Ran(container, (dns_label(service.name), PYTHON_SERVICE_PORT), url)

    def switch_runner(self, aliases) -> dict:
        """The failover switch reads and writes both clusters, whose addresses
        are names on the stack's network: it runs in a container there
        (mirrorstack.failover.docker_container), of the spark image (python3,
        confluent_kafka), with the pair's client files written where their
        `${file:...}` references point (a secret: the runner prop is one in
        state), and Connect reached by its name there (`inside`: each address
        the program reaches a port at, published or tunnelled → its in-network one)."""
        inside = {f"{host}:{port}": "%s:%d" % named for (host, port), named in self._inside.items()}
        inside.update({f"{self._container(service)}:{port}": f"{service}:{port}"
                       for service, ports in self._ports.items() for port in ports.values()})
        return {"kind": "docker-container", "engine": self.docker_host,
                "cert_path": pulumi.Config("docker").get("certPath"), "network": self.network_name,
                "image": self.images.of("spark"), "uid": SPARK_UID, "prefix": self.prefix, "stack": self.stack,
                "inside": inside,
                "clients": {alias: {"dir": self.client_dir(alias), "files": self._client_files[alias]}
                            for alias in aliases if alias in self._client_files}}


# coreutils' timeout (in every Spark image): TERM at the bound, KILL 30 s later; exit 124 when it ran out.
TIMEOUT, TIMED_OUT = ("timeout", "--kill-after=30"), 124


def _job_outcome(name: str, container: str, exit_code: int | None, logs: str | None, output: JobOutput) -> dict:
    """The stack output `validation` from the job's output (the same summary as local's), or
    `up` failed as on the other platforms: a failed validation names its failures; with
    report_only the job exits 0 on one."""
    lines, where = (logs or "").splitlines(), f"docker logs {container}"
    if exit_code == TIMED_OUT:
        raise RuntimeError(output.could_not_run_message(
            name, exit_code, lines, f" (it did not end within {JOB_TIMEOUT_SECONDS}s and was stopped)")
            + f"\nthe whole log: `{where}`")
    if exit_code == output.failed_exit and (outcome := output.printed_outcome(lines)) is not None:
        raise RuntimeError(output.failed_message(name, f"`{where}`", outcome["failures"]))
    if exit_code not in (None, 0):
        raise RuntimeError(output.could_not_run_message(name, exit_code, lines) + f"\nthe whole log: `{where}`")
    return {"platform": "docker", "container": container, "exit_code": exit_code, "logs": where,
            **output.printed_summary(lines)}
