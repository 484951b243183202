"""The topology's `kubernetes:` section as the model reads it: defaults,
a full section, the NetworkPolicy peers it declares. Refusals (field path and
fix) are whole stack files in test_malformed_stacks.py."""
from __future__ import annotations

import pytest

from mirrorstack.model.kubernetes import KubernetesSettings, NetworkPeer
from mirrorstack.model.spec import load_topology

BASE = {"platform": "kubernetes", "clusters": {"us": {}, "central": {}}, "flows": [{"source": "us", "target": "central"}]}


def test_omitted_section_is_none_and_the_platform_takes_the_defaults():
    assert load_topology(BASE).kubernetes is None
    defaults = KubernetesSettings()
    assert (defaults.storage.class_name, defaults.storage.size, defaults.storage.on_destroy) == (None, "1Gi", "delete")
    assert defaults.termination_grace_seconds == 60
    assert defaults.network_policy.enabled and defaults.network_policy.clients == []


def test_a_full_section_loads():
    section = {"storage": {"class_name": "gp3", "size": "200Gi", "on_destroy": "retain"},
               "termination_grace_seconds": 300,
               "network_policy": {"clients": [{"namespace": "analytics"}, {"cidr": "fd00::/8"}]}}
    settings = load_topology({**BASE, "kubernetes": section}).kubernetes
    assert settings.model_dump(exclude_defaults=True) == {
        "storage": section["storage"], "termination_grace_seconds": 300,
        "network_policy": {"clients": [{"namespace": "analytics"}, {"cidr": "fd00::/8"}]}}


@pytest.mark.parametrize("peer, rendered", [
    ({"namespace": "analytics"}, {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "analytics"}}}),
    ({"namespace_labels": {"example.com/team": "payments"}},
     {"namespaceSelector": {"matchLabels": {"example.com/team": "payments"}}}),
    ({"cidr": "10.20.0.0/16"}, {"ipBlock": {"cidr": "10.20.0.0/16"}}),
    ({"cidr": "10.20.0.0/16", "except_cidrs": ["10.20.5.0/24"]},
     {"ipBlock": {"cidr": "10.20.0.0/16", "except": ["10.20.5.0/24"]}}),
    ({"cidr": "192.0.2.7/32"}, {"ipBlock": {"cidr": "192.0.2.7/32"}}),
])
def test_each_client_becomes_one_network_policy_peer(peer, rendered):
    assert NetworkPeer.model_validate(peer).policy_peer() == rendered


def test_an_ipv6_part_of_an_ipv4_block_is_refused():
    with pytest.raises(ValueError, match="not inside 10.0.0.0/8"):
        NetworkPeer.model_validate({"cidr": "10.0.0.0/8", "except_cidrs": ["fd00::/8"]})
