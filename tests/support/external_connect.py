"""A Connect group as a team runs it outside any stack: HTTPS REST with a
certificate of its own CA (keytool, as an operator would make it) and HTTP
basic auth (Kafka's BasicAuthSecurityRestExtension with a credentials file)."""
from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path

import requests

from mirrorstack import toolchain
from mirrorstack.connect.readiness import MIRROR_CONNECTOR_CLASSES

STORE_PASSWORD = "changeit-test-store"


def keytool(*args: str) -> None:
    binary = str(Path(toolchain.java_binary()).with_name("keytool"))
    subprocess.run([binary, *args], check=True, capture_output=True, text=True)


def rest_tls(folder: Path) -> tuple[dict[str, str], str]:
    """(worker settings for an HTTPS REST listener, the CA file clients trust)."""
    folder.mkdir(parents=True, exist_ok=True)
    keystore, truststore, ca = folder / "rest.p12", folder / "rest-trust.p12", folder / "rest-ca.pem"
    keytool("-genkeypair", "-alias", "rest", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=connect-rest",
            "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-ext", "BC=ca:true", "-validity", "30",
            "-keystore", str(keystore), "-storetype", "PKCS12", "-storepass", STORE_PASSWORD)
    keytool("-exportcert", "-rfc", "-alias", "rest", "-keystore", str(keystore), "-storepass", STORE_PASSWORD,
            "-file", str(ca))
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(ca), "-keystore", str(truststore),
            "-storetype", "PKCS12", "-storepass", STORE_PASSWORD)
    settings = {
        "rest.advertised.listener": "https",
        "listeners.https.ssl.keystore.type": "PKCS12", "listeners.https.ssl.keystore.location": str(keystore),
        "listeners.https.ssl.keystore.password": STORE_PASSWORD, "listeners.https.ssl.key.password": STORE_PASSWORD,
        # the workers forward requests to the leader over HTTPS: they trust the same CA
        "listeners.https.ssl.truststore.type": "PKCS12", "listeners.https.ssl.truststore.location": str(truststore),
        "listeners.https.ssl.truststore.password": STORE_PASSWORD,
    }
    return settings, str(ca)


def basic_auth(folder: Path, users: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(worker settings, JVM system properties) for REST basic auth of `users`."""
    credentials, jaas = folder / "rest-credentials.properties", folder / "rest-jaas.conf"
    credentials.write_text("".join(f"{user}: {password}\n" for user, password in users.items()))
    credentials.chmod(0o600)
    jaas.write_text("KafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule "
                    f'required\n  file="{credentials}";\n}};\n')
    settings = {"rest.extension.classes":
                "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"}
    return settings, [f"-Djava.security.auth.login.config={jaas}"]


def ready_check(ca_file: str | None, auth: tuple[str, str] | None, mirror: bool = True):
    """A readiness check for `ConnectGroup(ready=...)`: the REST API answers over
    HTTPS with the credentials (and lists the MirrorMaker connectors, if `mirror`)."""
    def ready(url: str) -> bool:
        reply = requests.get(f"{url}/connector-plugins", timeout=5, verify=ca_file or True, auth=auth)
        if reply.status_code != 200:
            return False
        return not mirror or set(MIRROR_CONNECTOR_CLASSES) <= {p["class"] for p in reply.json()}
    return ready


def seed_connectors(source: str, target: str, source_bootstrap: str, target_bootstrap: str,
                    topics: str = "orders") -> dict[str, dict[str, str]]:
    """The connectors seed 000's mm2.sh PUTs with curl for one source cluster:
    mm2-msc-/mm2-cpc-/mm2-hbc-<source>, identity policy, tasks.max 2, RF 1."""
    common = {
        "source.cluster.alias": source, "target.cluster.alias": target,
        "source.cluster.bootstrap.servers": source_bootstrap, "target.cluster.bootstrap.servers": target_bootstrap,
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "offset-syncs.topic.replication.factor": "1", "tasks.max": "2",
    }
    package = "org.apache.kafka.connect.mirror"
    return {
        f"mm2-msc-{source}": {**common, "connector.class": f"{package}.MirrorSourceConnector", "topics": topics,
                              "replication.factor": "1", "refresh.topics.interval.seconds": "10",
                              "sync.topic.acls.enabled": "false"},
        f"mm2-cpc-{source}": {**common, "connector.class": f"{package}.MirrorCheckpointConnector", "groups": ".*",
                              "checkpoints.topic.replication.factor": "1"},
        f"mm2-hbc-{source}": {**common, "connector.class": f"{package}.MirrorHeartbeatConnector",
                              "heartbeats.topic.replication.factor": "1"},
    }


def put_connectors(url: str, connectors: dict[str, dict[str, str]], *, ca_file: str, auth: tuple[str, str]) -> None:
    """As mm2.sh does: `curl -X PUT .../connectors/<name>/config -d @<json>`."""
    put = partial(requests.put, timeout=60, verify=ca_file, auth=auth)
    for name, config in connectors.items():
        put(f"{url}/connectors/{name}/config", json=config).raise_for_status()
