"""A failed `pulumi … --json` names its errors at the end of the test's report."""
import json

from tests.support.pulumi_cli import json_errors


def _event(sequence: int, **event) -> str:
    return json.dumps({"sequence": sequence, **event})


def test_the_errors_of_a_json_run_are_named_with_their_resource():
    stdout = "\n".join([
        _event(1, diagnosticEvent={"urn": "urn:pulumi:s::p::mirrorstack:kafka:KafkaCluster$local:LocalService::"
                                          "secure-edge-broker-0", "message": "edge-broker-0: not ready after 180 s\n",
                                   "severity": "error"}),
        _event(2, diagnosticEvent={"message": "progress\n", "severity": "info"}),
        "not json",
        _event(3, diagnosticEvent={"message": "update failed\n", "severity": "error"}),
        _event(4, summaryEvent={"result": "failed"}),
    ])
    assert json_errors(stdout) == ("--- errors and warnings\nsecure-edge-broker-0: edge-broker-0: not ready after "
                                   "180 s\n: update failed\n")
    assert json_errors(_event(1, summaryEvent={"result": "succeeded"})) == ""
