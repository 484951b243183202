"""KafkaAcls: the ACLs (and SCRAM application users) mirrorstack keeps on one
authorizing cluster, applied with the Kafka Admin API as the cluster's own
nodes (a broker certificate, a super user) over the INTERNAL listener.

Inputs are the plan a reviewer reads: a map of each ACL to the parts of the
topology that need it (mirrorstack.kafka.acls.keyed), so `pulumi preview --diff`
shows every ACL added (`+`) or removed (`-`) on its own line. State written
before (a list of plan lines) is read too; the first `up` rewrites it as a map
and changes nothing on the cluster. Only ACLs this resource created are ever
deleted: the ones MM2 copies with sync_topic_acls, or an operator's, stay.
"""
from __future__ import annotations

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming
from mirrorstack.kafka.acls import lines_of
from mirrorstack.kafka.scram_users import changed_users, retire_users, scram_mechanism, set_users, wait_all

TIMEOUT = 30.0
REFRESH_TIMEOUT = 10.0  # a refresh during an outage says so within seconds (the MM2 provider's is 3 s a request)
SECRET_INPUTS = ["admin_keystore", "users"]


def _say(cluster: str, line: str) -> None:
    import sys
    print(f"mirrorstack: {cluster} ACLs: {line}", file=sys.stderr, flush=True)


def _reason(exc) -> str:
    """librdkafka's error in one line (KafkaException wraps a KafkaError)."""
    error = exc.args[0] if exc.args else exc
    return getattr(error, "str", lambda: str(error))() or type(exc).__name__


def admin_client(props):
    """An AdminClient acting as the node whose keystore the resource holds (a super user)."""
    from confluent_kafka.admin import AdminClient

    from mirrorstack.certificates.tls import keystore_parts
    from mirrorstack.platforms import tunnels
    for tunnel in props.get("tunnels") or []:  # kubernetes, remote docker: every broker's ADMIN tunnel, first
        tunnels.local(tunnel)
    key, cert = keystore_parts(props["admin_keystore"])
    return AdminClient({"bootstrap.servers": props["bootstrap"], "security.protocol": "SSL",
                        "ssl.ca.pem": props["truststore"], "ssl.certificate.pem": cert, "ssl.key.pem": key,
                        "log_level": 0})


def acl_binding(acl):
    """The Admin API's AclBinding of a mirrorstack.kafka.acls.Acl (ALLOW, any host)."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    resource = "BROKER" if acl.resource == "CLUSTER" else acl.resource  # librdkafka's name for it
    return AclBinding(ResourceType[resource], acl.name, ResourcePatternType[acl.pattern], acl.principal, "*",
                      AclOperation[acl.operation], AclPermissionType.ALLOW)


def acl_filter(acl):
    """The filter that matches exactly `acl` (what delete_acls takes)."""
    from confluent_kafka.admin import AclBindingFilter
    b = acl_binding(acl)
    return AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                            b.permission_type)


def _acls(acls) -> set:
    """The ACLs of the `acls` property: a map (mirrorstack.kafka.acls.keyed), or a list in older state."""
    from mirrorstack.kafka.acls import Acl
    return {Acl.parse(line)[0] for line in lines_of(acls)}


def _present(admin, acls: set, timeout: float = TIMEOUT) -> set:
    """Which of `acls` the cluster has now."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    found = set()
    for principal in {a.principal for a in acls}:
        bindings = admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
            AclPermissionType.ALLOW), request_timeout=timeout).result(timeout=timeout)
        for b in bindings:
            resource = "CLUSTER" if b.restype.name == "BROKER" else b.restype.name
            found |= {a for a in acls if (a.principal, a.resource, a.name, a.pattern, a.operation) ==
                      (b.principal, resource, b.name, b.resource_pattern_type.name, b.operation.name)}
    return found


