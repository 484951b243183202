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
