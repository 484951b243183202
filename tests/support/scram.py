"""A real Kafka cluster whose brokers also take SCRAM clients: each broker has
a SASL_PLAINTEXT listener (SCRAM-SHA-256 and SCRAM-SHA-512) beside the
plaintext one the Admin API uses. Plain text on 127.0.0.1: what is under test
is the brokers' SCRAM credentials, not TLS."""
from __future__ import annotations

from pathlib import Path

from tests.support.ports import free_ports
from tests.support.services import HOST, KafkaCluster

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


class ScramKafkaCluster(KafkaCluster):
    def __init__(self, name: str, base_dir: Path, brokers: int = 2):
        super().__init__(name, base_dir, brokers)
        self.sasl_ports = free_ports(brokers)

    def broker_settings(self, index: int) -> dict[str, str]:
        port, sasl = self.broker_ports[index], self.sasl_ports[index]
        return {**self.broker_overrides,
                "listeners": f"PLAINTEXT://{HOST}:{port},SASL://{HOST}:{sasl}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{port},SASL://{HOST}:{sasl}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                "sasl.enabled.mechanisms": ",".join(MECHANISMS),
                **{f"listener.name.sasl.{m.lower()}.sasl.jaas.config": SCRAM_MODULE for m in MECHANISMS}}

    def sasl_address(self, index: int) -> str:
        return f"{HOST}:{self.sasl_ports[index]}"

    def readiness_spec(self, index: int, mechanism: str) -> dict[str, str]:
        """Broker `index`'s health spec as kafka/sasl_check.py reads a secured stack's broker's:
        the node's way in (here plaintext, no certificate) and its SASL listener."""
        return {"kind": "kafka", "bootstrap": self.broker_address(index), "sasl.bootstrap": self.sasl_address(index),
                "sasl.client.security.protocol": "sasl_plaintext", "sasl.client.sasl.mechanism": mechanism}

