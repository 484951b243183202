"""Golden-file comparison. UPDATE_GOLDEN=1 rewrites the files (review the diff).
The files live in tests/unit/golden, beside the unit tests that write most of
them; the preview-diff integration test compares against them too."""
import difflib
import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "unit" / "golden"


def golden_diff(name: str, actual: str) -> str:
    """The unified diff from the golden file to `actual`; "" when they match (or UPDATE_GOLDEN=1)."""
    path = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1" or not path.exists():
        return ""
    expected = path.read_text()
    return "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                        f"golden/{name}", "actual"))


def assert_golden(name: str, actual: str) -> None:
    path = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
    assert path.exists(), f"no golden file {path}; run with UPDATE_GOLDEN=1 to create it"
    # The diff, not the texts: pytest elides the middle of long strings, where the difference usually is
    assert actual == path.read_text(), \
        f"{name} differs from its golden file (UPDATE_GOLDEN=1 to accept):\n{golden_diff(name, actual)}"
