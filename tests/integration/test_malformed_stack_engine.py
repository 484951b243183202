"""A malformed stack through the real Pulumi engine: `pulumi up` fails with
every problem's field path and fix, shown as an error (no Python traceback),
and the state holds no resource but the Stack."""
import json

import pytest
import yaml

from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

# Independent mistakes: all must be reported by the one failed `up`.
MALFORMED = yaml.safe_load("""
platform: local
clusters:
  us: {brokers: 1}
  central:
    brokers: 1
    security: {protocol: SSL, mechanism: SCRAM-SHA-512}
  eu: {brokers: 1, security: {protocol: SASL_SSL}}
  ap: {brokers: 1, security: {protocol: SASL_SSL, user: kafka-nodes}}
flows:
  - {source: us, target: centrl}
  - {source: us, target: central, topics: ["(?P<region>orders)"], separator: "/"}
  - {source: us, target: eu}
  - {source: eu, target: us, separator: "-"}
  - {source: ap, target: us}
principals:
  kafka-nodes: {cluster: eu, allow: []}
""")


def test_malformed_topology_fails_up_before_any_resource(tmp_path):
    with stack_project("aggregation", tmp_path) as project:
        # Keep the stack file stack_project wrote (salt, localDir, portBase); swap the topology.
        stack_file = project.dir / "stacks" / "Pulumi.aggregation.yaml"
        document = yaml.safe_load(stack_file.read_text())
        document["config"]["mirrorstack:topology"] = MALFORMED
        stack_file.write_text(yaml.safe_dump(document))

        up = project.run("up", "--yes", "--skip-preview", check=False, timeout=600)
        output = up.stdout + up.stderr
        assert up.returncode != 0, output
        assert "flows[0].target: unknown cluster 'centrl'" in output, output
        assert "clusters.central.security.mechanism: a SASL mechanism needs protocol SASL_SSL" in output, output
        assert "flows[1].topics[0]: regex '(?P<region>orders)' uses Python's named group" in output, output
        assert "fix: write (?<region>...)" in output, output
        assert "flows[1].separator: '/' cannot appear in a topic name" in output, output
        # Issue 46: a user named like the nodes' super user; copies that would come back for ever.
        assert "clusters.ap.security.user: 'kafka-nodes' is the nodes' principal of earlier" in output, output
        assert "principals.kafka-nodes: 'kafka-nodes' is the nodes' principal of earlier" in output, output
        assert "flows[2].separator, flows[3].separator: copies come back round the cycle eu -> us -> eu" in output, \
            output
        # A clean error: the problems, not the program's stack trace around them.
        assert "Traceback" not in output and "unhandled exception" not in output, output

        deployment = json.loads(project.run("stack", "export").stdout)["deployment"]
        types = [r["type"] for r in deployment.get("resources") or []]
        # The engine registers the Stack before running the program, which raised
        # at load_topology: nothing else (no provider, no service) was created.
        assert types == ["pulumi:pulumi:Stack"], types
        assert not project.local_dir.exists() or not any(project.local_dir.iterdir())
