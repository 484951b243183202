"""Kafka client settings as both sides read them, shared by the validation job
and the control plane (the replication plan reads live clusters with them):
`${file:PATH:KEY}` references resolved as Kafka's FileConfigProvider does,
and Java client settings translated to librdkafka's (confluent_kafka).

Standard library only."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

# `${file:PATH:KEY}`, split as Kafka's ConfigTransformer does (PATH up to the first colon).
FILE_REFERENCE = re.compile(r"\$\{file:([^}:]*):([^}]*)\}")
PROPERTIES_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.?)", re.S)


class Secret(str):
    """A client setting read through a `${file:...}` reference: hidden in reprs
    (so in any dataclass, dict or problem that shows one)."""

    def __repr__(self) -> str:
        return "'<hidden>'"


def resolve_reference(value: str, where: str, problems: list[str]) -> str:
    """The value of a `${file:PATH:KEY}` reference, read as Kafka's
    FileConfigProvider does; any other value as it is. Problems name the file
    and key, never what the file holds."""
    ref = FILE_REFERENCE.fullmatch(value)
    if ref is None:
        if "${file:" in value:
            problems.append(f"{where}: a ${{file:PATH:KEY}} reference must be the whole value")
        return value
    path, key = ref.groups()
    if not os.path.isabs(path):
        problems.append(f"{where}: {path!r} in the ${{file:...}} reference is not an absolute path")
        return value
    try:
        props = read_properties(path)
    except OSError as exc:
        problems.append(f"{where}: cannot read {path} ({exc.strerror or type(exc).__name__})")
        return value
    except ValueError:  # not UTF-8, or a malformed \uXXXX: the text itself is never shown
        problems.append(f"{where}: {path} is not a valid Java properties file")
        return value
    if key not in props:
        problems.append(f"{where}: {path} has no key {key!r}")
        return value
    return Secret(props[key])


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file as java.util.Properties.load reads it: `key=value`,
    `key: value` or `key value`; `#`/`!` comment lines; backslash escapes
    (`\\t`, `\\n`, `\\uXXXX`, `\\=`, ...); a line ending in an odd number of
    backslashes continues on the next, whose leading blanks are dropped."""
    props: dict[str, str] = {}
    logical, continued = "", False
    for line in re.split(r"\r\n|\r|\n", Path(path).read_text(encoding="utf-8")):
        line = line.lstrip(" \t\f")
        if not continued and (not line or line[0] in "#!"):
            continue
        continued = (len(line) - len(line.rstrip("\\"))) % 2 == 1
        logical += line[:-1] if continued else line
        if not continued:
            _add_property(props, logical)
            logical = ""
    if continued:  # a backslash on the last line continues nothing
        _add_property(props, logical)
    return props


def _add_property(props: dict[str, str], line: str) -> None:
    end = 0  # the key ends at the first unescaped `=`, `:` or blank
    while end < len(line) and line[end] not in "=: \t\f":
        end += 2 if line[end] == "\\" else 1
    value = line[end:].lstrip(" \t\f")
    if value[:1] in ("=", ":"):
        value = value[1:].lstrip(" \t\f")
    props[_unescape(line[:end])] = _unescape(value)


def _unescape(text: str) -> str:
    def one(match: re.Match) -> str:
        escaped = match.group(1)
        if escaped == "u":
            raise ValueError("malformed \\uXXXX escape")
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(escaped, escaped)
    # \\uXXXX are UTF-16 units: join surrogate pairs into one character
    return PROPERTIES_ESCAPE.sub(one, text).encode("utf-16", "surrogatepass").decode("utf-16")


# Java client settings librdkafka has no equivalent for (driver offsets then go via Spark).
JAVA_ONLY_CLIENT_KEYS = ("sasl.jaas.config", "ssl.truststore.", "ssl.keystore.", "sasl.login.",
                         "sasl.client.callback.handler.class", "ssl.endpoint.identification.algorithm")
JAAS_LOGIN = re.compile(r"\s*org\.apache\.kafka\.common\.security\.(?:scram\.ScramLoginModule|plain\.PlainLoginModule)"
                        r"\s+(?i:required|requisite|sufficient|optional)\b(.*?);?\s*", re.S)
JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";=]+))', re.S)


def librdkafka_config(bootstrap: str, client: dict[str, str]) -> dict[str, Any] | None:
    """confluent_kafka settings for a Java client config, or None when a setting
    has no librdkafka equivalent. Translated: PEM trust and key stores (the PEM
    keystore file holds the key and the certificate chain) and a SCRAM or PLAIN
    JAAS login."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    java = {key: value for key, value in client.items() if key.startswith(JAVA_ONLY_CLIENT_KEYS)}
    for key, value in client.items():
        if key not in java:
            conf["sasl.mechanisms" if key == "sasl.mechanism" else key] = value
    if java.get("ssl.truststore.type") == "PEM" and "ssl.truststore.location" in java:
        del java["ssl.truststore.type"]
        conf["ssl.ca.location"] = java.pop("ssl.truststore.location")
    if java.get("ssl.keystore.type") == "PEM" and "ssl.keystore.location" in java:
        del java["ssl.keystore.type"]
        conf["ssl.key.location"] = conf["ssl.certificate.location"] = java.pop("ssl.keystore.location")
    if "sasl.jaas.config" in java:
        login = jaas_login(java.pop("sasl.jaas.config"))
        if login is None:
            return None
        conf["sasl.username"], conf["sasl.password"] = login
    return None if java else conf


def jaas_login(jaas: str) -> tuple[str, str] | None:
    """(username, password) of a ScramLoginModule or PlainLoginModule JAAS
    config with just those two options, else None."""
    login = JAAS_LOGIN.fullmatch(jaas)
    if login is None:
        return None
    options, pos, text = {}, 0, login.group(1).rstrip()
    while pos < len(text):
        option = JAAS_OPTION.match(text, pos)
        if option is None:
            return None
        name, quoted, bare = option.groups()
        options[name] = re.sub(r"\\(.)", r"\1", quoted, flags=re.S) if quoted is not None else bare
        pos = option.end()
    if set(options) != {"username", "password"}:
        return None
    return options["username"], options["password"]
