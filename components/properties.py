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
