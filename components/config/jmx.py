"""Prometheus JMX exporter (javaagent 1.x) configuration.

For now one catch-all rule: every MBean in jmx_exporter's default naming
(`kafka_server_*`, `kafka_connect_*`, ...). Kafka-4-aware rules come with the
monitoring work.
"""
from __future__ import annotations

import yaml


def jmx_exporter_config() -> str:
    config = {
        "lowercaseOutputName": True,
        "lowercaseOutputLabelNames": True,
        "rules": [{"pattern": ".*"}],
    }
    return yaml.safe_dump(config, sort_keys=False)
