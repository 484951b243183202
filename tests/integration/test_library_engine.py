"""mirrorstack as a library through the real engine, preview only (nothing
deployed): the aggregation stack previews with named dynamic types, and a
program composing two ReplicationTopology components previews without a URN
clash."""
import pytest

from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

# The repo's program composing the stack's topology twice, each on its own
# platform (folder and port range): only the components' names tell them apart.
TWO_TOPOLOGIES = '''
from pathlib import Path

import pulumi

from mirrorstack.model.spec import load_topology
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.topology import ReplicationTopology

config = pulumi.Config("mirrorstack")
topology = load_topology(config.require_object("topology"))
base = config.require_int("portBase")
for index, name in enumerate(("east", "west")):
    platform = LocalPlatform(name, str(Path(config.require("localDir")) / name), port_base=base + 500 * index)
    ReplicationTopology(name, ReplicationTopologyArgs(topology=topology, platform=platform, stack=name))
'''


def test_the_aggregation_stack_previews_with_named_types(tmp_path):
    with stack_project("aggregation", tmp_path) as project:
        out = project.run("preview", timeout=600).stdout
    assert "pulumi-python:dynamic:Resource" not in out, out
    for kind, name in [("pulumi-python:dynamic/local:LocalService", "aggregation-us-broker-0"),
                       ("pulumi-python:dynamic/local:LocalService", "aggregation-connect-central-0"),
                       ("pulumi-python:dynamic/mirror:MirrorMaker2Connectors", "aggregation-us->central-connectors"),
                       ("pulumi-python:dynamic/local:LocalSparkJob", "aggregation-validation-job")]:
        assert f"+ {kind} {name} create" in " ".join(out.split()), (kind, name, out)


def test_two_topologies_in_one_program_preview_without_a_urn_clash(tmp_path):
    with stack_project("aggregation", tmp_path) as project:
        (project.dir / "__main__.py").write_text(TWO_TOPOLOGIES)
        done = project.run("preview", check=False, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "Duplicate resource URN" not in out, out
    for name in ("east-us-broker-0", "west-us-broker-0", "east-us->central-connectors", "west-us->central-connectors"):
        assert name in out, (name, out)
