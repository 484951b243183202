"""Why a preview replaces resources: reads `pulumi preview --json` on stdin and
prints one line per replacement with the inputs that force it (the `--diff`
text marks a replacement but not which changed inputs caused it).

    pulumi preview --json --stack aggregation | python tools/preview_replacements.py
"""
from __future__ import annotations

import json
import sys


def replacements(preview: dict) -> dict[str, list[str]]:
    """Resource name → the inputs that force its replacement."""
    return {s["urn"].rsplit("::", 1)[1]: sorted(s.get("keys") or s.get("replaceReasons") or [])
            for s in preview.get("steps", []) if s.get("op") in ("replace", "create-replacement")}


def main() -> int:
    found = replacements(json.load(sys.stdin))
    for name, keys in sorted(found.items()):
        print(f"REPLACE {name}: forced by a change of {', '.join(keys) or 'an input the provider did not name'}")
    if not found:
        print("no replacements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
