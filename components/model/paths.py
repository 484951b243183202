"""The names the topology model and its rules share: what an alias may be, what
a config-provider reference looks like, and how a field's location is written
in a message. A leaf module: the model and its rules both import it."""
from __future__ import annotations

import json
import re

# Aliases prefix remote topics (`us.orders`) and MM2 splits those on the separator.
ALIAS = re.compile(r"[A-Za-z0-9_-]+")
# A reference to a config provider the Connect workers have: `${provider:[path:]key}`.
PROVIDER_REFERENCE = re.compile(r"\$\{[A-Za-z0-9_.-]+:[^}]*\}")


def field_path(loc: tuple) -> str:
    """('flows', 1, 'target') -> flows[1].target; keys with dots are quoted."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif ALIAS.fullmatch(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out or "mirrorstack:topology"
