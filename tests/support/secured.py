"""Client settings for the secured clusters a local stack deployed, read from
the stack's own 0600 client folders (as an operator on the host would)."""
from __future__ import annotations

import re
from pathlib import Path

JAAS = re.compile(r'username="((?:[^"\\]|\\.)*)" password="((?:[^"\\]|\\.)*)"')


def jaas_credentials(client_folder: Path) -> tuple[str, str]:
    text = (client_folder / "client.properties").read_text()
    user, password = JAAS.search(text).groups()
    return user, password


def librdkafka_client(local_dir: Path, alias: str, mechanism: str) -> dict:
    """confluent_kafka settings for `alias` over SASL_SSL (and mTLS when the
    folder holds a client keystore)."""
    folder = local_dir / "clients" / alias
    user, password = jaas_credentials(folder)
    conf = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password, "ssl.ca.location": str(folder / "ca.pem")}
    if (folder / "client.pem").exists():
        conf.update({"ssl.certificate.location": str(folder / "client.pem"),
                     "ssl.key.location": str(folder / "client.pem")})
    return conf


def private_key_bodies(pem: str) -> list[str]:
    """The base64 lines of every private key in a PEM file (what must never leak)."""
    keys = re.findall(r"-----BEGIN PRIVATE KEY-----\n(.*?)-----END PRIVATE KEY-----", pem, re.S)
    return [line for key in keys for line in key.split() if len(line) >= 40]


def principal_client(local_dir: Path, alias: str, mechanism: str, credentials: dict) -> dict:
    """librdkafka settings for an application principal (stack output principal_credentials[name])."""
    return {**librdkafka_client(local_dir, alias, mechanism), "sasl.username": credentials["username"],
            "sasl.password": credentials["password"]}


def node_admin(local_dir: Path, alias: str):
    """An AdminClient acting as the cluster's first broker (a super user) over
    its INTERNAL listener, as the stack's ACL resource does."""
    from confluent_kafka.admin import AdminClient

    from mirrorstack.certificates.tls import keystore_parts
    node = local_dir / f"{alias}-broker-0"
    listeners = re.search(r"^advertised\.listeners=(.*)$", (node / "server.properties").read_text(), re.M)[1]
    internal = re.search(r"INTERNAL://([^,]+)", listeners)[1]
    key, cert = keystore_parts((node / "secrets" / "server.pem").read_text())
    return AdminClient({"bootstrap.servers": internal, "security.protocol": "SSL", "log_level": 0,
                        "ssl.ca.location": str(node / "secrets" / "ca.pem"), "ssl.certificate.pem": cert,
                        "ssl.key.pem": key})
