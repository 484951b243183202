"""Monitoring in the resource graphs under Pulumi mocks: the JMX agent on every
Kafka/Connect JVM, Prometheus scraping exactly those agents, Grafana with its
provisioning and the admin password as a secret, on local, docker and
kubernetes (manifests validated strictly)."""
from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml

from mirrorstack import toolchain
from mirrorstack.model.spec import load_topology
from mirrorstack.platforms.containers import image_jmx_agent
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.kubernetes.manifests import KUBERNETES_VERSION
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.secrets import GeneratedPasswordProvider
from mirrorstack.versions import jmx_exporter_version, official_image
from tests.support.mocked_runs import script_commands, script_steps
from tests.support.pulumi_mocks import SECRET_SIG, RecordingMocks, ints

STACK = "active-passive"
JVMS = {"primary-controller", "primary-broker-0", "standby-controller", "standby-broker-0", "connect-standby-0"}


# On kubernetes the Kafka image must carry the JMX agent: one `make images` built, in a registry.
K8S_KAFKA_IMAGE = "registry.example.com/mirrorstack/kafka:1"


def topology(platform: str, **monitoring):
    images = {"kafka": K8S_KAFKA_IMAGE} if platform == "kubernetes" else {}
    return load_topology({"platform": platform, "clusters": {"primary": {}, "standby": {}}, "images": images,
                          "flows": [{"source": "primary", "target": "standby"}], "monitoring": monitoring})


def build(platform_name, make, **monitoring):
    import pulumi
    from mirrorstack.args import ReplicationTopologyArgs
    from mirrorstack.topology import ReplicationTopology
    mocks, built = RecordingMocks(), {}
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack=STACK, preview=False)

    @pulumi.runtime.test
    def program():
        platform = make()
        t = ReplicationTopology(STACK, ReplicationTopologyArgs(
            topology=topology(platform_name, **monitoring), platform=platform, stack=STACK,
            grafana_password=pulumi.Output.secret("s3cret-pw")))
        built["platform"] = platform
        return pulumi.Output.all(pulumi.Output.from_input(getattr(platform, "manifests", [])),
                                 t.monitoring.prometheus_url).apply(
            lambda out: built.update(manifests=out[0], prometheus_url=out[1]))
    program()
    return mocks, built


def scrape_targets(prometheus_yml: str) -> dict[str, tuple[str, str]]:
    config = yaml.safe_load(prometheus_yml)
    return {t: (s["labels"]["cluster"], s["labels"]["role"]) for job in config["scrape_configs"]
            for s in job["static_configs"] for t in s["targets"]}


# ---------------------------------------------------------------- local

