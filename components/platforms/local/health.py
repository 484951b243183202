"""Health checks that ask the real service, not just whether a port is open:
a health spec's probe by its `kind`, the check a concept registered for the
kind (descriptions.check_of_kind: Connect's), or the one the spec names
(descriptions.CHECK), resolved by name here."""
from __future__ import annotations

import socket

import requests

from mirrorstack.platforms.descriptions import CHECK, NotReady, check_of_kind, first_few, resolve


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str, timeout: float = 2.0) -> bool:
    return requests.get(url, timeout=timeout).status_code == 200


def kafka_brokers_ready(bootstrap_servers: str, expected_brokers: int, timeout: float = 3.0,
                        client: dict[str, str] | None = None, node_id: int | None = None) -> bool:
    """True when the cluster answers a metadata request listing all its brokers.
    With `node_id` (a rolling restart waits for it): that broker is registered,
    no partition waits for a replica on a live broker to rejoin its ISR, and none
    whose ISR has a live replica is without a leader.
    `client`: librdkafka settings (TLS file paths of a secured listener)."""
    from confluent_kafka.admin import AdminClient  # heavy import, only when used

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0,
                         "socket.connection.setup.timeout.ms": int(timeout * 1000), **(client or {})})
    metadata = admin.list_topics(timeout=timeout)
    if node_id is None:
        return len(metadata.brokers) >= expected_brokers
    if node_id not in metadata.brokers:
        raise NotReady(f"answers; not yet registered in the cluster (node id {node_id})")
    lagging = under_replicated(metadata)
    if lagging:
        raise NotReady(f"back in the cluster; waiting for {len(lagging)} under-replicated partitions "
                       f"({first_few(lagging)})")
    offline = leaderless(metadata)
    if offline:
        raise NotReady(f"back in the cluster; waiting for {len(offline)} partitions to get a leader "
                       f"({first_few(offline)})")
    return True


def under_replicated(metadata) -> list[str]:
    """`topic-partition` of each partition with a replica on a registered broker
    that is not in its ISR (yet). Replicas on brokers that are down do not
    count: healing several dead brokers one at a time must not wait for the
    ones not restarted yet."""
    live = set(metadata.brokers)
    return sorted(f"{topic.topic}-{p.id}" for topic in metadata.topics.values()
                  for p in topic.partitions.values() if (set(p.replicas) & live) - set(p.isrs))


def leaderless(metadata) -> list[str]:
    """`topic-partition` of each partition with no leader although a replica in its
    ISR is on a registered broker: offline until Kafka elects that replica. (A
    broker's restart takes the leadership of partitions no other replica can
    lead; a roll must not go on, nor `up` end, before they have it back.)"""
    live = set(metadata.brokers)
    return sorted(f"{topic.topic}-{p.id}" for topic in metadata.topics.values()
                  for p in topic.partitions.values() if p.leader not in live and set(p.isrs) & live)


QUORUM_COMMAND_MAIN = "org.apache.kafka.tools.MetadataQuorumCommand"  # kafka-metadata-quorum.sh


def controller_in_quorum(spec: dict, since_ms: int) -> bool:
    """A controller of a quorum answers and has caught up with the leader's
    metadata log since `since_ms` (its own start): asked with Kafka's own
    kafka-metadata-quorum tool (one short JVM, about a second) through all the
    voters, so the active controller answers. While too few voters listen
    for a majority (a new cluster's first controllers, or a quorum coming
    back from losing most of them) there is no quorum to rejoin until the next
    ones start: listening is enough then."""
    import subprocess

    from mirrorstack import toolchain
    from mirrorstack.platforms import jvm
    own = (spec["host"], int(spec["port"]))
    if not port_open(*own):
        return False
    voters = [(h, int(p)) for h, _, p in (a.rpartition(":") for a in spec["quorum"].split(","))]
    listening = 1 + sum(port_open(*voter) for voter in voters if voter != own)
    if listening <= len(voters) // 2:
        return True
    args = ["--bootstrap-controller", spec["quorum"], "describe", "--replication"]
    if spec.get("command_config"):  # TLS controllers: the node's own certificate
        args[2:2] = ["--command-config", spec["command_config"]]
    argv = jvm.java_command(toolchain.java_binary(), QUORUM_COMMAND_MAIN, args, classpath=toolchain.kafka_classpath(),
                            heap="128m", short_lived=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        errors = [line.strip() for line in done.stderr.splitlines() if "Exception" in line] or [done.stderr.strip()]
        raise NotReady(f"answers; the quorum does not describe itself yet ({errors[-1][-300:]})")
    row = quorum_row(done.stdout, int(spec["node_id"]))
    if row is None or row["Status"] not in ("Leader", "Follower"):
        raise NotReady(f"answers; not yet a voter of the quorum (node id {spec['node_id']})")
    if row["Status"] == "Follower" and int(row["LastCaughtUpTimestamp"]) < since_ms:
        raise NotReady(f"in the quorum; catching up with the metadata log (lag {row['Lag']})")
    return True


def quorum_row(table: str, node_id: int) -> dict[str, str] | None:
    """One node's row of `kafka-metadata-quorum describe --replication`."""
    lines = [line.split() for line in table.strip().splitlines() if line.strip()]
    if not lines:
        return None
    header = lines[0]
    for cells in lines[1:]:
        if cells and cells[0] == str(node_id):
            return dict(zip(header, cells))
    return None


def own_address(spec: dict) -> tuple[str, int] | None:
    """The address a service's own health check probes (its `host` and
    `port`, or its `url`); None for a Kafka check, which asks the whole
    cluster's bootstrap servers."""
    if "host" in spec:
        return spec["host"], int(spec["port"])
    if "url" in spec:
        from urllib.parse import urlsplit
        url = urlsplit(spec["url"])
        return url.hostname, url.port or (443 if url.scheme == "https" else 80)
    return None


def check(spec: dict, since_ms: int = 0) -> bool:
    """Run a health check described as data (what a service resource stores);
    `since_ms`: when the service started (wall clock, ms). False or NotReady
    (with what it waits for): not yet. A spec naming its concept's own
    check (descriptions.CHECK) is asked with that."""
    if CHECK in spec:
        return resolve(spec[CHECK])(spec, since_ms)
    kind = spec["kind"]
    if (registered := check_of_kind(kind)) is not None:
        return registered(spec, since_ms)
    if kind == "tcp":
        return port_open(spec["host"], int(spec["port"]))
    if kind == "http":
        return http_ok(spec["url"])
    if kind == "kafka":
        client = {k.removeprefix("client."): v for k, v in spec.items() if k.startswith("client.")}
        node_id = int(spec["node_id"]) if "node_id" in spec else None
        return kafka_brokers_ready(spec["bootstrap"], int(spec.get("brokers", "1")), client=client, node_id=node_id)
    if kind == "controller":
        return controller_in_quorum(spec, since_ms)
    raise ValueError(f"unknown health check kind {kind!r}")
