"""Cluster secrets (in 0600 client files, referenced from the reviewable
connector configs, secret in state), credentials refused in the plain stack
file, and the pull-request preview workflow running the same commands the
tests run."""
from __future__ import annotations

import json
from pathlib import Path

import pulumi
import pytest
import yaml

from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.topology import ReplicationTopology
from tests.support.pulumi_mocks import SECRET_SIG, RecordingMocks, ints

ROOT = Path(__file__).resolve().parents[2]
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="pw";'


def flows(**flow):
    return load_topology({"clusters": {"us": {}, "central": {}},
                          "flows": [{"source": "us", "target": "central", **flow}]})


@pytest.mark.parametrize("data, expected", [
    ({"clusters": {"us": {"external": {"bootstrap_servers": "b:9092", "security": {
        "protocol": "SASL_SSL", "properties": {"sasl.jaas.config": JAAS}}}}, "central": {}}},
     'clusters.us.external.security.properties["sasl.jaas.config"]: looks like a credential'),
    ({"clusters": {"us": {"settings": {"ssl.keystore.password": "x"}}, "central": {}}},
     'clusters.us.settings["ssl.keystore.password"]: looks like a credential'),
    ({"clusters": {"us": {}, "central": {}}, "connect": {"central": {"kafka": "central", "settings": {
        "consumer.sasl.jaas.config": "x"}}}}, 'connect.central.settings["consumer.sasl.jaas.config"]'),
])
def test_credentials_in_the_plain_stack_file_are_refused_with_the_secret_command(data, expected):
    data = {"flows": [{"source": "us", "target": "central"}], **data}
    with pytest.raises(TopologyError) as info:
        load_topology(data)
    (problem,) = [p for p in info.value.problems if p.startswith(expected)]
    assert "pulumi config set --secret --path 'mirrorstack:clusterSecrets." in problem


def test_override_credentials_point_at_the_side_they_name():
    with pytest.raises(TopologyError) as info:
        flows(overrides={"source": {"target.cluster.sasl.jaas.config": JAAS}})
    assert "'mirrorstack:clusterSecrets.central[\"sasl.jaas.config\"]'" in info.value.problems[0]


def sasl_external(**security):
    security = {"protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": "mm2", **security}
    return load_topology({"clusters": {"us": {"external": {"bootstrap_servers": "b:9092", "security": security}},
                                       "central": {}},
                          "flows": [{"source": "us", "target": "central"}]})


def test_cluster_secrets_reach_connect_as_file_references_and_only_a_secret_digest(tmp_path):
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack="t", preview=False)

    @pulumi.runtime.test
    def program():
        t = ReplicationTopology("t", ReplicationTopologyArgs(
            topology=sasl_external(), platform=LocalPlatform("t", str(tmp_path)), stack="t",
            cluster_secrets=pulumi.Output.secret({"us": {"password": "pw-123"}}),
            cluster_secret_keys={"us": {"password"}}))
        return t.flow_outputs
    program()
    (mm2,) = [r.inputs for r in mocks.resources if r.name == "us->central-connectors"]
    configs = json.dumps(mm2["connectors"])
    assert "pw-123" not in configs and SECRET_SIG not in configs
    folder = f"{tmp_path.resolve()}/clients/us"
    source = mm2["connectors"]["us->central.MirrorSourceConnector"]
    assert source["source.cluster.sasl.jaas.config"] == "${file:%s/client.properties:sasl.jaas.config}" % folder
    assert source["source.cluster.sasl.mechanism"] == "SCRAM-SHA-512"
    assert SECRET_SIG in json.dumps(mm2["secrets_digest"])  # rotation restarts the connectors, value hidden
    (files,) = [r.inputs for r in mocks.resources if r.name == "us-client-files"]
    assert SECRET_SIG in json.dumps(files["files"]) and files["secret"] is True
    written = json.dumps(ints(files["files"]))
    assert 'username=\\"mm2\\" password=\\"pw-123\\"' in written  # the JAAS line, built from the password
    workers = [r.inputs for r in mocks.resources if r.name.startswith("connect-central-")]
    assert workers and all("pw-123" not in json.dumps(w) for w in workers)
    assert "config.providers.file.param.allowed.paths=" + folder in json.dumps(workers[0]["files"])


