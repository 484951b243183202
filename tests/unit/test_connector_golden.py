"""The connector generator's output for every flow of every stack file and for
flows with each optional setting switched (tests/support/connector_cases.py),
against a golden file written by the generator when it still read the model's
Flow: given the flow's description it makes exactly the same configs."""
from tests.support.connector_cases import generated
from tests.support.golden import assert_golden


def test_every_flows_connector_configs_from_its_description_match_the_golden_file():
    assert_golden("connector-configs.json", generated(lambda flow: flow.description()))
