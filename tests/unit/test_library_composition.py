"""mirrorstack as a library, under Pulumi mocks: named dynamic types, names
prefixed with the topology's, two topologies in one program, a provider passed
in the component's opts reaching every resource, aliases to the names and types
stacks were deployed with."""
from __future__ import annotations

import pulumi
import pulumi_docker as docker
import pulumi_kubernetes as k8s
import pytest

from mirrorstack import naming
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.topology import ReplicationTopology
from tests.support.mocked_runs import STACK
from tests.support.pulumi_mocks import RecordingMocks, aggregation_topology

NAMED_DYNAMIC_TYPES = {
    "pulumi-python:dynamic/local:LocalService", "pulumi-python:dynamic/local:LocalSparkJob", "pulumi-python:dynamic/mirror:MirrorMaker2Connectors",
}


def build(make_platform, names=(STACK,), provider=None):
    """The aggregation topology once per name, in one program; `provider`
    (a factory) is passed in each topology's opts."""
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack=STACK, preview=False)
    built = {}

    @pulumi.runtime.test
    def program():
        opts = None
        if provider is not None:
            built["provider"] = provider()
            opts = pulumi.ResourceOptions(providers=[built["provider"]])
        platform = make_platform()
        tops = [ReplicationTopology(n, ReplicationTopologyArgs(topology=aggregation_topology(), platform=platform,
                                                              stack=STACK), opts=opts) for n in names]
        return pulumi.Output.all(*[t.cluster_outputs for t in tops], *[t.connect_outputs for t in tops])
    program()
    return mocks, built


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local")
    return build(lambda: LocalPlatform(STACK, str(folder)))


def test_every_dynamic_resource_has_a_named_type(local_run):
    mocks, _ = local_run
    dynamic = {r.typ for r in mocks.resources if r.typ.startswith("pulumi-python:dynamic")}
    assert dynamic == NAMED_DYNAMIC_TYPES


def test_every_resource_below_the_topology_carries_its_name(local_run):
    mocks, _ = local_run
    below = [r.registered_name for r in mocks.resources if r.typ != "mirrorstack:topology:ReplicationTopology"]
    assert below and all(n.startswith(f"{STACK}-") for n in below), below
    assert f"{STACK}-us-broker-0" in below and f"{STACK}-us->central-connectors" in below


def test_two_topologies_in_one_program_do_not_clash(tmp_path):
    mocks, _ = build(lambda: LocalPlatform(STACK, str(tmp_path)), names=("east", "west"))
    urns = [(r.typ, r.registered_name) for r in mocks.resources]
    assert len(urns) == len(set(urns)), sorted(u for u in urns if urns.count(u) > 1)
    assert {"east-us-broker-0", "west-us-broker-0"} <= {n for _, n in urns}


@pytest.mark.parametrize("platform", ["docker", "kubernetes"])
def test_a_provider_in_the_topologys_opts_reaches_every_resource(platform):
    if platform == "docker":
        make, provider, package = (lambda: DockerPlatform(STACK)), (lambda: docker.Provider("custom")), "docker:"
    else:
        make, provider, package = (lambda: KubernetesPlatform(STACK, namespace="ns")), \
            (lambda: k8s.Provider("custom")), "kubernetes:"
    mocks, _ = build(make, provider=provider)
    ours = [r for r in mocks.resources if r.typ.startswith(package) and r.custom]
    kinds = {r.typ for r in ours}
    # The shared ones (network, images; the namespace) too: they used to have no parent.
    assert ("docker:index/network:Network" in kinds and "docker:index/remoteImage:RemoteImage" in kinds) \
        if platform == "docker" else "kubernetes:core/v1:Namespace" in kinds
    wrong = [(r.typ, r.registered_name, r.provider) for r in ours
             if not (r.provider or "").endswith(f"$pulumi:providers:{package[:-1]}::custom::custom_id")]
    assert not wrong, wrong


def test_aliases_keep_the_names_and_types_stacks_were_deployed_with():
    parent = pulumi.ResourceOptions(parent=type("Parent", (), {"name_prefix": "agg-"})())
    name, opts = naming.scoped("us-broker-0", parent, dynamic=True)
    assert name == "agg-us-broker-0"
    assert [(a.name, a.type_) for a in opts.aliases] == [
        ("us-broker-0", ...), ("us-broker-0", naming.GENERIC_DYNAMIC_TYPE)]  # ...: the type it has now
    # A shared resource that had no parent: its old URN is a root one.
    name, opts = naming.scoped("network", parent, was_root="docker:index/network:Network")
    [alias] = opts.aliases
    assert (name, alias.name, alias.type_, alias.parent) == ("agg-network", "network", "docker:index/network:Network",
                                                            pulumi.ROOT_STACK_RESOURCE)
    # Outside a topology: the name as given, only the type alias.
    name, opts = naming.scoped("pw", None, dynamic=True)
    assert name == "pw" and [(a.name, a.type_) for a in opts.aliases] == [("pw", naming.GENERIC_DYNAMIC_TYPE)]