def _apply(props, old_lines, new_lines, old_users, new_users) -> None:
    import time
    cluster, admin = props["cluster"], admin_client(props)
    mechanism = scram_mechanism(props.get("mechanism"))  # None: PLAIN's users live in the brokers' JAAS
    users, gone = changed_users(old_users, new_users)
    if users and mechanism is not None:  # before the ACLs: a user can use them the moment they exist
        set_users(admin, mechanism, users, cluster)
        _say(cluster, f"SCRAM users set: {', '.join(sorted(users))}")
    olds, news = _acls(old_lines), _acls(new_lines)
    removed, added = sorted(olds - news), sorted(news - olds)
    if removed:
        wait_all(admin.delete_acls([acl_filter(a) for a in removed], request_timeout=TIMEOUT),
                 f"{cluster}: deleting ACLs")
    if added:
        wait_all(admin.create_acls([acl_binding(a) for a in added], request_timeout=TIMEOUT),
                 f"{cluster}: creating ACLs")
        # Created means committed by the controller; wait until a broker serves them, so
        # connectors that start next are not refused.
        deadline = time.monotonic() + TIMEOUT
        while len(_present(admin, set(added))) < len(added):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cluster}: created ACLs not visible after {TIMEOUT:.0f}s")
            time.sleep(0.3)
    retired = ""
    if gone and mechanism is not None:  # never deleted: mirrorstack.kafka.scram_users says why
        retire_users(admin, mechanism, gone, cluster)
        retired = " (each SCRAM password replaced by a random one nobody keeps)"
    _say(cluster, f"{len(added)} added, {len(removed)} removed, {len(news)} kept by this stack"
         + (f"; users removed: {', '.join(gone)}{retired}" if gone else ""))


class KafkaAclsProvider(ResourceProvider):
    def create(self, props):
        import uuid
        _apply(props, [], props["acls"], {}, props.get("users"))
        return CreateResult(id_=uuid.uuid4().hex, outs=props)

    def diff(self, _id, olds, news):
        # olds["acls"] a list: state of an older version, rewritten as a map (its update adds and removes nothing)
        changed = (_acls(olds.get("acls")) != _acls(news.get("acls")) or olds.get("acls") != news.get("acls")
                   or any(olds.get(k) != news.get(k) for k in ("users", "mechanism", "bootstrap", "admin_keystore",
                                                                 "truststore")))  # a renewed key: kept for delete
        return DiffResult(changes=changed, replaces=["cluster"] if olds.get("cluster") != news.get("cluster") else [],
                          delete_before_replace=True)

    def update(self, _id, olds, news):
        _apply(news, olds.get("acls"), news["acls"], olds.get("users"), news.get("users"))
        return UpdateResult(outs=news)

    def delete(self, _id, props):
        _apply(props, props.get("acls"), [], props.get("users"), {})

    def read(self, id_, props):
        """Refresh: an ACL someone deleted drops out of state, so the next `up` puts it back."""
        from concurrent.futures import TimeoutError as FutureTimeout

        from confluent_kafka import KafkaException

        from mirrorstack.kafka.acls import Acl
        acls = props.get("acls") or {}
        try:
            present = _present(admin_client(props), _acls(acls), REFRESH_TIMEOUT)
        except (KafkaException, FutureTimeout) as exc:  # no broker answered: an outage, not a change
            _say(props["cluster"], f"no broker of {props['bootstrap']} answered within {REFRESH_TIMEOUT:.0f}s "
                                   f"({_reason(exc)}); the ACLs and users stay as last applied; fix: start the "
                                   "brokers (`pulumi up` restarts a stopped one), then `pulumi refresh`")
            return ReadResult(id_=id_, outs=props)
        missing = [line for line in lines_of(acls) if Acl.parse(line)[0] not in present]
        if missing:
            _say(props["cluster"], f"{len(missing)} ACLs missing: " + "; ".join(missing))
        # in the shape found: a refresh of older state (a list) shows only what is missing
        kept = ({text: parts for text, parts in acls.items() if Acl.parse(f"{text} for {parts}")[0] in present}
                if isinstance(acls, dict) else [line for line in acls if line not in missing])
        return ReadResult(id_=id_, outs={**props, "acls": kept})


class KafkaAcls(Resource, module="kafka", name="KafkaAcls"):
    """ACLs ({ACL: the parts that need it}, mirrorstack.kafka.acls.keyed) and
    SCRAM users ({name: password}, a secret) of the cluster `cluster`, applied
    through `bootstrap` (its brokers' INTERNAL or ADMIN listeners) with a node's
    `admin_keystore` (PEM, a secret). `lines`: the ACLs kept, as plan lines."""

    acls: pulumi.Output[dict]

    def __init__(self, name: str, *, cluster: str, bootstrap: str, admin_keystore, truststore, acls,
                 users=None, mechanism: str | None = None, tunnels: list[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        super().__init__(KafkaAclsProvider(), resource_name, {
            "cluster": cluster, "bootstrap": bootstrap, "admin_keystore": admin_keystore, "truststore": truststore,
            "acls": acls, "users": users or {}, "mechanism": mechanism,
            **({"tunnels": tunnels} if tunnels else {}),  # kubernetes (port-forward): opened before any call
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=SECRET_INPUTS)))
        self.lines: pulumi.Output[list[str]] = self.acls.apply(lines_of)
