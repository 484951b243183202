"""The validation report as a record (mirrorstack.mm2.validation_reports) and
where the job is told to send it (`report_to`): what fits a record, what is
dropped first when it does not, and bad input named by field."""
from __future__ import annotations

import json

import pytest

from mirrorstack.mm2.validation_reports import MAX_REPORT_BYTES, REPORT_TOPIC, read_report_value, report_value
from mirrorstack.spark.config import BadInput, parse_config
from mirrorstack.spark.report_channel import ReportTo
from mirrorstack.validation.job_config import validation_job_config
from tests.support.pulumi_mocks import stack_topology

FLOW = {"name": "a->b", "source_bootstrap": "a:9092", "target_bootstrap": "b:9092", "source_alias": "a",
        "topics": ["orders"]}


def group(lag_rows: int) -> dict:
    return {"topic": "a.orders", "matched": 10, "missing": 0, "samples": {"missing": []},
            "lag": [{"flow": "a->b", "topic": "orders", "partition": p, "expected": 5, "matched": 5, "lag": 0}
                    for p in range(lag_rows)]}


def test_a_report_that_fits_goes_whole():
    report = {"passed": True, "failures": [], "groups": [group(3)]}
    assert read_report_value(report_value(report)) == report


def test_a_report_too_large_loses_per_partition_details_first_and_keeps_its_counts():
    report = {"passed": False, "failures": ["missing 1 > tolerance 0"], "groups": [group(20_000), group(20_000)]}
    assert len(json.dumps(report)) > MAX_REPORT_BYTES
    value = report_value(report)
    assert len(value) <= MAX_REPORT_BYTES
    sent = read_report_value(value)
    assert sent["trimmed"] == ["lag"] and sent["failures"] == report["failures"]
    assert [(g["matched"], g["missing"], "lag" in g, "samples" in g) for g in sent["groups"]] == \
        [(10, 0, False, True)] * 2


def test_report_to_is_read_with_its_default_topic():
    config = parse_config({"flows": [FLOW], "report_to": {"bootstrap": "b:9092", "client": {"security.protocol": "SSL"}}})
    assert config.report_to == ReportTo("b:9092", {"security.protocol": "SSL"}, REPORT_TOPIC)
    assert parse_config({"flows": [FLOW]}).report_to is None


@pytest.mark.parametrize("report_to, said", [
    ({"client": {}}, "report_to.bootstrap: required"),
    ({"bootstrap": "b"}, "report_to.bootstrap: 'b' is not host:port"),
    ({"bootstrap": "b:9092", "topic": "a topic"}, "report_to.topic: 'a topic' is not a Kafka topic name"),
    ({"bootstrap": "b:9092", "partition": 0}, "report_to.partition: unknown field"),
    ({"bootstrap": "b:9092", "client": {"bootstrap.servers": "x:1"}}, "report_to.client.bootstrap.servers: not allowed"),
    ("b:9092", "report_to: must be an object"),
])
def test_a_bad_report_to_is_named(report_to, said):
    with pytest.raises(BadInput) as bad:
        parse_config({"flows": [FLOW], "report_to": report_to})
    assert any(p.startswith(said) for p in bad.value.problems), bad.value.problems


def test_the_stack_sends_its_report_to_the_first_validated_targets_cluster():
    topology = stack_topology("aggregation")
    servers = {alias: f"{alias}.example:9092" for alias in topology.clusters}
    config = validation_job_config(topology, servers, {"central": {"security.protocol": "SSL"}})
    assert topology.validation_reports_to() == topology.validated_flows()[0].target == "central"
    assert config["report_to"] == {"bootstrap": "central.example:9092", "client": {"security.protocol": "SSL"}}
    assert parse_config(config).report_to.bootstrap == "central.example:9092"