@pytest.fixture(scope="module")
def local(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local")
    return (*build("local", lambda: LocalPlatform(STACK, str(folder))), folder.resolve())


def test_local_every_jvm_runs_the_agent_that_prometheus_scrapes(local):
    mocks, built, folder = local
    services = mocks.of_type("pulumi-python:dynamic")
    agents = {}
    for name in JVMS:
        (agent,) = [a for a in services[name]["argv"] if a.startswith("-javaagent:")]
        jar, _, rest = agent.removeprefix("-javaagent:").partition("=")
        host, port, config = rest.split(":")
        assert jar == str(toolchain.jmx_agent_jar()) and host == "127.0.0.1"
        assert config == f"{folder}/{name}/jmx-exporter.yaml" and "jmx-exporter.yaml" in services[name]["files"]
        agents[f"{host}:{port}"] = name
    prometheus = services["prometheus"]
    assert prometheus["argv"][0] == toolchain.prometheus_binary()
    assert f"--config.file={folder}/prometheus/prometheus.yml" in prometheus["argv"]
    targets = scrape_targets(prometheus["files"]["prometheus.yml"])
    supervisor = services["supervisor-standby"]["health"]["url"].split("/")[2]  # host:port
    assert set(targets) == set(agents) | {supervisor}  # + the Connect group's self-healing supervisor
    assert targets[supervisor] == ("standby", "supervisor")
    assert {agents[t]: v for t, v in targets.items() if t != supervisor}["connect-standby-0"] == ("standby", "connect")
    assert yaml.safe_load(prometheus["files"]["prometheus.yml"])["rule_files"] == [f"{folder}/prometheus/alerts.yml"]
    assert prometheus["health"]["url"] == f"{built['prometheus_url']}/-/ready"


def test_local_grafana_is_files_pointing_at_the_local_prometheus(local):
    mocks, built, folder = local
    grafana = mocks.of_type("pulumi-python:dynamic")["grafana"]
    assert grafana["folder"] == f"{folder}/grafana"
    (ds,) = yaml.safe_load(grafana["files"]["provisioning/datasources/prometheus.yaml"])["datasources"]
    assert ds["url"] == built["prometheus_url"]
    assert json.loads(grafana["files"]["dashboards/mirrorstack-flow.json"])["uid"] == "mirrorstack-flow"


# ---------------------------------------------------------------- docker

@pytest.fixture(scope="module")
def dockerized():
    return build("docker", lambda: DockerPlatform(STACK), kafka_ui=True, kafka_exporter=True)


def test_docker_agent_jar_uploaded_and_on_the_service_command_line_only(dockerized):
    mocks, built = dockerized
    containers = mocks.of_type("docker:index/container:Container")
    agent = f"/opt/mirrorstack/lib/jmx/jmx_prometheus_javaagent-{jmx_exporter_version()}.jar"
    assert image_jmx_agent() == agent
    for name in JVMS:
        c = containers[name]
        port = built["platform"].metrics_address(name)[1]
        *prepare, service = script_steps(c["command"][0])
        # Serving on every interface of the container: Prometheus scrapes it over the network.
        assert f"-javaagent:{agent}=0.0.0.0:{port}:/opt/mirrorstack/{name}/jmx-exporter.yaml" in service
        assert {"file": agent, "source": str(toolchain.jmx_agent_jar())} in c["uploads"]
        # the storage format must not start a second agent on the same port
        assert not any(arg.startswith("-javaagent:") for step in prepare for arg in step)
        assert "javaagent" not in json.dumps(c["healthcheck"]) and not c.get("envs")


def test_docker_prometheus_grafana_and_extras(dockerized):
    mocks, built = dockerized
    containers = mocks.of_type("docker:index/container:Container")
    images = {n: i["name"] for n, i in mocks.of_type("docker:index/remoteImage:RemoteImage").items()}
    assert images["prometheus-image"] == official_image("prometheus") and images["grafana-image"] == official_image("grafana")
    prom = containers["prometheus"]
    (published,) = prom["ports"]
    assert published["ip"] == "127.0.0.1" and built["prometheus_url"] == f"http://127.0.0.1:{int(published['external'])}"
    uploads = {u["file"]: u for u in prom["uploads"]}
    targets = scrape_targets(uploads["/etc/mirrorstack/prometheus/prometheus.yml"]["content"])
    assert {t.split(":")[0] for t in targets} == JVMS | {"kafka-exporter-primary", "kafka-exporter-standby",
                                                        "supervisor-standby"}
    assert targets["supervisor-standby:9405"] == ("standby", "supervisor")
    assert targets["kafka-exporter-primary:9308"] == ("primary", "kafka-exporter")
    grafana = containers["grafana"]
    assert "GF_SECURITY_ADMIN_PASSWORD__FILE=/etc/mirrorstack/grafana-admin-password" in grafana["envs"]
    assert not any("s3cret-pw" in e for e in grafana["envs"])
    assert SECRET_SIG in json.dumps(grafana["uploads"])  # the password makes the uploads a secret in state
    files = {u["file"]: u["content"] for u in ints(grafana["uploads"])}
    assert files["/etc/mirrorstack/grafana-admin-password"] == "s3cret-pw"
    (ds,) = yaml.safe_load(files["/etc/grafana/provisioning/datasources/prometheus.yaml"])["datasources"]
    assert ds["url"] == "http://prometheus:9090"
    assert "/var/lib/grafana/dashboards/mirrorstack-overview.json" in files
    ui = containers["kafka-ui"]
    assert "KAFKA_CLUSTERS_0_NAME=primary" in ui["envs"] and "KAFKA_CLUSTERS_1_BOOTSTRAPSERVERS=standby-broker-0:9092" in ui["envs"]
    assert containers["kafka-exporter-standby"]["command"] == ["--kafka.server=standby-broker-0:9092"]


# ---------------------------------------------------------------- kubernetes

@pytest.fixture(scope="module")
def k8s():
    return build("kubernetes", lambda: KubernetesPlatform(STACK, images=topology("kubernetes").images),
                 kafka_exporter=True)


def _by_kind(built, kind):
    return {m["metadata"]["name"]: ints(m) for m in built["manifests"] if m["kind"] == kind}


def test_k8s_agent_is_the_images_nothing_is_downloaded(k8s):
    _, built = k8s
    for name, sts in _by_kind(built, "StatefulSet").items():
        spec = sts["spec"]["template"]["spec"]
        assert "initContainers" not in spec  # no fetch from Maven Central when a pod starts
        assert [v["name"] for v in spec["volumes"]] == ["files"] and "emptyDir" not in json.dumps(spec["volumes"])
        (container,) = spec["containers"]
        assert container["image"] == K8S_KAFKA_IMAGE
        port = built["platform"].metrics_address(name)[1]
        service = script_commands(container["command"][2])["service"]
        assert f"-javaagent:{image_jmx_agent()}=0.0.0.0:{port}:/opt/mirrorstack/{name}/jmx-exporter.yaml" in service
        assert "metrics" in {p["name"] for p in container["ports"]}
        assert "wget" not in container["command"][2] and "maven" not in json.dumps(sts).lower()


def test_k8s_prometheus_grafana_deployments_and_password_secret(k8s):
    mocks, built = k8s
    deployments = _by_kind(built, "Deployment")
    assert set(deployments) == {"prometheus", "grafana", "kafka-exporter-primary", "kafka-exporter-standby",
                                "supervisor-standby"}
    config = _by_kind(built, "ConfigMap")["prometheus-files"]["data"]
    targets = scrape_targets(config["prometheus.yml"])
    assert "primary-broker-0.mirrorstack-active-passive.svc.cluster.local:" in " ".join(targets)
    grafana = deployments["grafana"]["spec"]["template"]["spec"]["containers"][0]
    # The admin password as a file from a Secret (Grafana's __FILE variables), as on docker: in no env value
    assert {"name": "GF_SECURITY_ADMIN_PASSWORD__FILE", "value": "/etc/mirrorstack/grafana-admin-password"} in grafana["env"]
    assert "GF_SECURITY_ADMIN_PASSWORD" not in {e["name"] for e in grafana["env"]}
    assert not any("s3cret-pw" in json.dumps(e) for e in grafana["env"])
    (registered,) = [r for r in mocks.resources if r.typ == "kubernetes:core/v1:Secret" and r.name == "grafana-secrets"]
    assert SECRET_SIG in json.dumps(registered.inputs["stringData"])
    assert _by_kind(built, "Secret")["grafana-secrets"]["stringData"] == {"admin-password": "s3cret-pw"}
    pod = deployments["grafana"]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "secrets"]
    assert volume["secret"] == {"secretName": "grafana-secrets", "defaultMode": 0o400}
    assert pod["securityContext"]["fsGroup"] == 472  # the kubelet makes the 0400 file group-readable for it
    assert {"name": "secrets", "mountPath": "/etc/mirrorstack/grafana-admin-password", "subPath": "admin-password",
            "readOnly": True} in grafana["volumeMounts"]
    mounts = {m["mountPath"] for m in grafana["volumeMounts"]}
    assert "/etc/grafana/provisioning/datasources/prometheus.yaml" in mounts
    assert "/var/lib/grafana/dashboards/mirrorstack-flow.json" in mounts


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, kubernetes_validate.latest_version()])
def test_k8s_monitoring_manifests_validate_strictly(k8s, version):
    _, built = k8s
    for manifest in built["manifests"]:
        kubernetes_validate.validate(ints(manifest), desired_version=version, strict=True)


def test_generated_password_is_made_once_and_stays():
    provider = GeneratedPasswordProvider()
    made = provider.create({"length": "24", "result": None})
    assert len(made.outs["result"]) >= 24 and made.outs["result"] != provider.create({"length": "24"}).outs["result"]
    assert provider.diff(made.id, made.outs, {"length": "24", "result": None}).changes is False


def test_without_a_configured_password_one_is_generated_as_a_secret():
    import pulumi
    from mirrorstack.args import ReplicationTopologyArgs
    from mirrorstack.topology import ReplicationTopology
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack=STACK, preview=False)

    @pulumi.runtime.test
    def program():
        t = ReplicationTopology(STACK, ReplicationTopologyArgs(
            topology=topology("docker"), platform=DockerPlatform(STACK), stack=STACK))
        return t.monitoring.prometheus_url
    program()
    (generated,) = [r for r in mocks.resources if r.name == "grafana-admin-password"]
    assert generated.typ == "pulumi-python:dynamic/secrets:GeneratedPassword" and generated.inputs["length"] == "24"
