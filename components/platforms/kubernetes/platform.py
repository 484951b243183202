"""The `kubernetes` platform: each service is a 1-replica StatefulSet.

Per service: a ConfigMap with its files, a headless Service giving it a stable
DNS name (`<service>.<namespace>.svc.<cluster domain>`), and a StatefulSet
running the local platform's java command lines in a Kafka image (`apache/kafka`
by default; containers.py says what an image must hold: for metrics the JMX
agent, which the official image lacks; nothing is downloaded at start).
Manifests are built here as plain dicts (kept in `manifests`, validated by
tests with kubernetes-validate) and handed as-is to pulumi_kubernetes; file
contents may be Outputs inside them, so resolve with
`pulumi.Output.from_input(platform.manifests)` before validating.

Secrets never go in a ConfigMap: a service's `secret_files` (all under
`secrets/`) are a Secret `<service>-secrets` mounted at `<folder>/secrets`, a
cluster's client files a Secret `<alias>-client` mounted at `client_dir(alias)`
in the pods that read them; 0400, group-readable by the pod's fsGroup.

Connect workers are StatefulSets too, without storage: each worker advertises
its own name to the group (`rest.advertised.host.name`), so it needs a stable
identity that exists at most once, which is what a StatefulSet guarantees and
a Deployment's rolling update (two pods for a while) does not.

Every object has a fixed name: pulumi-kubernetes replaces such an object by
deleting it first (its rule for named objects), so a replacement never meets
"already exists".

Whatever runs pods (StatefulSets, Deployments, the validation Job) is waited
for by the program, not by the provider (whose wait sat out 600 s in silence
on a pod that could never run): rollout.py and job_run.py watch the pods,
and one that cannot be scheduled or cannot pull its image fails `up` within
pods.STUCK_SECONDS, naming the pod, Kubernetes' message and the field of
the topology to change.

Sets of services (a cluster's brokers, its controllers, a Connect group's
workers; `ServiceGroup`) are labelled `mirrorstack.io/cluster`, `/role` and
`/connect`; each set gets a PodDisruptionBudget (maxUnavailable 1), made with
the set, and its members prefer other nodes and zones than each
other's (preferences: a 1-node cluster still runs them all). The topology's
`kubernetes:` section (components/model/kubernetes.py) sets the volumes'
class and size, the pods' termination grace, what `destroy` does with data
(claims are always kept when a StatefulSet goes; the namespace, holding them,
is deleted or retained) and the stack's one NetworkPolicy.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex

import pulumi
import pulumi_kubernetes as k8s

from mirrorstack import naming
from mirrorstack.model.kubernetes import KubernetesSettings
from mirrorstack.platforms.containers import (
    ADMIN_PORT_NAME, AFTER_START_DONE, CLIENTS_ROOT, FILES_ROOT, HOST, OFFICIAL_IMAGES,
    IMAGE_SPARK_STATE_DIR, IMAGE_SPARK_UID, JOB_DIR, JOB_TIMEOUT_SECONDS, container_port, container_script, dns_label, image_runtime, image_spark_jars,
    probe_command, python_service, PYTHON_SERVICE_PORT, ready_gate, tcp_target,
)
from mirrorstack.platforms.descriptions import (ExecutorPods, ImageService, Images, JavaService, PythonModuleService,
                                                Ran, Service, ServiceSet, SparkJob)
from mirrorstack.platforms.java_service import java_service
from mirrorstack.platforms.kubernetes import tunnel as kube_tunnel
from mirrorstack.platforms.kubernetes.manifests import (
    APPUSER, DATA_DIR, DATA_MOUNT, EXECUTOR_POD, EXECUTOR_SCRIPT, NODE_IP_ENV, SECRET_MODE, SECRETS_DIR, ZONE_ENV,
    ZONE_LABEL, Files, data_claim, executor_pod_template, group_labels, mebibytes, network_policy, pod_identity_env,
    secret_keys, spread_apart,
)
from mirrorstack.platforms.kubernetes.job_run import ValidationJobRun
from mirrorstack.platforms.kubernetes.rollout import AWAIT_OBSERVED, DeploymentRollout, StatefulSetRollout
from mirrorstack.platforms.base import (ClientLogin, ServiceGroup, UnsupportedService, default_port_base,
                                      hashed_host_port, run_in_turn)

REST_ACCESS = ("port-forward", "in-cluster")
SPARK_UID = IMAGE_SPARK_UID
JOB_CPU_REQUEST = "250m"  # as a broker's default request
SERVICE_EXECUTOR_CPU_REQUEST = "100m"  # a long-running service's executors: idle between its batches


class KubernetesPlatform:  # a Platform (components/platforms/base.py)
    """rest_access says how the Pulumi program (and its MirrorMaker 2 resource)
    reaches Connect's REST API:

    - "in-cluster": the program runs inside the cluster; `host_address` is the
      in-cluster DNS name, like `address`.
    - "port-forward" (default): `host_url` is a kube:// address: whoever calls
      Connect (the MirrorMaker 2 provider, failover) opens a `kubectl
      port-forward` to the worker's Service on first use and keeps it for
      its process's life (tunnel.py); nobody keeps
      one open by hand, and a remote cluster works as a local one.
    """

    name = "kubernetes"
    listen_host = "0.0.0.0"  # inside the pod; advertised by its DNS name

    def __init__(self, stack: str, namespace: str | None = None, rest_access: str = "port-forward", *,
                 cluster_domain: str = "cluster.local", settings: KubernetesSettings | None = None,
                 images: Images | None = None, port_base: int | None = None):
        if rest_access not in REST_ACCESS:
            raise ValueError(f"rest_access must be one of {REST_ACCESS}, not {rest_access!r}")
        self.stack, self.rest_access, self.cluster_domain = stack, rest_access, cluster_domain
        self.namespace = dns_label(namespace or f"mirrorstack-{stack}")
        self.images = images or OFFICIAL_IMAGES  # the topology's `images:`, else the official ones
        self.image = self.images.of("kafka")
        self.settings = settings or KubernetesSettings()  # the topology's `kubernetes:`, else its defaults
        self.port_base = port_base if port_base is not None else default_port_base(stack)
        self._ports: dict[str, dict[str, int]] = {}  # service → port name → container port
        self._forwards: dict[str, int] = {}  # "service/port_name" → local port of the port-forward
        self._inside: dict[tuple[str, int], tuple[str, int]] = {}  # host address → in-cluster address
        self._namespace: k8s.core.v1.Namespace | None = None
        self._client_secrets: dict[str, tuple[str, pulumi.Output, k8s.core.v1.Secret]] = {}  # alias → name, files, Secret
        self.manifests: list[dict] = []

    def _label(self, service: str) -> str:
        return dns_label(service, max_len=52)  # room for the StatefulSet's revision-hash label

    def address(self, service: str, port_name: str) -> tuple[str, int]:
        svc = self._label(service)
        ports = self._ports.setdefault(svc, {})
        if port_name not in ports:
            ports[port_name] = container_port(port_name, set(ports.values()))
        return f"{svc}.{self.namespace}.svc.{self.cluster_domain}", ports[port_name]

    def _forward_port(self, service: str, port_name: str) -> int:
        key = f"{self._label(service)}/{port_name}"
        if key not in self._forwards:
            self._forwards[key] = hashed_host_port(self.port_base, key, set(self._forwards.values()))
            self._inside[(HOST, self._forwards[key])] = self.address(service, port_name)
        return self._forwards[key]

    def admin_listener(self, service: str) -> tuple[str, str, str] | None:
        """port-forward: advertised on 127.0.0.1 at the port its tunnel opens
        there (the stack's own, deterministic), so the ACL resource reaches every
        broker at the address it is told. In-cluster: INTERNAL answers."""
        if self.rest_access == "in-cluster":
            return None
        _, port = self.address(service, ADMIN_PORT_NAME)
        local_port = self._forward_port(service, ADMIN_PORT_NAME)
        tunnel = kube_tunnel.address(self.namespace, "service", self._label(service), port,
                                     context=pulumi.Config("kubernetes").get("context"), local_port=local_port)
        return f"{HOST}:{local_port}", f"{self.listen_host}:{port}", tunnel

    def client_login(self, service: str, port_name: str) -> ClientLogin:
        """port-forward: a tunnel the check opens (on a free port, dialled as
        `localhost`, a name every node's certificate holds). In-cluster: the
        listener's own address."""
        address = self.address(service, port_name)
        logs = f"kubectl logs --namespace {self.namespace} {self._label(service)}-0"
        if self.rest_access == "in-cluster":
            return ClientLogin(address="%s:%d" % address, tunnel=None, logs=logs)
        tunnel = kube_tunnel.address(self.namespace, "service", self._label(service), address[1],
                                     context=pulumi.Config("kubernetes").get("context"))
        return ClientLogin(address=None, tunnel=tunnel, logs=logs)

    def started(self, ran: StatefulSetRollout) -> pulumi.Output:
        return ran.generation  # rolled: a new generation of its StatefulSet, its pod Ready on it

    def host_address(self, service: str, port_name: str) -> tuple[str, int]:
        if self.rest_access == "in-cluster":
            return self.address(service, port_name)
        return HOST, self._forward_port(service, port_name)

    def host_url(self, service: str, port_name: str) -> str:
        """port-forward: a kube:// address; its clients open the port-forward
        themselves (kube_tunnel), in the kubeconfig context the provider uses."""
        if self.rest_access == "in-cluster":
            return "http://%s:%d" % self.address(service, port_name)
        _, port = self.address(service, port_name)
        return kube_tunnel.address(self.namespace, "service", self._label(service), port,
                                   context=pulumi.Config("kubernetes").get("context"))

    def port_forward_command(self, service: str, port_name: str) -> str:
        """The port-forward a person would open by hand (the program opens its own)."""
        _, port = self.address(service, port_name)
        return shlex.join(["kubectl", "port-forward", "--namespace", self.namespace, "--address", HOST,
                           f"service/{self._label(service)}", f"{self._forward_port(service, port_name)}:{port}"])

    def in_cluster(self, host: str, port: int) -> tuple[str, int]:
        """A host address (a port-forward) back to the in-cluster one; probes run in the pod."""
        return self._inside.get((host, port), (host, port))

    def node_port(self, service: str, port_name: str, node_port: int) -> tuple[str, str]:
        """(advertised, listen) "host:port" of a listener published on `node_port`
        of every node (the member's `node_ports` makes the NodePort Service):
        advertised at the address of the node the pod runs on (`HOST_IP`, from the
        downward API, read by the broker at start), bound in the pod."""
        _, port = self.address(service, port_name)
        return f"${{env:{NODE_IP_ENV}}}:{node_port}", f"{self.listen_host}:{port}"

    def _node_port_service(self, svc: str, port_name: str, port: int, node_port: int,
                           opts: pulumi.ResourceOptions) -> None:
        self._create(k8s.core.v1.Service, {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": dns_label(f"{svc}-{port_name}"), "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/instance": svc, "app.kubernetes.io/part-of": "mirrorstack"}},
            # Cluster traffic policy (the default): any node answers a bootstrap, and
            # the broker then tells the client its own node's address. Published before
            # ready, as the headless Service: a broker serves while its readiness still waits
            # for its replicas to catch up (readiness paces a roll, it does not gate clients).
            "spec": {"type": "NodePort", "publishNotReadyAddresses": True,
                     "selector": {"app.kubernetes.io/instance": svc, "app.kubernetes.io/part-of": "mirrorstack"},
                     "ports": [{"name": dns_label(port_name, 15), "port": port, "targetPort": port,
                                "nodePort": node_port}]}}, opts)

    def rack(self) -> str:
        """The node's zone, read at start from the pod's own label: Kubernetes
        1.35+ copies the node's topology labels onto a pod when it binds it
        (KEP-4742, PodTopologyLabelsAdmission; a feature gate on 1.33-1.34).
        No API access and no cluster-wide role are needed, unlike an init
        container reading the Node. Where the label is not copied it is empty:
        every broker is then in rack "" (rack awareness off, nothing breaks)."""
        return f"${{env:{ZONE_ENV}}}"

    def service_dir(self, service: str) -> str:
        return f"{FILES_ROOT}/{self._label(service)}"

    def data_dir(self, service: str) -> str:
        return DATA_DIR  # a volume's where the member `keeps_data`

    def metrics_address(self, service: str) -> tuple[str, int]:
        """Where Prometheus (in the namespace) scrapes the service's JMX exporter."""
        return self.address(service, "metrics")

    def client_dir(self, alias: str) -> str:
        """Where a cluster's client Secret is mounted in the pods that read it."""
        return f"{CLIENTS_ROOT}/{alias}"

    def client_files(self, alias: str, files, opts: pulumi.ResourceOptions | None = None) -> k8s.core.v1.Secret:
        """A cluster's client files (a secret dict: ca.pem, client.pem,
        client.properties) as the Secret `<alias>-client`, mounted at
        `client_dir(alias)` by the pods using them."""
        name = dns_label(f"{alias}-client")
        files = pulumi.Output.secret(files)
        secret = self._create(k8s.core.v1.Secret, {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/part-of": "mirrorstack",
                                    "mirrorstack.io/cluster": dns_label(alias)}},
            "stringData": files},
            pulumi.ResourceOptions(parent=opts.parent if opts else None, depends_on=[self._ns(opts)]))
        self._client_secrets[alias] = (name, files, secret)
        return secret

    def _clients(self, aliases, service: str) -> list[tuple[str, str, pulumi.Output, k8s.core.v1.Secret]]:
        """(alias, Secret name, files, Secret) of each client folder a pod mounts."""
        missing = [a for a in aliases if a not in self._client_secrets]
        if missing:
            raise ValueError(f"{service}: no client files for {', '.join(missing)}; "
                             "client_files(alias) must come before the services that use them")
        return [(a, *self._client_secrets[a]) for a in dict.fromkeys(aliases)]

    def _client_volumes(self, clients) -> tuple[list[dict], list[dict]]:
        """(volumes, mounts) of client Secrets at their client_dir."""
        volumes = [{"name": dns_label(f"client-{alias}"), "secret": {"secretName": name, "defaultMode": SECRET_MODE}}
                   for alias, name, _, _ in clients]
        mounts = [{"name": dns_label(f"client-{alias}"), "mountPath": self.client_dir(alias), "readOnly": True}
                  for alias, _, _, _ in clients]
        return volumes, mounts

    def _create(self, cls, manifest: dict, opts: pulumi.ResourceOptions | None = None, was_root: str | None = None):
        self.manifests.append(manifest)
        # Top-level fields as the SDK's keyword arguments (stringData → string_data).
        body = {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): v for k, v in manifest.items()
                if k not in ("apiVersion", "kind")}
        name, opts = naming.scoped(manifest["metadata"]["name"], opts, was_root=was_root)
        return cls(name, **body, opts=opts)

    def _ns(self, opts: pulumi.ResourceOptions | None) -> k8s.core.v1.Namespace:
        # Shared by every service of the stack: created under the first one's parent,
        # so a provider passed to the component reaches it; the NetworkPolicy with it.
        if self._namespace is None:
            parent = opts.parent if opts else None
            # on_destroy retain: `destroy` leaves the namespace, so the claims in it survive.
            keep = self.settings.storage.on_destroy == "retain"
            self._namespace = self._create(k8s.core.v1.Namespace, {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": self.namespace, "labels": {"app.kubernetes.io/part-of": "mirrorstack"}}},
                pulumi.ResourceOptions(parent=parent, retain_on_delete=keep), was_root="kubernetes:core/v1:Namespace")
            if self.settings.network_policy.enabled:
                self._create(k8s.networking.v1.NetworkPolicy,
                             network_policy(self.namespace, self.settings.network_policy),
                             pulumi.ResourceOptions(parent=parent, depends_on=[self._namespace]))
        return self._namespace

    def _probe(self, health: dict, ready_file: str | None = None) -> dict:
        target = tcp_target(health, self.in_cluster)
        if target is not None and not ready_file:  # the kubelet connects to the pod's own IP: no shell needed
            check = {"tcpSocket": {"port": target[1]}}
        else:
            check = {"exec": {"command": probe_command(health, self.in_cluster, ready_file=ready_file)}}
        return {**check, "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 30, "failureThreshold": 3}

    def run_set(self, services: ServiceSet, *, first_after=(), each_after=(), then=None,
                opts: pulumi.ResourceOptions | None = None) -> list[StatefulSetRollout]:
        """The set's PodDisruptionBudget (a drain takes at most one member at a
        time), then its members one at a time (base.run_in_turn), each a
        StatefulSet labelled as a member and preferring other nodes and zones
        than the others'."""
        group = services.group
        labels = group_labels(group)
        self._create(k8s.policy.v1.PodDisruptionBudget, {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": dns_label(group.name), "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/part-of": "mirrorstack", **labels}},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}},
            pulumi.ResourceOptions(parent=opts.parent if opts else None, depends_on=[self._ns(opts)]))
        return run_in_turn(services.members, lambda member, depends: self._run_member(
            member, group, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends))),
            first_after=first_after, each_after=each_after, then=then)

    def _run_member(self, member: JavaService, group: ServiceGroup, opts: pulumi.ResourceOptions) -> StatefulSetRollout:
        """One of Kafka's main classes as a StatefulSet; `{dir}` is the folder the
        ConfigMap with `files` is mounted at. `secret_files` become the Secret
        `<service>-secrets` mounted at `{dir}/secrets`. `after_start` steps run
        once the service answers (see `container_script`); readiness waits for
        them. `uses_clients`: aliases whose client Secrets are mounted at
        `client_dir(alias)`. The container runs the java command lines of
        `java_service` (as the local platform runs them) under
        `container_script`. With `metrics`, the JMX exporter agent the image
        carries (`image_jmx_agent()`, see containers.py) serves on
        `metrics_address`: nothing is downloaded. `keeps_data`: a volume claim
        at `data_dir`. `node_ports`: a NodePort Service per port, and the node's
        address in the pod's environment (`node_port`'s listener reads it).
        `health_secrets` is not used: the program logs in as a broker's SASL
        users once it rolled (`client_login`, mirrorstack.kafka.broker_logins),
        not the probe."""
        service, files, resources, health = member.name, member.files, member.resources, member.health
        namespace, svc, folder = self._ns(opts), self._label(service), self.service_dir(service)
        gate = ready_gate(health, self.in_cluster, folder, files)
        if gate is not None:
            files = {**files, **gate.files}
        spec = java_service(  # registers the metrics port before the manifests list ports
            image_runtime(), folder=folder, main=member.main, args=member.args, files=files, heap=resources.heap,
            user_jvm_options=resources.jvm_options,
            prepare=member.prepare, after_start=member.after_start, jvm_options=member.jvm_options,
            metrics=(self.listen_host, self.metrics_address(service)[1], member.metrics) if member.metrics else None,
            checks=gate.tools if gate is not None else ())
        files = spec.files
        ready_check = gate.script(spec.checks) if gate is not None else None
        clients = self._clients(member.uses_clients, service)
        members = group_labels(group)
        labels = {"app.kubernetes.io/name": "kafka", "app.kubernetes.io/instance": svc,
                  "app.kubernetes.io/part-of": "mirrorstack", "app.kubernetes.io/managed-by": "pulumi", **members}
        # The selector never changes (a StatefulSet's is immutable): the group labels are not in it.
        selector = {"app.kubernetes.io/instance": svc, "app.kubernetes.io/part-of": "mirrorstack"}
        meta = lambda name: {"name": name, "namespace": self.namespace, "labels": labels}  # noqa: E731
        ports = self._ports.get(svc, {})
        child = pulumi.ResourceOptions(parent=opts.parent if opts else None, depends_on=[namespace])
        for port_name, node_port in member.node_ports.items():
            self._node_port_service(svc, port_name, ports[port_name], node_port, child)

        config_map = self._create(k8s.core.v1.ConfigMap, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"{svc}-files"), "data": files}, child)
        secret_obj = None
        if member.secret_files is not None:
            secret_files = pulumi.Output.secret(member.secret_files)
            secret_obj = self._create(k8s.core.v1.Secret, {
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta(f"{svc}-secrets"),
                "stringData": pulumi.Output.secret(secret_files.apply(lambda f: secret_keys(service, f)))}, child)
        service_obj = self._create(k8s.core.v1.Service, {
            "apiVersion": "v1", "kind": "Service", "metadata": meta(svc),
            # Headless, and published before ready: Kafka resolves its own name to bind,
            # and brokers must reach the controller before anything is ready.
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": selector,
                     "ports": [{"name": dns_label(n, 15), "port": p, "targetPort": p} for n, p in ports.items()]}},
            child)

        memory = f"{resources.container_memory_mib}Mi"  # heap + metaspace, buffers and an after-start tool
        mounts = [{"name": "files", "mountPath": folder, "readOnly": True}]
        claims = []
        if member.keeps_data:
            mounts.append({"name": "data", "mountPath": DATA_MOUNT})
            claims.append(data_claim(self.settings.storage.size, self.settings.storage.class_name))
        # The pods restart when a file changes: a ConfigMap update alone would not.
        checksum = pulumi.Output.all(**files).apply(
            lambda f: hashlib.sha256(json.dumps(f, sort_keys=True).encode()).hexdigest())
        volumes = [{"name": "files", "configMap": {"name": f"{svc}-files"}}]
        if secret_obj is not None:  # a Secret volume may sit inside the ConfigMap one (kubelet makes the mount point)
            volumes.append({"name": "secrets", "secret": {"secretName": f"{svc}-secrets", "defaultMode": SECRET_MODE}})
            mounts.append({"name": "secrets", "mountPath": f"{folder}/{SECRETS_DIR}", "readOnly": True})
        client_volumes, client_mounts = self._client_volumes(clients)
        volumes += client_volumes
        mounts += client_mounts
        annotations = {"mirrorstack.io/files-sha256": checksum}
        secret_objs = [*([secret_obj] if secret_obj else []), *(secret for _, _, _, secret in clients)]
        if secret_objs:
            # A changed Secret restarts the pods too. Its resourceVersion says so without
            # putting a digest of secret values where readers of StatefulSets see it.
            annotations["mirrorstack.io/secrets-version"] = _versions(secret_objs)
        container = {
            "name": "kafka", "image": self.image, "imagePullPolicy": "IfNotPresent",
            # The local platform's java command lines; the JMX agent is the image's own (image_jmx_agent).
            "command": ["/bin/sh", "-c", container_script(spec.argv, spec.prepare, spec.after_start, ready_check)],
            "ports": [{"name": dns_label(n, 15), "containerPort": p} for n, p in ports.items()],
            "readinessProbe": self._probe(health, AFTER_START_DONE if member.after_start or ready_check else None),
            # No CPU limit: throttling stalls JVMs; memory is capped at what is requested.
            "resources": {"requests": {"cpu": format(resources.cpus, "g") if resources.cpus else "250m",
                                       "memory": memory}, "limits": {"memory": memory}},
            "volumeMounts": mounts,
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
        container["env"] = [{"name": ZONE_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{ZONE_LABEL}']"}}}]
        if member.node_ports:
            container["env"].append({"name": NODE_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}})
        statefulset = self._create(k8s.apps.v1.StatefulSet, {
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {**meta(svc), "annotations": AWAIT_OBSERVED},
            "spec": {
                "serviceName": svc, "replicas": 1, "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": labels, "annotations": annotations},
                    "spec": {
                        "securityContext": {"runAsUser": APPUSER, "runAsGroup": APPUSER, "runAsNonRoot": True,
                                            "fsGroup": APPUSER, "seccompProfile": {"type": "RuntimeDefault"}},
                        # A broker's controlled shutdown (leadership moved, logs closed cleanly).
                        "terminationGracePeriodSeconds": self.settings.termination_grace_seconds,
                        **spread_apart(members),
                        "containers": [container],
                        "volumes": volumes}},
                # Kept when the StatefulSet is deleted or replaced (a changed claim template):
                # only the namespace's deletion at `destroy` deletes data (storage.on_destroy).
                **({"volumeClaimTemplates": claims, "persistentVolumeClaimRetentionPolicy": {
                    "whenDeleted": "Retain", "whenScaled": "Retain"}} if claims else {})}},
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[
                namespace, config_map, service_obj, *secret_objs])))
        # What the next node waits for: this one rolled and Ready (the provider's own wait ends
        # once the controller has seen the spec), failing fast on a pod that cannot run.
        fields = {**group.sizing, "image": "images.kafka",
                  **({"storage": "kubernetes.storage.class_name"} if claims else {})}
        return StatefulSetRollout(svc, statefulset, namespace=self.namespace,
                                  context=pulumi.Config("kubernetes").get("context"), fields=fields,
                                  opts=pulumi.ResourceOptions(parent=opts.parent if opts else None))

    def run_job(self, name: str, *, job: SparkJob, config, settings,
                uses_clients: list[str] | None = None, opts: pulumi.ResourceOptions | None = None):
        """The validation job as a Job, waited for by a ValidationJobRun (returned:
        its `report` is the stack output `validation`), which shows the job's
        progress and report and fails `up` as the local platform does, or at
        once on a pod that cannot run; plus a CronJob with the same pod on
        `settings.schedule`. The flows (which may hold client credentials) go in
        a Secret, the job (main file and package zip) in a ConfigMap; the spark-sql-kafka jars are the
        image's (containers.IMAGE_SPARK_JARS): nothing is downloaded. A change of the
        job, its flows or `run_id` changes the pod template: a new Job runs.
        `uses_clients`: the aliases whose client folders the flows reference
        (their Secrets mounted at `client_dir(alias)`); None: every cluster
        whose client files this platform was given."""
        namespace, label = self._ns(opts), dns_label(name, max_len=52)
        clients = self._clients(self._client_secrets if uses_clients is None else uses_clients, name)
        client_volumes, client_mounts = self._client_volumes(clients)
        labels = {"app.kubernetes.io/name": "spark-validation", "app.kubernetes.io/instance": label,
                  "app.kubernetes.io/part-of": "mirrorstack", "app.kubernetes.io/managed-by": "pulumi"}
        meta = lambda n: {"name": n, "namespace": self.namespace, "labels": labels}  # noqa: E731
        child = pulumi.ResourceOptions(parent=opts.parent if opts else None, depends_on=[namespace])
        flows_json = config.apply(lambda c: json.dumps(c, indent=2))
        secret = self._create(k8s.core.v1.Secret, {
            "apiVersion": "v1", "kind": "Secret", "metadata": meta(f"{label}-flows"), "type": "Opaque",
            "stringData": {"flows.json": flows_json}}, child)
        pod_security = {"runAsUser": SPARK_UID, "runAsGroup": SPARK_UID, "runAsNonRoot": True,
                        "fsGroup": SPARK_UID, "seccompProfile": {"type": "RuntimeDefault"}}
        mounts = [{"name": "job", "mountPath": f"{JOB_DIR}/job", "readOnly": True},
                  {"name": "flows", "mountPath": f"{JOB_DIR}/flows", "readOnly": True},
                  {"name": "tmp", "mountPath": "/tmp"}, *client_mounts]
        volumes = [{"name": "job", "configMap": {"name": f"{label}-job"}},
                   {"name": "flows", "secret": {"secretName": f"{label}-flows", "defaultMode": 0o400}},
                   {"name": "tmp", "emptyDir": {}}, *client_volumes]
        # Executors read no flows (the driver alone does): everything else they have as it has.
        unflowed = lambda items: [item for item in items if item["name"] != "flows"]  # noqa: E731
        # The main file beside the package's zip (binary data), given to --py-files; with executor
        # pods, their container's command and the pod template Spark makes them from.
        job_files = {job.entry.name: job.entry_text}
        executor_pods, driver_access = None, []
        if settings.runs_executor_pods:
            executor_pods = ExecutorPods(self.namespace, self.images.of("spark"), f"{JOB_DIR}/job/{EXECUTOR_POD}",
                                         JOB_CPU_REQUEST)
            job_files |= {EXECUTOR_SCRIPT: job.executor_script, EXECUTOR_POD: json.dumps(executor_pod_template(
                {**labels, "app.kubernetes.io/component": "executor"}, pod_security, unflowed(mounts), unflowed(volumes),
                ["bash", f"{JOB_DIR}/job/{EXECUTOR_SCRIPT}"]), indent=2)}
            driver_access = self._driver_access(f"{label}-driver", job.driver_rules, meta, child)
        files = self._create(k8s.core.v1.ConfigMap, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"{label}-job"), "data": job_files,
            "binaryData": {job.zip_name: base64.b64encode(job.zip_bytes).decode()}}, child)
        argv = job.submit_argv(settings, job_path=f"{JOB_DIR}/job/{job.entry.name}",
                               py_files=[f"{JOB_DIR}/job/{job.zip_name}"],
                               config_path=f"{JOB_DIR}/flows/flows.json", jars=image_spark_jars(),
                               executor_pods=executor_pods)
        memory = f"{mebibytes(settings.driver_memory) + 768}Mi"  # heap + off-heap, Python worker
        checksum = flows_json.apply(lambda text: hashlib.sha256(f"{text}{job.sha256}".encode()).hexdigest())
        pod = {
            "metadata": {"labels": labels, "annotations": {"mirrorstack.io/run-id": settings.run_id,
                                                           "mirrorstack.io/inputs-sha256": checksum}},
            "spec": {
                "restartPolicy": "Never",
                # fsGroup: the 0400 Secret files (flows, client folders) are group-readable for the job.
                "securityContext": pod_security,
                **({"serviceAccountName": f"{label}-driver"} if executor_pods else {}),
                "containers": [{
                    "name": "validate", "image": self.images.of("spark"),
                    "imagePullPolicy": "IfNotPresent", "command": argv,
                    # Spark in local mode uses what CPU the node has free; the request only places
                    # the pod (a whole core kept it Pending on a small, busy node).
                    "resources": {"requests": {"cpu": JOB_CPU_REQUEST, "memory": memory}, "limits": {"memory": memory}},
                    **({"env": pod_identity_env()} if executor_pods else {}),
                    "volumeMounts": mounts,
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
                "volumes": volumes}}
        depends = pulumi.ResourceOptions(depends_on=[namespace, secret, files, *driver_access,
                                                     *(s for _, _, _, s in clients)])
        # The provider returns once the Job is made (AWAIT_OBSERVED); ValidationJobRun waits for it.
        job_obj = self._create(k8s.batch.v1.Job, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {**meta(label), "annotations": AWAIT_OBSERVED},
            "spec": {"backoffLimit": 0, "template": pod}},
            pulumi.ResourceOptions.merge(opts, depends))
        if settings.schedule:
            self._create(k8s.batch.v1.CronJob, {
                "apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(f"{label}-cron"),
                "spec": {"schedule": settings.schedule, "concurrencyPolicy": "Forbid",
                         "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 3,
                         "jobTemplate": {"spec": {"backoffLimit": 0, "template": pod}}}},
                pulumi.ResourceOptions.merge(child, depends))
        where = {"platform": "kubernetes", "namespace": self.namespace, "job": label,
                 "cron_job": f"{label}-cron" if settings.schedule else None,
                 "logs": f"kubectl logs --namespace {self.namespace} job/{label}"}
        # The Job's CPU request is fixed (JOB_CPU_REQUEST); its memory follows driver_memory.
        fields = {"what": "the validation Job", "memory": "validation.driver_memory", "image": "images.spark"}
        return ValidationJobRun(name, job_obj, namespace=self.namespace, job_name=label,
                                context=pulumi.Config("kubernetes").get("context"), where=where, fields=fields,
                                timeout_seconds=JOB_TIMEOUT_SECONDS, output=job.output,
                                opts=pulumi.ResourceOptions(parent=opts.parent if opts else None))

    def _driver_access(self, name: str, rules, meta, opts) -> list:
        """A Spark driver's own ServiceAccount, with a Role holding `rules` in the namespace only."""
        account = self._create(k8s.core.v1.ServiceAccount, {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name)}, opts)
        role = self._create(k8s.rbac.v1.Role, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(name),
            "rules": [dict(rule) for rule in rules]}, opts)
        binding = self._create(k8s.rbac.v1.RoleBinding, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": self.namespace}]},
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[account, role])))
        return [account, role, binding]

    # -------------------------------------------------------------- monitoring services

    def _run_image(self, service: str, image_key: str, *, port: int, args=None, env=(), files=None,
                   mounts=(), volumes=(), run_as: int | None = None, workdir: str | None = None,
                   pod_spec: dict | None = None, strategy: dict | None = None, opts=None):
        """A plain image (Prometheus, Grafana, UIs) as a 1-replica Deployment and a
        Service; `files` go in a ConfigMap mounted at each key's folder. Returns
        (its rollout: done when the Deployment's pod is available, in-cluster URL). `pod_spec`: more of the
        pod's spec (its ServiceAccount); `strategy`: the Deployment's (default a rolling update)."""
        namespace, svc = self._ns(opts), self._label(service)
        labels = {"app.kubernetes.io/name": image_key.replace("_", "-"), "app.kubernetes.io/instance": svc,
                  "app.kubernetes.io/part-of": "mirrorstack", "app.kubernetes.io/managed-by": "pulumi"}
        selector = {"app.kubernetes.io/instance": svc, "app.kubernetes.io/part-of": "mirrorstack"}
        meta = lambda name: {"name": name, "namespace": self.namespace, "labels": labels}  # noqa: E731
        child = pulumi.ResourceOptions(parent=opts.parent if opts else None, depends_on=[namespace])
        depends = [namespace]
        volumes, mounts, annotations = list(volumes), list(mounts), {}
        if files:
            # The pod is made again when a file changes: its subPath mounts never see a ConfigMap update
            # (Prometheus kept scraping what its first config listed).
            annotations["mirrorstack.io/files-sha256"] = pulumi.Output.all(**files).apply(
                lambda f: hashlib.sha256(json.dumps(f, sort_keys=True).encode()).hexdigest())
            depends.append(self._create(k8s.core.v1.ConfigMap, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"{svc}-files"),
                "data": {_key(key): text for key, text in files.items()}}, child))
            volumes.append({"name": "files", "configMap": {"name": f"{svc}-files"}})
            mounts += [{"name": "files", "mountPath": path, "subPath": _key(key), "readOnly": True}
                       for key, path in files.paths.items()]
        depends.append(self._create(k8s.core.v1.Service, {
            "apiVersion": "v1", "kind": "Service", "metadata": meta(svc),
            "spec": {"selector": selector, "ports": [{"name": "http", "port": port, "targetPort": port}]}}, child))
        container = {"name": svc[:63], "image": self.images.of(image_key), "imagePullPolicy": "IfNotPresent",
                     "ports": [{"name": "http", "containerPort": port}], "env": list(env), "volumeMounts": mounts,
                     "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
        if args:
            container["args"] = args
        if workdir:  # no env var: no container of the stack takes a value from its environment
            container["workingDir"] = workdir
        pod_security = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        if run_as is not None:
            pod_security.update(runAsUser=run_as, runAsGroup=run_as, fsGroup=run_as)
        deployment = self._create(k8s.apps.v1.Deployment, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {**meta(svc), "annotations": AWAIT_OBSERVED},
            "spec": {"replicas": 1, "selector": {"matchLabels": selector}, **({"strategy": strategy} if strategy else {}),
                     "template": {"metadata": {"labels": labels, **({"annotations": annotations} if annotations else {})},
                                  "spec": {"securityContext": pod_security, "containers": [container],
                                           "volumes": volumes, **(pod_spec or {})}}}},
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends)))
        # What depends on the service waits for its pod available (the provider's own wait ends
        # once the controller has seen the spec), failing fast on a pod that cannot run.
        rollout = DeploymentRollout(svc, deployment, namespace=self.namespace,
                                    context=pulumi.Config("kubernetes").get("context"),
                                    fields={"what": service, "image": f"images.{image_key}"},
                                    opts=pulumi.ResourceOptions(parent=opts.parent if opts else None))
        return rollout, f"http://{svc}.{self.namespace}.svc.{self.cluster_domain}:{port}"

    def run(self, service: Service, opts=None) -> Ran:
        """A Deployment and a Service of an ImageService (its files in a ConfigMap,
        its secret files in a Secret, each mounted at its path; `scratch` an
        emptyDir), or of mirrorstack's Python; its in-cluster URL."""
        if isinstance(service, PythonModuleService):
            return self._run_python(service, opts)
        if not isinstance(service, ImageService):
            raise UnsupportedService(self.name, service)
        svc = self._label(service.name)
        volumes, mounts, depends = [], [], []
        if service.scratch is not None:
            volumes.append({"name": "data", "emptyDir": {}})
            mounts.append({"name": "data", "mountPath": service.scratch})
        if service.secret_files:
            depends.append(self._secret(f"{svc}-secrets", {_key(k): v for k, v in service.secret_files.items()}, opts))
            volumes.append({"name": "secrets", "secret": {"secretName": f"{svc}-secrets", "defaultMode": SECRET_MODE}})
            mounts += [{"name": "secrets", "mountPath": service.paths[key], "subPath": _key(key), "readOnly": True}
                       for key in service.secret_files]
        files = Files(dict(service.files), {key: service.paths[key] for key in service.files}) if service.files else None
        rollout, url = self._run_image(
            service.name, service.image, port=service.port, args=service.args, files=files, run_as=service.user,
            env=[{"name": name, "value": value} for name, value in service.env], mounts=mounts, volumes=volumes,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends)))
        return Ran(rollout, (f"{svc}.{self.namespace}.svc.{self.cluster_domain}", service.port), url)

    def _secret(self, name: str, data: dict, opts) -> k8s.core.v1.Secret:
        return self._create(k8s.core.v1.Secret, {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {"app.kubernetes.io/part-of": "mirrorstack"}},
            "stringData": pulumi.Output.secret(data)},
            pulumi.ResourceOptions(parent=opts.parent if opts else None, depends_on=[self._ns(opts)]))

    def _run_python(self, service: PythonModuleService, opts) -> Ran:
        """A Deployment in the spark image (python3, urllib3): the modules' source
        and its config in a ConfigMap, `secret_config` in a Secret (mode 0400), the
        client Secrets it reads at their client_dir."""
        svc = self._label(service.name)
        spec = python_service(service.name, service.module, service.ships, service.secret_config is not None,
                              service.runs_spark)
        data = {path.removeprefix(f"{spec.folder}/"): text for path, text in spec.code.items()}
        volumes, mounts, depends, env, pod_spec, strategy, spark_conf = [], [], [], [], {}, None, None
        if service.secret_config is not None:
            depends.append(self._secret(f"{svc}-secrets", {"config.json": pulumi.Output.from_input(
                service.secret_config).apply(json.dumps)}, opts))
            volumes.append({"name": "secrets", "secret": {"secretName": f"{svc}-secrets", "defaultMode": 0o400}})
            mounts.append({"name": "secrets", "mountPath": spec.secrets_file.rsplit("/", 1)[0], "readOnly": True})
        clients = self._clients(service.uses_clients, svc)  # before the executors' template: they read them too
        client_volumes, client_mounts = self._client_volumes(clients)
        volumes, mounts, depends = volumes + client_volumes, mounts + client_mounts, depends + [
            secret for *_, secret in clients]
        if service.runs_spark:
            # Its state (a streaming checkpoint) on a volume of its own: kept when the pod is made again.
            # One driver at a time writes it: the old pod goes before the new one starts.
            depends.append(self._state_claim(f"{svc}-state", opts))
            volumes += [{"name": "state", "persistentVolumeClaim": {"claimName": f"{svc}-state"}},
                        {"name": "tmp", "emptyDir": {}}]
            mounts += [{"name": "state", "mountPath": IMAGE_SPARK_STATE_DIR}, {"name": "tmp", "mountPath": "/tmp"}]
            strategy = {"type": "Recreate"}
        if service.executor_pods:
            files, access, spark_conf = self._executor_pods(svc, service.executor_pods, spec.folder, mounts,
                                                            volumes, opts)
            data, depends = {**data, **files}, [*depends, *access]
            # The driver's own account, and its pod's name and IP: the executors' owner and way back to it.
            pod_spec, env = {"serviceAccountName": f"{svc}-driver"}, pod_identity_env()
        data["config.json"] = pulumi.Output.from_input(service.config).apply(
            lambda config: spec.config_text({**config, "spark_conf": spark_conf} if spark_conf else config))
        deployment, _ = self._run_image(
            service.name, "spark", port=PYTHON_SERVICE_PORT, args=spec.argv, run_as=SPARK_UID, workdir=spec.code_dir,
            files=Files(data, {key: f"{spec.folder}/{key}" for key in data}), mounts=mounts, volumes=volumes,
            env=env, pod_spec=pod_spec, strategy=strategy,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends)))
        address = (f"{svc}.{self.namespace}.svc.{self.cluster_domain}", PYTHON_SERVICE_PORT)
        return Ran(deployment, address, "http://%s:%d" % address)

    def _state_claim(self, name: str, opts):
        """A service's state volume (the stack's storage class and size): the namespace's deletion at
        `destroy` deletes it, as the brokers' data."""
        claim = data_claim(self.settings.storage.size, self.settings.storage.class_name)
        return self._create(k8s.core.v1.PersistentVolumeClaim, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            # Bound when its pod is scheduled (a WaitForFirstConsumer class): not waited for here.
            "metadata": {"name": name, "namespace": self.namespace, "annotations": AWAIT_OBSERVED,
                         "labels": {"app.kubernetes.io/part-of": "mirrorstack"}},
            "spec": claim["spec"]},
            pulumi.ResourceOptions(parent=opts.parent if opts else None, depends_on=[self._ns(opts)]))

    def _executor_pods(self, svc: str, needs, folder: str, mounts: list, volumes: list,
                       opts) -> tuple[dict, list, dict]:
        """What a service's Spark driver that starts executor pods needs: their pod template and command
        (files beside its own), its ServiceAccount `<svc>-driver` with its Role, and the session's
        settings for them. Executors mount what the driver does (the state volume: their state stores
        are in its checkpoint) on the driver's node, where its ReadWriteOnce volume is. Returns (files,
        the account's resources, session settings)."""
        labels = {"app.kubernetes.io/name": "spark", "app.kubernetes.io/instance": svc,
                  "app.kubernetes.io/part-of": "mirrorstack", "app.kubernetes.io/component": "executor"}
        script = f"{folder}/{EXECUTOR_SCRIPT}"
        template = executor_pod_template(
            labels, {"runAsUser": SPARK_UID, "runAsGroup": SPARK_UID, "runAsNonRoot": True, "fsGroup": SPARK_UID,
                     "seccompProfile": {"type": "RuntimeDefault"}},
            [*mounts, {"name": "files", "mountPath": script, "subPath": _key(EXECUTOR_SCRIPT), "readOnly": True}],
            [*volumes, {"name": "files", "configMap": {"name": f"{svc}-files"}}], ["bash", script])
        template["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": "kubernetes.io/hostname", "labelSelector": {
                "matchLabels": {"app.kubernetes.io/instance": svc},
                "matchExpressions": [{"key": "spark-role", "operator": "DoesNotExist"}]}}]}}
        pods = ExecutorPods(self.namespace, self.images.of("spark"), f"{folder}/{EXECUTOR_POD}",
                            SERVICE_EXECUTOR_CPU_REQUEST)
        meta = lambda n: {"name": n, "namespace": self.namespace, "labels": {  # noqa: E731
            k: v for k, v in labels.items() if k != "app.kubernetes.io/component"}}
        child = pulumi.ResourceOptions(parent=opts.parent if opts else None, depends_on=[self._ns(opts)])
        access = self._driver_access(f"{svc}-driver", needs.driver_rules, meta, child)
        files = {EXECUTOR_SCRIPT: needs.script, EXECUTOR_POD: json.dumps(template, indent=2)}
        return files, access, needs.conf(pods)

    def switch_runner(self, aliases) -> dict | None:
        """The failover switch reads and writes both clusters, whose addresses
        resolve only inside the cluster: with the program outside it
        (port-forward), the switch runs as a Job in the namespace
        (mirrorstack.failover.kube_job), in the spark image (python3,
        confluent_kafka), with the pair's client Secrets mounted where their
        `${file:...}` references point. In-cluster: in the program itself."""
        if self.rest_access == "in-cluster":
            return None
        return {"kind": "kubernetes-job", "namespace": self.namespace,
                "context": pulumi.Config("kubernetes").get("context"), "image": self.images.of("spark"),
                "uid": SPARK_UID, "cluster_domain": self.cluster_domain,
                "clients": {alias: {"secret": self._client_secrets[alias][0], "dir": self.client_dir(alias)}
                            for alias in aliases if alias in self._client_secrets}}


def _key(path: str) -> str:
    """A file's key in a ConfigMap or Secret (no `/` allowed there)."""
    return path.replace("/", "__")


def _versions(secrets: list) -> pulumi.Output[str]:
    """The Secrets' resourceVersions, comma-separated (changes when one is updated)."""
    return pulumi.Output.all(*[s.metadata for s in secrets]).apply(
        lambda metas: ",".join(str(getattr(m, "resource_version", None) or "") for m in metas))
