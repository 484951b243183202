"""The topology's `kubernetes:` section: what the kubernetes platform needs to
know that the other platforms do not (storage, shutdown, who may connect).

Pure pydantic like the rest of the model; the platform
(components/platforms/kubernetes.py) turns it into manifests.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from mirrorstack.model.strict import StrictModel

# A storage request: a whole number with a Kubernetes quantity suffix (binary or decimal).
STORAGE_QUANTITY = r"^[1-9][0-9]*(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
# Object names: a StorageClass is a DNS-1123 subdomain, a namespace a DNS-1123 label.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# A label's name (after an optional `<DNS subdomain>/` prefix) and its value.
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


class KubernetesStorage(StrictModel):
    """The volume of each broker and controller (one PersistentVolumeClaim per
    pod, `data-<service>-0`). Connect workers keep their state in Kafka topics:
    no volume."""

    class_name: str | None = Field(None, pattern=DNS_SUBDOMAIN, max_length=253, examples=["gp3"], description=(
        "The StorageClass of the claims (EKS `gp3`, GKE `premium-rwo`, AKS `managed-csi-premium`, ...); default "
        "the cluster's default StorageClass. Its reclaimPolicy says what happens to a volume once its claim is "
        "deleted. Changing it on a deployed stack replaces the StatefulSets, and the old claims are kept and used "
        "again: the new class applies to new claims only."))
    size: str = Field("1Gi", pattern=STORAGE_QUANTITY, examples=["100Gi"], description=(
        "The size each broker's and controller's claim requests, a Kubernetes quantity (`100Gi`, `500G`); "
        "default 1Gi, for trials. Raising it on a deployed stack does not grow existing claims (a "
        "StatefulSet's claim template applies when a claim is created): expand them with `kubectl patch pvc` "
        "where the StorageClass allows volume expansion."))
    on_destroy: Literal["delete", "retain"] = Field("delete", description=(
        "What `pulumi destroy` does with the brokers' and controllers' data. `delete` (default): the stack's "
        "namespace is deleted and every claim in it with it; the volumes go as their StorageClass's "
        "reclaimPolicy says (Delete for most dynamic classes). `retain`: the namespace is left in the cluster "
        "(Pulumi's retainOnDelete) holding only the claims `data-<service>-0` and their volumes; every other "
        "object of the stack is deleted. A stack deployed again with the same stack name, namespace and "
        "aliases finds the claims and starts on the old data (the KRaft cluster ids derive from stack and "
        "alias). Either way a StatefulSet replaced by an update keeps its claim (whenDeleted: Retain), so "
        "only `destroy` ever deletes data. Takes effect from the next `pulumi up`."))


class NetworkPeer(StrictModel):
    """One kind of client the NetworkPolicy admits: exactly one of `namespace`,
    `namespace_labels` or `cidr`."""

    namespace: str | None = Field(None, pattern=DNS_LABEL, examples=["analytics"], description=(
        "Every pod of this namespace (a namespaceSelector on kubernetes.io/metadata.name)."))
    namespace_labels: dict[str, str] | None = Field(None, min_length=1, examples=[{"team": "payments"}],
                                                    description=(
        "Every pod of the namespaces carrying all these labels (a namespaceSelector's matchLabels)."))
    cidr: str | None = Field(None, examples=["10.20.0.0/16"], description=(
        "Addresses outside the cluster's pod network (an ipBlock), e.g. clients of the external listener or "
        "a VPC's subnet; IPv4 or IPv6 CIDR notation."))
    except_cidrs: list[str] = Field([], examples=[["10.20.5.0/24"]], description=(
        "With `cidr`: parts of it not admitted (the ipBlock's `except`); each inside `cidr`."))

    @field_validator("cidr")
    @classmethod
    def _a_network(cls, value: str | None) -> str | None:
        return value if value is None else _network(value)

    @field_validator("except_cidrs")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        return [_network(v) for v in values]

    @field_validator("namespace_labels")
    @classmethod
    def _labels(cls, labels: dict[str, str] | None) -> dict[str, str] | None:
        for key, value in (labels or {}).items():
            prefix, _, name = key.rpartition("/")
            if not LABEL_NAME.fullmatch(name) or (prefix and not re.fullmatch(DNS_SUBDOMAIN[1:-1], prefix)):
                raise ValueError(f"{key!r} is not a label key; fix: write a name of letters, digits, '-', '_' "
                                 "and '.' (at most 63), optionally after a DNS prefix and '/', e.g. 'team'")
            if not LABEL_VALUE.fullmatch(value):
                raise ValueError(f"{value!r} (label {key}) is not a label value; fix: write at most 63 letters, "
                                 "digits, '-', '_' or '.', starting and ending with a letter or digit")
        return labels

    @model_validator(mode="after")
    def _one_kind(self) -> "NetworkPeer":
        given = [k for k in ("namespace", "namespace_labels", "cidr") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"{' and '.join(given) or 'nothing'} given; fix: give exactly one of namespace, "
                             "namespace_labels and cidr per entry (one entry per kind of client)")
        if self.except_cidrs and self.cidr is None:
            raise ValueError("except_cidrs needs cidr; fix: remove except_cidrs, or use a cidr entry")
        outside = [e for e in self.except_cidrs if not _inside(e, self.cidr)]
        if outside:
            raise ValueError(f"except_cidrs {', '.join(outside)} not inside {self.cidr}; fix: list only parts "
                             f"of {self.cidr}")
        return self

    def policy_peer(self) -> dict:
        """This client as a NetworkPolicy `from` entry."""
        if self.cidr is not None:
            return {"ipBlock": {"cidr": self.cidr, **({"except": self.except_cidrs} if self.except_cidrs else {})}}
        labels = self.namespace_labels or {"kubernetes.io/metadata.name": self.namespace}
        return {"namespaceSelector": {"matchLabels": labels}}


def _network(value: str) -> str:
    """`value` if it is a network in CIDR notation, else a problem with the fix."""
    try:
        given = ipaddress.ip_interface(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a network in CIDR notation; fix: write e.g. '10.20.0.0/16'") from None
    if given.ip != given.network.network_address:
        raise ValueError(f"{value!r} has bits set beyond its prefix; fix: write {str(given.network)!r}")
    return value


def _inside(part: str, whole: str | None) -> bool:
    inner, outer = ipaddress.ip_network(part), ipaddress.ip_network(whole or part)
    return inner.version == outer.version and inner.subnet_of(outer)


class KubernetesNetworkPolicy(StrictModel):
    """One NetworkPolicy per stack on every pod of its namespace: ingress only
    from pods of that namespace and the declared `clients`; egress is not
    restricted. It needs a CNI that enforces NetworkPolicy (Calico, Cilium,
    the managed clusters' policy add-ons); elsewhere it is stored and ignored."""

    enabled: bool = Field(True, description=(
        "Create the NetworkPolicy (default). false: none; who may connect is then the cluster's business."))
    clients: list[NetworkPeer] = Field([], description=(
        "Who else may connect (Kafka listeners, Connect's REST API, the metrics ports): namespaces and CIDRs. "
        "Pods of the stack's namespace always may. `kubectl port-forward` (how the program reaches Connect) "
        "does not pass through the pod network and needs no entry."))

    @model_validator(mode="after")
    def _clients_need_the_policy(self) -> "KubernetesNetworkPolicy":
        if not self.enabled and self.clients:
            raise ValueError("clients are admitted by the NetworkPolicy, which enabled: false turns off; fix: "
                             "remove clients, or remove enabled: false")
        return self


class KubernetesSettings(StrictModel):
    """platform kubernetes only: storage, shutdown and network access of the
    stack's pods. Every field has a default; omit the section for all of them."""

    storage: KubernetesStorage = Field(KubernetesStorage(), description=(
        "The brokers' and controllers' volumes: StorageClass, size, and what `pulumi destroy` does with them."))
    termination_grace_seconds: int = Field(60, ge=10, le=3600, description=(
        "How long a Kafka or Connect pod may take to stop before it is killed (terminationGracePeriodSeconds). "
        "A broker uses it for its controlled shutdown: leadership moves to other brokers and the logs are "
        "closed cleanly, so the next start skips log recovery. A Connect worker stops its connectors and then its "
        "tasks, each within task.shutdown.graceful.timeout.ms (10 s), and the tasks commit their offsets as they "
        "stop: below 30 s a roll can cut that commit short (records copied again). Default 60; raise it for "
        "brokers holding many partitions. A pod that stops sooner is not held."))
    network_policy: KubernetesNetworkPolicy = Field(KubernetesNetworkPolicy(), description=(
        "Who may connect to the stack's pods (ingress); default: pods of its namespace only."))
