"""TLS and SASL settings of secured clusters: broker listeners, client settings,
and the secret files that hold what must not appear anywhere else.

The rule: a secret value only ever sits in a 0600 file of a `secrets/` folder
(or a Kubernetes Secret). Configs that need it (a Connect worker's, a
connector's) carry a Kafka config-provider reference `${file:<path>:<key>}`,
which Kafka resolves in memory; the plain configs stay reviewable in a diff.
Pure: no pulumi.
"""
from __future__ import annotations

from collections.abc import Mapping

from mirrorstack.properties import render_properties

FILE_PROVIDER = {
    "config.providers": "file",
    "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
}
CLIENT_LISTENER, INTERNAL_LISTENER = "CLIENT", "INTERNAL"
ADMIN_LISTENER = "ADMIN"  # the ACL resource's way in from where `up` runs (Platform.admin_listener)
JAAS_MODULES = {
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
}
SCRAM_ITERATIONS = 8192
# Files of a client folder (`clients/<alias>/` on every platform).
CA_FILE, CLIENT_KEYSTORE_FILE, CLIENT_SECRETS_FILE = "ca.pem", "client.pem", "client.properties"


def file_reference(path: str, key: str) -> str:
    """A FileConfigProvider reference Kafka resolves when it reads the config."""
    return "${file:%s:%s}" % (path, key)


def file_provider(allowed_dir: str) -> dict[str, str]:
    """Worker/broker settings that enable `${file:...}`, limited to one folder."""
    return {**FILE_PROVIDER, "config.providers.file.param.allowed.paths": allowed_dir}


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jaas_config(mechanism: str, username: str, password: str) -> str:
    return f"{JAAS_MODULES[mechanism]} required username={_jaas_quote(username)} password={_jaas_quote(password)};"


def pem_tls(keystore: str | None, truststore: str) -> dict[str, str]:
    """TLS client or server settings reading PEM files (no store passwords)."""
    props = {"ssl.truststore.type": "PEM", "ssl.truststore.location": truststore}
    if keystore:
        props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore})
    return props


def broker_listener_settings(security, *, client: str, internal: str, listen_client: str, listen_internal: str,
                             keystore: str, truststore: str, secrets_file: str) -> dict[str, str]:
    """A secured broker: clients on CLIENT (the topology's protocol), brokers on
    INTERNAL (TLS with client certificates, so no password between brokers),
    the controller over TLS as well. `client`/`internal` are host:port as
    others reach them, `listen_*` what the broker binds."""
    props = {
        "listeners": f"{CLIENT_LISTENER}://{listen_client},{INTERNAL_LISTENER}://{listen_internal}",
        "advertised.listeners": f"{CLIENT_LISTENER}://{client},{INTERNAL_LISTENER}://{internal}",
        "inter.broker.listener.name": INTERNAL_LISTENER,
        "listener.security.protocol.map": f"{CLIENT_LISTENER}:{security.protocol},{INTERNAL_LISTENER}:SSL,CONTROLLER:SSL",
        **pem_tls(keystore, truststore),
        "ssl.client.auth": "required",  # INTERNAL and CONTROLLER: brokers prove who they are
        f"listener.name.{CLIENT_LISTENER.lower()}.ssl.client.auth": "required" if security.mtls else "none",
    }
    mechanism = security.sasl_mechanism
    if mechanism:
        prefix = f"listener.name.{CLIENT_LISTENER.lower()}.{mechanism.lower()}"
        props["sasl.enabled.mechanisms"] = mechanism
        if mechanism == "PLAIN":  # the broker holds the users' passwords: a reference to its secrets file
            props.update(FILE_PROVIDER)
            props[f"{prefix}.sasl.jaas.config"] = file_reference(secrets_file, "plain.jaas")
        else:  # SCRAM: the broker keeps salted hashes in the metadata log, created after start
            props[f"{prefix}.sasl.jaas.config"] = f"{JAAS_MODULES[mechanism]} required;"
    return props


