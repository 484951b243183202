"""The rolling-restart check of the integration tests, on made-up event logs:
it must tell one node at a time from all at once."""
import json

from tests.support.restarts import overlapping_restarts, update_windows

TYPE = "pulumi-python:dynamic/local:LocalService"


def event_log(tmp_path, steps, indent=False):
    lines = []
    for name, begin, end in steps:
        meta = {"op": "update", "urn": f"urn:pulumi:s::p::x${TYPE}::secure-{name}", "type": TYPE}
        lines += [json.dumps({"timestamp": begin, "resourcePreEvent": {"metadata": meta}}),
                  json.dumps({"timestamp": end, "resOutputsEvent": {"metadata": meta}})]
    same = {"op": "same", "urn": f"urn:pulumi:s::p::x${TYPE}::secure-edge-broker-1", "type": TYPE}
    lines.append(json.dumps({"timestamp": 100, "resourcePreEvent": {"metadata": same}}))  # not restarted
    text = "\n".join(lines)
    if indent:  # the CLI may indent its events
        text = "\n".join(json.dumps(json.loads(line), indent=4) for line in lines)
    (tmp_path / "events.jsonl").write_text(text)
    return tmp_path / "events.jsonl"


def test_one_at_a_time_passes_and_its_windows_are_read(tmp_path):
    log = event_log(tmp_path, [("edge-controller", 100, 120), ("edge-broker-0", 120, 140)])
    windows = update_windows(log, ["edge-controller", "edge-broker-0", "edge-broker-1"])
    assert windows == {"edge-controller": (100, 120), "edge-broker-0": (120, 140)}
    assert overlapping_restarts(windows) == []


def test_restarts_at_the_same_time_are_found(tmp_path):
    log = event_log(tmp_path, [("edge-broker-0", 100, 130), ("edge-broker-1", 101, 128), ("edge-controller", 140, 150)],
                    indent=True)
    windows = update_windows(log, ["edge-controller", "edge-broker-0", "edge-broker-1"])
    assert overlapping_restarts(windows) == [("edge-broker-0", "edge-broker-1")]
