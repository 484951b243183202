"""MM2's names and topic selection as components/mm2/flows.py derives them agree
with MM2's own classes from the pinned jars (DefaultReplicationPolicy,
IdentityReplicationPolicy, DefaultTopicFilter, MirrorSourceConnector), for
several separators: every case is answered by the JVM and by the module."""
from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from mirrorstack import toolchain
from mirrorstack.mm2.flows import CONNECT_STORAGE_TOPICS, DEFAULT_TOPICS_EXCLUDE, ReplicationPolicy, replicates

ORACLE = Path(__file__).parent.parent / "support" / "Mm2Names.java"
SEPARATORS = [".", "_", "-", "__"]
TOPICS = [
    "orders", "orders.v2", "orders_internal", "foo-internal", "x.replica", "__consumer_offsets", ".hidden",
    "connect-offsets", "a", "a_", "_a", "my_heartbeats", "heartbeats", "c.orders", "c_b_orders",
    *(f"{alias}{sep}{name}" for alias in ("a", "b", "c.a") for sep in SEPARATORS
      for name in ("orders", "heartbeats")),
    *(f"{alias}{sep}checkpoints{sep}internal" for alias in ("a", "b") for sep in SEPARATORS),
    *(f"mm2-{kind}{sep}a{sep}internal" for kind in ("offset-syncs", "configs", "status") for sep in SEPARATORS),
]
FILTERS = {  # topics, topics.exclude
    "everything": ([".*"], [*DEFAULT_TOPICS_EXCLUDE, *CONNECT_STORAGE_TOPICS]),
    "orders only": (["orders.*"], list(DEFAULT_TOPICS_EXCLUDE)),
}
CASES = [(kind, sep, filter_, topic) for kind, sep, filter_, topic
         in itertools.product(("default", "identity"), SEPARATORS, FILTERS, TOPICS)]


@pytest.fixture(scope="module")
def mm2_answers() -> list[list[str]]:
    """One JVM answers every case (source cluster b, target a)."""
    lines = ["\t".join([kind, sep, "b", "a", ",".join(FILTERS[f][0]), ",".join(FILTERS[f][1]), topic])
             for kind, sep, f, topic in CASES]
    done = subprocess.run([toolchain.java_binary(), "-cp", toolchain.kafka_classpath(), str(ORACLE)],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [line.split("\t") for line in done.stdout.splitlines()]
    assert len(answers) == len(CASES)
    return answers


def test_every_name_and_verdict_is_mm2s(mm2_answers):
    wrong = []
    for (kind, sep, f, topic), java in zip(CASES, mm2_answers):
        policy = ReplicationPolicy(kind, sep, source_alias="b")
        topics, excludes = FILTERS[f]
        ours = [policy.remote_topic("b", topic), policy.checkpoints_topic("b"), policy.offset_syncs_topic("b"),
                str(policy.is_internal_topic(topic)).lower(), str(policy.is_heartbeats_topic(topic)).lower(),
                str(policy.is_cycle(topic, "a")).lower(),
                str(replicates(policy, topic, target_alias="a", topics=topics, topics_exclude=excludes)).lower()]
        if ours != java:
            wrong.append((kind, sep, f, topic, ours, java))
    assert wrong == [], wrong[:10]


def test_the_cases_reach_every_verdict(mm2_answers):
    """The matrix is not vacuous: MM2 says yes and no to each question in it."""
    for column in range(3, 7):
        assert {answer[column] for answer in mm2_answers} == {"true", "false"}, column


def test_internal_topics_follow_the_separator():
    underscore = ReplicationPolicy("default", "_")
    assert underscore.checkpoints_topic("us") == "us_checkpoints_internal"
    assert underscore.offset_syncs_topic("us") == "mm2-offset-syncs_us_internal"
    assert underscore.is_internal_topic("mm2-offset-syncs_us_internal")
    assert not ReplicationPolicy("default", ".").is_internal_topic("mm2-offset-syncs_us_internal")
