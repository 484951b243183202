"""One meaning of a flow (components/mm2/flows.py): the model rules, the replication plan
and the validation job give the same answer on which source topics a flow
copies and under which remote name, for each row of a table of topics,
regexes and policies. Each side is asked the way it asks in production: the
model through its rules, the plan through a stack's flow spec, the job through
the input the control plane generates for it, parsed by the job."""
from __future__ import annotations

import pytest

from mirrorstack.model.rules import _replicates
from mirrorstack.model.spec import load_topology
from mirrorstack.plan.replication_plan import remote_name, selected_topics
from mirrorstack.validation.job_config import validation_job_config
from mirrorstack.spark.config import parse_config

# The topics each flow is asked about: plain, look-alikes of internal topics
# under each separator, Kafka's and Connect's own, heartbeats, and names that
# came from the target (cycles).
TOPICS = [
    "orders", "orders.v2", "orders-v2", "orders_v2", "payments", "tmp.scratch",
    "orders.internal", "orders-internal", "orders_internal", "x.replica", "__consumer_offsets", ".hidden",
    "connect-configs", "connect-cluster-offsets", "mirrorstack-core-status",
    "us.checkpoints.internal", "us_checkpoints_internal", "us-checkpoints-internal",
    "mm2-offset-syncs.us.internal", "mm2-offset-syncs_us_internal", "mm2-offset-syncs-us-internal",
    "heartbeats", "eu.heartbeats", "eu_heartbeats", "central.heartbeats",
    "central.orders", "central_orders", "central-orders", "eu.orders", "eu_orders",
]

# (topics regexes, topics_exclude) of a flow us -> central.
SELECTIONS = {
    "everything": ([".*"], []),
    "orders family": (["orders.*"], []),
    "orders but not v2": (["orders.*"], [r"orders[._-]v2"]),
    "literals": (["orders", "payments", "heartbeats"], []),
    "remote names": ([r"(eu|central)[._-].*"], []),
    "everything but tmp": ([".*"], [r"tmp\..*"]),
}


def _flow(policy: str, separator: str, topics: list[str], excludes: list[str]):
    topology = load_topology({
        "clusters": {"us": {}, "central": {}},
        "flows": [{"source": "us", "target": "central", "topics": topics, "topics_exclude": excludes,
                   "replication_policy": policy, "separator": separator}],
        "validation": {}})
    (flow,) = topology.flows
    return topology, flow


@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("separator", [".", "_", "-"])
@pytest.mark.parametrize("policy", ["default", "identity"])
def test_model_plan_and_job_agree_on_what_a_flow_copies_and_the_names(policy, separator, selection):
    topology, flow = _flow(policy, separator, *SELECTIONS[selection])
    spec = flow.description()
    (job_flow,) = parse_config(validation_job_config(topology, {"us": "us:9092", "central": "central:9092"})).flows
    disagreements = []
    for topic in TOPICS:
        plan = topic in selected_topics(spec, [topic])
        model = _replicates(flow, topic)
        job = job_flow.selection.selects(topic)
        # The job validates the users' records: MM2's own heartbeats are copied, never checked.
        job_checks = job_flow.selects(topic)
        if not plan == model == job or job_checks != (plan and not job_flow.mm2.is_heartbeats_topic(topic)):
            disagreements.append((topic, {"plan": plan, "model": model, "job": job, "job checks": job_checks}))
        elif plan:
            names = {remote_name(spec, topic), topology.remote_topic(flow, topic), job_flow.remote_topic(topic)}
            if len(names) != 1:
                disagreements.append((topic, names))
    assert disagreements == []


def test_the_table_covers_both_answers_and_every_kind_of_topic():
    """A table where every side says no proves nothing: each kind is copied somewhere and left out somewhere."""
    _, flow = _flow("default", ".", [".*"], [])
    spec = flow.description()
    copied = set(selected_topics(spec, TOPICS))
    assert {"orders", "orders_internal", "heartbeats", "eu.heartbeats", "eu.orders"} <= copied
    assert not copied & {"orders.internal", "__consumer_offsets", "connect-configs", "mirrorstack-core-status",
                         "us.checkpoints.internal", "mm2-offset-syncs.us.internal", "central.orders",
                         "central.heartbeats"}
    _, identity = _flow("identity", "_", [".*"], [])
    assert "central_orders" in selected_topics(identity.description(), TOPICS)  # identity: no cycle to see by name
    assert "mm2-offset-syncs_us_internal" not in selected_topics(identity.description(), TOPICS)
