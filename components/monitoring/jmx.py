"""Prometheus JMX exporter (javaagent 1.x) rules for Kafka 4 brokers,
controllers, Connect workers and MirrorMaker 2.

Only what the dashboards and alert rules use is exported (a catch-all rule
makes a broker scrape ~1 MB). Kafka 4 tags every MirrorSourceConnector MBean
with `source`, which rules written for Kafka 2/3 miss, silently dropping every
MM2 series. jmx_exporter 1.x appends `_total` to COUNTER names. The series
names are in components/monitoring/metrics.py.
"""
from __future__ import annotations

import re

import yaml

ATTR = "([a-z-]+)"  # a metric attribute, e.g. record-age-ms-max → record_age_ms_max
# MM2's connector names (`us->central.MirrorSourceConnector`) are quoted in the MBean name.
CONNECTOR = '"?([^",]+)"?'


def _rule(pattern: str, name: str, labels: dict[str, str] | None = None, *, type_: str = "GAUGE",
          value: str | None = None, help_: str | None = None) -> dict:
    rule: dict = {"pattern": pattern, "name": name, "type": type_}
    if labels:
        rule["labels"] = labels
    if value is not None:
        rule["value"] = value
    if help_:
        rule["help"] = help_
    return rule


MM2_SOURCE = "kafka.connect.mirror<type=MirrorSourceConnector, source=(.+), target=(.+), topic=(.+), partition=([0-9]+)><>"
MM2_CHECKPOINT = ("kafka.connect.mirror<type=MirrorCheckpointConnector, source=(.+), target=(.+), group=(.+), "
                  "topic=(.+), partition=([0-9]+)><>")
SOURCE_LABELS = {"source": "$1", "target": "$2", "topic": "$3", "partition": "$4"}

RULES = [
    # MirrorMaker 2: per replicated partition (source connector) and per group partition (checkpoints).
    _rule(MM2_SOURCE + "(record-count|byte-count)", "kafka_connect_mirror_source_connector_$5", SOURCE_LABELS,
          type_="COUNTER", help_="Records/bytes replicated by MM2 (per source partition)."),
    _rule(MM2_SOURCE + ATTR, "kafka_connect_mirror_source_connector_$5", SOURCE_LABELS,
          help_="MM2 source connector metric: rates, record age, replication latency (ms)."),
    _rule(MM2_CHECKPOINT + ATTR, "kafka_connect_mirror_checkpoint_connector_$6",
          {"source": "$1", "target": "$2", "group": "$3", "topic": "$4", "partition": "$5"},
          help_="MM2 checkpoint connector metric: checkpoint latency (ms)."),
    # Connect: connector and task states (string attributes become a 1-valued series per state).
    _rule(f"kafka.connect<type=connector-metrics, connector={CONNECTOR}><>status: ([a-z-]+)",
          "kafka_connect_connector_status", {"connector": "$1", "status": "$2"}, value="1",
          help_="1 for the connector's current state (running, failed, paused, ...)."),
    _rule(f"kafka.connect<type=connector-task-metrics, connector={CONNECTOR}, task=([0-9]+)><>status: ([a-z-]+)",
          "kafka_connect_task_status", {"connector": "$1", "task": "$2", "status": "$3"}, value="1",
          help_="1 for the task's current state."),
    _rule(f"kafka.connect<type=connect-worker-metrics, connector={CONNECTOR}><>" + ATTR,
          "kafka_connect_worker_$2", {"connector": "$1"}, help_="Connect worker metric per connector (task counts)."),
    _rule("kafka.connect<type=connect-worker-metrics><>" + ATTR, "kafka_connect_worker_$1",
          help_="Connect worker metric (connector and task counts, startup failures)."),
    _rule("kafka.connect<type=connect-worker-rebalance-metrics><>" + ATTR, "kafka_connect_worker_rebalance_$1"),
    # Brokers and controllers.
    _rule("kafka.server<type=BrokerTopicMetrics, name=(MessagesInPerSec|BytesInPerSec|BytesOutPerSec), "
          "topic=(.+)><>Count", "kafka_server_broker_topic_$1", {"topic": "$2"}, type_="COUNTER",
          help_="Records/bytes written to and read from a topic on this broker."),
    _rule("kafka.server<type=ReplicaManager, name=(UnderReplicatedPartitions|PartitionCount|LeaderCount|"
          "OfflineReplicaCount)><>Value", "kafka_server_replica_manager_$1"),
    _rule("kafka.controller<type=KafkaController, name=(ActiveControllerCount|OfflinePartitionsCount|"
          "GlobalPartitionCount|GlobalTopicCount)><>Value", "kafka_controller_$1"),
]


def included_object_names(rules: list[dict] = RULES) -> list[str]:
    """The MBeans the rules can match, as JMX ObjectName patterns (`domain:type=...,*`),
    one per (domain, type) a rule names. The exporter then reads only those: without
    them it reads every attribute of every MBean on each scrape and drops all but these
    (a KRaft node: 177 CPU ms per scrape instead of 10, the same series;
    benchmarks/jmx_scrape.py)."""
    names = []
    for rule in rules:
        domain, _, keys = rule["pattern"].partition("<")
        kind = re.match(r"type=([A-Za-z-]+)(,|>)", keys)
        name = f"{domain}:type={kind.group(1)},*" if kind else f"{domain}:*"
        if name not in names:
            names.append(name)
    return names


def jmx_exporter_config() -> str:
    config = {
        "lowercaseOutputName": True,
        "lowercaseOutputLabelNames": True,
        "includeObjectNames": included_object_names(),
        "rules": RULES,
    }
    return yaml.safe_dump(config, sort_keys=False)
