import re
import subprocess
import sys
from pathlib import Path

from mirrorstack import diagram
from mirrorstack.diagram import mermaid, rewrite_markdown, stack_topology
from mirrorstack.model.spec import load_topology

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
TOPOLOGY_GUIDE = "docs/guides/topologies.md"

MIXED = load_topology({
    "clusters": {"legacy": {"external": {"bootstrap_servers": "h:9092"}}, "us-east": {"brokers": 3},
                 "us_east": {}},
    "connect": {"mm2": {"kafka": "us-east", "workers": 2, "push": True}},
    "flows": [{"source": "legacy", "target": "us-east", "connect": "mm2", "replication_policy": "identity",
               "topics": ["orders", "clicks.*", "a|b"], "topics_exclude": ['x"?y']},
              {"source": "legacy", "target": "us_east", "connect": "mm2", "topics": ["<?app>?#?1"]}],
})  # the odd characters optional: a regex that can match no topic name is refused (mirrorstack.model.rules)


def test_golden_diagram_of_a_mixed_topology():
    assert mermaid(MIXED) == """\
flowchart LR
  kafka_legacy[("legacy<br/>external")]
  kafka_us_east[("us-east<br/>3 brokers")]
  kafka_us_east_2[("us_east<br/>1 broker")]
  connect_mm2[["Connect mm2<br/>2 workers"]]
  connect_mm2 -.- kafka_us_east
  kafka_legacy -->|"identity: orders, clicks.*, a#124;b except x#quot;?y<br/>on Connect mm2"| kafka_us_east
  kafka_legacy -->|"default: #lt;?app#gt;?#35;?1<br/>on Connect mm2"| kafka_us_east_2
  classDef external stroke-dasharray: 5 5
  class kafka_legacy external
"""


def test_output_is_deterministic():
    again = load_topology(MIXED.model_dump())
    assert mermaid(again) == mermaid(MIXED)


def edges(text: str) -> list[tuple[str, str, str]]:
    return re.findall(r'^  (\w+) -->\|"(.*)"\| (\w+)$', text, re.M)


def test_every_stack_has_a_node_per_cluster_an_edge_per_flow_and_its_connect_clusters():
    for stack in STACKS:
        topology = stack_topology(stack)
        text = mermaid(topology)
        assert text.startswith("flowchart LR\n")
        for alias, cluster in topology.clusters.items():
            assert f'  kafka_{alias.replace("-", "_")}[("{alias}<br/>' in text, (stack, alias)
        for name, cc in topology.connect.items():
            assert f"  connect_{name} -.- kafka_{cc.kafka}\n" in text, (stack, name)
        assert [(s, t) for s, _, t in edges(text)] == [(f"kafka_{f.source}", f"kafka_{f.target}")
                                                       for f in topology.flows], stack


def test_stack_edges_carry_policy_and_topics():
    assert [label for _, label, _ in edges(mermaid(stack_topology("aggregation")))] == [
        "identity: orders, clicks.*", "identity: orders, clicks.*"]
    assert [label for _, label, _ in edges(mermaid(stack_topology("forwarding")))] == [
        "default: orders", "default: edge\\.orders"]
    fan_out = mermaid(stack_topology("fan-out"))
    assert [(s, t) for s, _, t in edges(fan_out)] == [("kafka_hq", "kafka_eu"), ("kafka_hq", "kafka_us"),
                                                     ("kafka_hq", "kafka_apac")]
    assert '  kafka_hq[("hq<br/>1 broker")]' in fan_out
    assert '  connect_eu[["Connect eu<br/>1 worker"]]' in fan_out


def test_topology_guide_diagrams_are_current():
    guide = (ROOT / TOPOLOGY_GUIDE).read_text()
    blocks = sorted(m["stack"] for m in diagram.MARKERS.finditer(guide))
    assert blocks == STACKS, f"every stack needs one <!-- diagram:<stack> --> block in {TOPOLOGY_GUIDE}"
    assert rewrite_markdown(guide) == guide, f"{TOPOLOGY_GUIDE}'s diagrams are stale: run `make diagrams`"


def test_rewrite_replaces_only_the_marked_blocks_and_is_idempotent():
    text = ("intro\n<!-- diagram:a -->\nold stuff\n<!-- /diagram:a -->\nmiddle\n"
            "<!-- diagram:b -->\n<!-- /diagram:b -->\nend\n")
    new = rewrite_markdown(text, lambda stack: f"flowchart LR\n  {stack}\n")
    assert new == ("intro\n<!-- diagram:a -->\n```mermaid\nflowchart LR\n  a\n```\n<!-- /diagram:a -->\nmiddle\n"
                   "<!-- diagram:b -->\n```mermaid\nflowchart LR\n  b\n```\n<!-- /diagram:b -->\nend\n")
    assert rewrite_markdown(new, lambda stack: f"flowchart LR\n  {stack}\n") == new


def test_command_rewrites_a_file(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# x\n<!-- diagram:dev-copy -->\n<!-- /diagram:dev-copy -->\n")
    run = subprocess.run([sys.executable, "-m", "mirrorstack.diagram", str(page)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True)
    assert run.stdout == f"{page}: 1 diagram(s), updated\n"
    assert f"```mermaid\n{mermaid(stack_topology('dev-copy'))}```\n" in page.read_text()


def test_diagram_does_not_import_pulumi():
    code = "import sys, mirrorstack.diagram; assert not [m for m in sys.modules if m.split('.')[0] == 'pulumi']"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