def test_cluster_secret_keys_are_checked_before_any_resource():
    from mirrorstack.model.rules import secret_problems
    problems = secret_problems(sasl_external(), {"eu": {"x"}, "central": {"password"}})
    assert any(p.startswith("mirrorstack:clusterSecrets.eu: unknown cluster 'eu'; fix:") for p in problems)
    assert any(p.startswith("mirrorstack:clusterSecrets.central: 'central' is deployed") for p in problems)
    assert any(p.startswith("mirrorstack:clusterSecrets.us.password: required for SASL_SSL") for p in problems)
    assert secret_problems(sasl_external(), {"us": {"password"}}) == []


def test_cluster_secret_keys_never_carry_the_values():
    from mirrorstack.secrets import cluster_secret_keys
    assert cluster_secret_keys('{"us": {"password": "pw-123", "ssl.keystore.key": "k"}}') == \
        {"us": {"password", "ssl.keystore.key"}}
    with pytest.raises(ValueError, match="must map cluster aliases") as info:
        cluster_secret_keys('{"us": "pw-123"}')
    assert "pw-123" not in str(info.value)


def test_preview_workflow_runs_the_commands_the_tests_run():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
    steps = workflow["jobs"]["preview"]["steps"]
    script = "\n".join(s.get("run", "") for s in steps)
    assert "make setup" in script and ". ./env.sh" in script
    assert 'pulumi preview --diff --stack "$stack"' in script
    assert "tools/preview_replacements.py" in script
    assert set(workflow[True]["pull_request"]["paths"]) >= {"stacks/**", "components/**"}  # YAML's `on` is True
    # PR code runs with the backend's secrets: only in an environment that needs approval, never on pull_request_target
    assert workflow["jobs"]["preview"]["environment"] == "preview" and "pull_request_target" not in workflow[True]


class StackRefMocks(RecordingMocks):
    """Another stack whose `clusters` output has `dev`."""

    def new_resource(self, args):
        if args.typ == "pulumi:pulumi:StackReference":
            self.resources.append(args)
            return [args.name + "_id", {"name": args.inputs["name"],
                                        "outputs": {"clusters": {"dev": "10.0.0.5:9092"}}}]
        return super().new_resource(args)


def _from_stack_graph(tmp_path, cluster: str):
    mocks = StackRefMocks()
    pulumi.runtime.set_mocks(mocks, project="edge-to-core", stack="edge", preview=False)
    topology = load_topology({"clusters": {"edge": {}, "core": {"brokers": 1, "external": {"from_stack": {
        "stack": "organization/mirrorstack/dev-copy", "cluster": cluster}}}},
        "flows": [{"source": "edge", "target": "core"}]})

    @pulumi.runtime.test
    def program():
        return ReplicationTopology("edge", ReplicationTopologyArgs(
            topology=topology, platform=LocalPlatform("edge", str(tmp_path)), stack="edge")).cluster_outputs
    return mocks, program


def test_an_external_cluster_from_another_stacks_clusters_output(tmp_path):
    mocks, program = _from_stack_graph(tmp_path, "dev")
    program()
    (ref,) = [r for r in mocks.resources if r.typ == "pulumi:pulumi:StackReference"]
    assert ref.inputs["name"] == "organization/mirrorstack/dev-copy"
    (mm2,) = [r.inputs for r in mocks.resources if r.name == "edge->core-connectors"]
    config = mm2["connectors"]["edge->core.MirrorSourceConnector"]
    assert config["target.cluster.bootstrap.servers"] == "10.0.0.5:9092"


def test_a_missing_cluster_in_the_other_stack_is_named(tmp_path):
    _, program = _from_stack_graph(tmp_path, "prod")
    with pytest.raises(Exception, match=r"clusters.core.external.from_stack: stack organization/mirrorstack/dev-copy "
                                        r"has no cluster 'prod'.*it has: dev"):
        program()


@pytest.mark.parametrize("external", [{}, {"bootstrap_servers": "b:9092", "from_stack": {"stack": "s", "cluster": "c"}}])
def test_external_needs_exactly_one_address(external):
    with pytest.raises(TopologyError) as info:
        load_topology({"clusters": {"a": {"external": external}, "b": {}}, "flows": [{"source": "a", "target": "b"}]})
    assert any(p.startswith("clusters.a.external") and "exactly one of bootstrap_servers and from_stack" in p
               for p in info.value.problems), info.value.problems
