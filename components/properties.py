"""Java .properties rendering, escaped the way java.util.Properties reads it."""
from __future__ import annotations

from collections.abc import Mapping

_KEY_SPECIALS = {" ": "\\ ", ":": "\\:", "=": "\\="}
_COMMON = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch in _COMMON:
            out.append(_COMMON[ch])
        elif is_key and ch in _KEY_SPECIALS:
            out.append(_KEY_SPECIALS[ch])
        elif ch in "#!" and i == 0:
            out.append("\\" + ch)
        elif ch == " " and i == 0:
            out.append("\\ ")  # leading blanks of a value are otherwise dropped
        elif ord(ch) > 0x7E:  # Kafka loads properties as ISO-8859-1: escape as UTF-16 units
            units = ch.encode("utf-16-be")
            out.extend(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
        else:
            out.append(ch)
    return "".join(out)


def render_properties(values: Mapping[str, str], header: str | None = None) -> str:
    """Render key=value lines in the given order. Values must already be strings,
    so a float or bool never sneaks into a config as `1.0` or `True`."""
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    for key, value in values.items():
        if not isinstance(value, str):
            raise TypeError(f"property {key!r} must be a string, got {type(value).__name__}")
        lines.append(f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}")
    return "\n".join(lines) + "\n"


ENV_PROVIDER_CLASS = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"


def with_config_provider(props: Mapping[str, str], name: str, class_name: str) -> dict[str, str]:
    """`props` with one more Kafka config provider (`${name:...}` references),
    keeping the ones already listed in `config.providers`."""
    listed = [p for p in props.get("config.providers", "").split(",") if p]
    return {**props, "config.providers": ",".join(dict.fromkeys([*listed, name])),
            f"config.providers.{name}.class": class_name}


def with_env_provider(props: Mapping[str, str]) -> dict[str, str]:
    """`${env:NAME}` resolved from the process's environment when Kafka reads the config
    (a value known only at start: a pod's node address or zone)."""
    return with_config_provider(props, "env", ENV_PROVIDER_CLASS)
