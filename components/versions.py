"""Pinned versions, read from the one place that pins each.

Kafka and the JMX exporter: ``components/versions.env`` (also included by the
Makefile). Pulumi and Spark: the ``pulumi`` and ``pyspark`` pins in
requirements.txt, seen here as the installed distributions.
"""
from __future__ import annotations

from functools import cache
from importlib import metadata
from pathlib import Path

VERSIONS_FILE = Path(__file__).with_name("versions.env")


@cache
def _pins() -> dict[str, str]:
    pins = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pins[key.strip()] = value.strip()
    return pins


def kafka_version() -> str:
    return _pins()["KAFKA_VERSION"]


def jmx_exporter_version() -> str:
    return _pins()["JMX_EXPORTER_VERSION"]


def toxiproxy_version() -> str:
    return _pins()["TOXIPROXY_VERSION"]


def official_image(key: str) -> str:
    """The pinned official image of `key` (a field of the topology's `images:`):
    Kafka's and Spark's are tagged with their pinned versions, the monitoring
    ones are pinned in versions.env."""
    if key == "kafka":
        return f"apache/kafka:{kafka_version()}"
    if key == "spark":
        return f"apache/spark:{spark_version()}-python3"
    return _pins()[f"{key.upper()}_IMAGE"]


def spark_version() -> str:
    """The installed pyspark; the spark-sql-kafka jars must match it."""
    return metadata.version("pyspark")


def pulumi_version() -> str:
    return metadata.version("pulumi")


def debian_suite() -> str:
    """The Debian suite `make images` builds the mirrorstack/* images from."""
    return _pins()["DEBIAN_SUITE"]


def debian_prometheus_version() -> str:
    """The version of the suite's prometheus package: the mirrorstack/prometheus tag."""
    return _pins()["DEBIAN_PROMETHEUS_VERSION"]


# The Debian packages whose version `make images` checks: package → its pin in versions.env.
DEBIAN_PACKAGE_PINS = {"prometheus": "DEBIAN_PROMETHEUS_VERSION",
                       "python3-prometheus-client": "DEBIAN_PROMETHEUS_CLIENT_VERSION"}


def debian_package_version(package: str) -> str:
    """The pinned upstream version of a Debian package of the images (DEBIAN_PACKAGE_PINS)."""
    return _pins()[DEBIAN_PACKAGE_PINS[package]]


# The images `make images` builds; no Grafana, Kafka UI or exporter image: Debian packages none of them.
MIRRORSTACK_IMAGES = ("kafka", "spark", "prometheus")


def mirrorstack_image(key: str) -> str:
    """The name of an image `make images` builds (tools/images.py), tagged with
    the version of what it runs: kafka, spark or prometheus."""
    tags = {"kafka": kafka_version, "spark": spark_version,
            "prometheus": debian_prometheus_version}
    if key not in tags:
        raise ValueError(f"no mirrorstack image {key!r}: `make images` builds {', '.join(MIRRORSTACK_IMAGES)} "
                         "(Debian packages no Grafana, Kafka UI or Kafka exporter: point `images.<key>` at a "
                         "registry's image)")
    return f"mirrorstack/{key}:{tags[key]()}"


def kube_versions() -> dict[str, str]:
    """The private test cluster's pieces (`make kube`): Kubernetes, etcd, CoreDNS."""
    pins = _pins()
    return {"kubernetes": pins["KUBERNETES_VERSION"], "etcd": pins["ETCD_VERSION"], "coredns": pins["COREDNS_VERSION"],
            "local-path-provisioner": pins["LOCAL_PATH_PROVISIONER_VERSION"]}


def kubernetes_provider_module() -> str:
    """The provider module's version that pulumi-kubernetes' release was tagged from (`make plugins` builds it)."""
    return _pins()["KUBERNETES_PROVIDER_MODULE"]
