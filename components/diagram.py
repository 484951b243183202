"""Mermaid diagrams of topologies, generated from the model (pure: no pulumi).

`python -m mirrorstack.diagram docs/guides/topologies.md` (`make diagrams`) rewrites each block
between `<!-- diagram:<stack> -->` and `<!-- /diagram:<stack> -->` with the
diagram of stacks/Pulumi.<stack>.yaml, so the docs cannot drift from the stacks.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from mirrorstack.model.spec import Topology, load_topology

STACKS_DIR = Path(__file__).resolve().parents[1] / "stacks"
MARKERS = re.compile(r"(<!-- diagram:(?P<stack>[\w.-]+) -->\n).*?(<!-- /diagram:(?P=stack) -->)", re.DOTALL)


def stack_topology(stack: str, stacks_dir: Path = STACKS_DIR) -> Topology:
    """The validated topology of stacks/Pulumi.<stack>.yaml."""
    document = yaml.safe_load((stacks_dir / f"Pulumi.{stack}.yaml").read_text())
    return load_topology(document["config"]["mirrorstack:topology"])


def _text(value: str) -> str:
    # Inside a quoted Mermaid label only these break out; Mermaid's entity codes keep them.
    for char, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("|", "#124;")):
        value = value.replace(char, code)
    return value


def _ids(prefix: str, names) -> dict[str, str]:
    """Mermaid node ids: [A-Za-z0-9_] only, so `us-east` and `us_east` get a suffix to differ."""
    ids: dict[str, str] = {}
    for name in names:
        node = base = f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"
        while node in ids.values():
            node = f"{base}_{len(ids)}"
        ids[name] = node
    return ids


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def flow_label(flow) -> str:
    """`identity: orders, clicks.*` — the policy, then the topic regexes (and exclusions)."""
    label = f"{flow.replication_policy}: {', '.join(flow.topics)}"
    if flow.topics_exclude:
        label += f" except {', '.join(flow.topics_exclude)}"
    if flow.exactly_once:
        label += ", exactly-once"
    return label


def mermaid(topology: Topology) -> str:
    """A `flowchart LR`: Kafka clusters as cylinders, one edge per flow, and each
    Connect cluster as a box tied (dotted) to the Kafka cluster it runs on.
    Order follows the topology, so the output is deterministic."""
    kafka, connect = _ids("kafka", topology.clusters), _ids("connect", topology.connect)
    lines = ["flowchart LR"]
    for alias, cluster in topology.clusters.items():
        size = "external" if cluster.is_external else _plural(cluster.brokers, "broker")
        sec = cluster.external.security if cluster.is_external else cluster.security
        if sec.protocol != "PLAINTEXT":  # how clients get in: protocol, SASL mechanism, client certificates
            size += "<br/>" + " ".join(filter(None, [sec.protocol, sec.mechanism, "mTLS" if sec.mtls else None]))
        lines.append(f'  {kafka[alias]}[("{_text(alias)}<br/>{size}")]')
    for name, cc in topology.connect.items():
        size = f"existing, {_plural(len(cc.external.urls), 'URL')}" if cc.is_external else _plural(cc.workers, "worker")
        lines.append(f'  {connect[name]}[["Connect {_text(name)}<br/>{size}"]]')
        lines.append(f"  {connect[name]} -.- {kafka[cc.kafka]}")
    for flow in topology.flows:
        label = _text(flow_label(flow))
        if flow.connect != flow.target:  # else the Connect box beside the target says it
            label += f"<br/>on Connect {_text(flow.connect)}"
        lines.append(f'  {kafka[flow.source]} -->|"{label}"| {kafka[flow.target]}')
    if any(c.is_external for c in topology.clusters.values()):
        lines.append("  classDef external stroke-dasharray: 5 5")
        lines.append("  class " + ",".join(kafka[a] for a, c in topology.clusters.items() if c.is_external)
                     + " external")
    return "\n".join(lines) + "\n"


def rewrite_markdown(text: str, diagram_of=lambda stack: mermaid(stack_topology(stack))) -> str:
    """`text` with every diagram marker block holding the current diagram."""
    return MARKERS.sub(lambda m: f"{m[1]}```mermaid\n{diagram_of(m['stack'])}```\n{m[3]}", text)


def main(paths: list[str]) -> int:
    if not paths:
        print("usage: python -m mirrorstack.diagram FILE.md ...", file=sys.stderr)
        return 2
    for path in map(Path, paths):
        old = path.read_text()
        new = rewrite_markdown(old)
        if new != old:
            path.write_text(new)
        print(f"{path}: {len(MARKERS.findall(old))} diagram(s), {'updated' if new != old else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
