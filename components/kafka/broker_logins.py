"""BrokerLogins: a secured broker's readiness as its clients see it, on the
platforms whose brokers run in containers (docker, kubernetes). Right after
the broker's container or pod (re)started in `up` (its `started` input
changed), the program sets the stack's SCRAM users again (as a node, through
the ACL resource's ADMIN way in) and logs in as each of the stack's SASL
users on the broker's CLIENT listener, reached from this machine (docker:
published on 127.0.0.1, or a tunnel over the Docker API to a remote engine;
kubernetes: a port-forward it opens, or the in-cluster name). The next broker of the roll depends on this resource, so a
roll stops at a broker that refuses a user and `up` fails naming both.

Why in the program and not in the container's health check: the check needs
the users' passwords (the program holds them as Pulumi secrets; the brokers
hold only the stack's own SCRAM password and PLAIN's JAAS) and a Kafka client
(a JVM every few seconds in every broker container otherwise). It runs once
per start, for seconds (measured 2026-11-28: 11.7 s to set three SCRAM users
again and log in as each, through a tunnel over the Docker API, on the
suite's loaded 2-core machine). The local platform runs the same check in its
broker's start (mirrorstack.kafka.sasl_login holds what both share).

Not covered: a restart `up` did not make (a container's restart policy, a
pod the kubelet restarts): the broker then serves as it is until the next
`up` that restarts it.
"""
from __future__ import annotations

import sys

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming

SECRET_INPUTS = ["users", "keystore", "admin"]
# A change of these is a new start of the broker (or a new way to reach it): check again.
CHECKED_AGAIN = ("started", "address", "tunnel", "broker", "cluster")


def client_config(props: dict) -> dict[str, str]:
    """librdkafka's settings for the stack's users on the broker's CLIENT listener, without a password."""
    config = {"security.protocol": props["protocol"].lower(), "sasl.mechanism": props["mechanism"],
              "broker.address.family": "v4"}  # `localhost` is 127.0.0.1, where the port is published
    if props["protocol"] == "SASL_SSL":
        config["ssl.ca.pem"] = props["truststore"]
        if props.get("keystore"):  # mTLS: the clients' certificate too
            from mirrorstack.certificates.tls import keystore_parts
            key, cert = keystore_parts(props["keystore"])
            config.update({"ssl.key.pem": key, "ssl.certificate.pem": cert})
    return config


def where(props: dict) -> tuple[str, str]:
    """(address to dial from this machine, how it is reached in words): a kube:// or docker://
    tunnel (platforms/tunnels.py) opened first, anew."""
    tunnel = props.get("tunnel")
    if not tunnel:
        return props["address"], props["address"]
    from mirrorstack.platforms import tunnels
    tunnels.forget(tunnel)  # one opened before the broker restarted reaches the pod or container that went away
    port = tunnels.local(tunnel, scheme="tcp").rpartition(":")[2]
    return f"localhost:{port}", f"localhost:{port} (tunnel {tunnel})"


def set_again(props: dict) -> bool:
    """Set the stack's SCRAM users again as a node, as the local platform does at each start (a
    credential deletion left in the metadata log drops them; mirrorstack.kafka.scram_users says why).
    False where there is nothing to set or no node's way in (a cluster without authorization has
    no ADMIN listener; its one SCRAM user is created by broker 0's start)."""
    from mirrorstack.kafka.scram_users import scram_mechanism, set_users
    mechanism, admin = scram_mechanism(props["mechanism"]), props.get("admin")
    if mechanism is None or not admin or not props.get("users"):
        return False
    from mirrorstack.kafka.acl_resource import admin_client
    set_users(admin_client(admin), mechanism, props["users"], props["cluster"])
    return True


def check(props: dict, attempt=None, timeout: float | None = None) -> None:
    """Raise naming the broker and each user it refuses, with the fix."""
    from mirrorstack.kafka import sasl_login
    broker, mechanism, users = props["broker"], props["mechanism"], props.get("users") or {}
    did_set = set_again(props)
    address, said = where(props)
    on_the_way = []
    try:
        found = sasl_login.wait_accepted(address, client_config(props), users,
                                         timeout=sasl_login.WAIT_SECONDS if timeout is None else timeout,
                                         attempt=attempt or sasl_login.authenticates)
    finally:
        if props.get("tunnel"):
            from mirrorstack.platforms import tunnels
            on_the_way = tunnels.failures(props["tunnel"])
            tunnels.forget(props["tunnel"])
    if found:
        raise RuntimeError("\n".join([
            sasl_login.refused_line(broker, mechanism, said, found),
            *([f"The tunnel's last failed connections: {'; '.join(on_the_way)}."] if on_the_way else []),
            "`up` stops here: the brokers after it in the roll are not touched.",
            sasl_login.fix_line(mechanism, props["logs"], did_set)]))
    print(f"mirrorstack: {broker}: {len(users)} {mechanism} user(s) logged in on its client listener "
          f"({', '.join(sorted(users))})", file=sys.stderr, flush=True)


class BrokerLoginsProvider(ResourceProvider):
    def create(self, props):
        check(props)
        return CreateResult(id_=f"{props['cluster']}/{props['broker']}", outs=props)

    def diff(self, _id, olds, news):
        # Users alone changed: no broker restarted (a SCRAM user is set by the ACL resource, a PLAIN
        # user's JAAS change restarts the brokers, so `started` changes): nothing to check yet.
        changed = [k for k in CHECKED_AGAIN if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[])

    def update(self, _id, olds, news):
        check(news)
        return UpdateResult(outs=news)

    def delete(self, _id, props):
        pass  # checks only

    def read(self, id_, props):
        return ReadResult(id_=id_, outs=props)  # a check, not a thing a refresh finds changed


class BrokerLogins(Resource, module="kafka", name="BrokerLogins"):
    """The stack's SASL `users` ({name: password}, a secret) log in on broker
    `broker` of `cluster` at `address` (or through the kube:// `tunnel`),
    whenever `started` changes (the broker was started again). `protocol`,
    `mechanism`, `truststore` (PEM) and `keystore` (the clients' PEM, mTLS
    only, a secret) say how; `admin` (the ACL resource's bootstrap,
    admin_keystore, truststore and tunnels, a secret), where SCRAM users are
    set again first; `logs`, where the broker's log is read."""

    def __init__(self, name: str, *, cluster: str, broker: str, address: str | None, tunnel: str | None,
                 protocol: str, mechanism: str, truststore, keystore, users, admin, started, logs: str,
                 opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(name, opts)
        super().__init__(BrokerLoginsProvider(), resource_name, {
            "cluster": cluster, "broker": broker, "address": address, "tunnel": tunnel, "protocol": protocol,
            "mechanism": mechanism, "truststore": truststore, "keystore": keystore, "users": users,
            "admin": admin, "started": started, "logs": logs,
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=SECRET_INPUTS)))