def with_admin_listener(props: dict[str, str], *, advertised: str, listen: str) -> dict[str, str]:
    """A secured broker's properties plus ADMIN: TLS with client certificates
    (the global ssl.client.auth), for the ACL resource acting as a node."""
    out = dict(props)
    out["listeners"] += f",{ADMIN_LISTENER}://{listen}"
    out["advertised.listeners"] += f",{ADMIN_LISTENER}://{advertised}"
    out["listener.security.protocol.map"] += f",{ADMIN_LISTENER}:SSL"
    return out


def controller_tls_settings(keystore: str, truststore: str) -> dict[str, str]:
    return {"listener.security.protocol.map": "CONTROLLER:SSL", **pem_tls(keystore, truststore),
            "ssl.client.auth": "required"}


def broker_secret_files(security, password: str | None, principals: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret files of a broker besides its PEM keystore: the SCRAM credential
    to create (ConfigCommand --add-config-file) or PLAIN's user list, which
    holds the application principals too (SCRAM ones are created by the ACL
    resource, without a restart)."""
    mechanism = security.sasl_mechanism
    if mechanism is None or password is None:
        return {}
    if mechanism == "PLAIN":
        users = {security.user: password, **(principals or {})}
        jaas = f"{JAAS_MODULES['PLAIN']} required " + " ".join(
            f"user_{user}={_jaas_quote(pw)}" for user, pw in users.items()) + ";"
        return {"secrets/broker.properties": secret_properties({"plain.jaas": jaas})}
    # ConfigCommand reads `<mechanism>=iterations=N,password=P` from a file (no brackets there)
    return {"secrets/scram.properties": secret_properties(
        {mechanism: f"iterations={SCRAM_ITERATIONS},password={password}"})}


def scram_user_args(security, *, bootstrap: str, command_config: str, scram_file: str) -> list[str] | None:
    """kafka.admin.ConfigCommand arguments that create the SCRAM user over the
    INTERNAL listener (authenticated by the broker's certificate); the password
    is read from a file, never from the command line."""
    if security.sasl_mechanism not in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        return None
    return ["--bootstrap-server", bootstrap, "--command-config", command_config, "--alter",
            "--entity-type", "users", "--entity-name", security.user, "--add-config-file", scram_file]


def sasl_readiness(security, *, listener: str, keystore: str, truststore: str) -> dict[str, str]:
    """A secured broker's health keys for the check that the stack's SASL
    users authenticate on its CLIENT listener (`listener`) at each start (the
    SCRAM ones set again first): librdkafka settings without credentials. A
    process platform runs sasl_check.wait_accepted once the broker is healthy:
    the `mirrorstack.once_healthy` entry point of the key `sasl.bootstrap`."""
    if not security.sasl_mechanism:
        return {}
    client = {"security.protocol": security.protocol.lower(), "sasl.mechanism": security.sasl_mechanism}
    if security.protocol == "SASL_SSL":
        client["ssl.ca.location"] = truststore
        if security.mtls:  # the listener wants a certificate too: the node's own
            client.update({"ssl.certificate.location": keystore, "ssl.key.location": keystore})
    return {"sasl.bootstrap": listener, **{f"sasl.client.{k}": v for k, v in client.items()}}


def admin_properties(keystore: str, truststore: str) -> dict[str, str]:
    """Client settings of the broker's own certificate on the INTERNAL listener."""
    return {"security.protocol": "SSL", **pem_tls(keystore, truststore)}


def client_settings(protocol: str, *, mechanism: str | None, folder: str, mtls: bool,
                    secret_keys: list[str] = (), extra: Mapping[str, str] | None = None,
                    truststore: bool = True) -> dict[str, str]:
    """What any client (Connect, MM2, the validation job) sets to reach the
    cluster: plain settings plus references to the secret ones in `folder`."""
    props: dict[str, str] = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL") and truststore:
        props.update(pem_tls(f"{folder}/{CLIENT_KEYSTORE_FILE}" if mtls else None, f"{folder}/{CA_FILE}"))
    if protocol.startswith("SASL_"):
        props["sasl.mechanism"] = mechanism or "SCRAM-SHA-512"
    props.update(extra or {})
    for key in secret_keys:
        props[key] = file_reference(f"{folder}/{CLIENT_SECRETS_FILE}", key)
    return props


def secret_properties(values: Mapping[str, str]) -> str:
    """A client.properties of secret settings, escaped as Java properties."""
    return render_properties(dict(values))
