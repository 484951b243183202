"""The rename check reads a flow's description and clients from its source connector's config."""
from mirrorstack.plan import rename_check
from mirrorstack.mirror.connectors import mirror_connector_configs
from mirrorstack.model.spec import load_topology


def test_the_spec_and_clients_come_from_the_source_connectors_config():
    topology = load_topology({"clusters": {"us": {"brokers": 1}, "central": {"brokers": 1}},
                              "flows": [{"source": "us", "target": "central", "topics": ["orders", "clicks.*"],
                                         "replication_policy": "identity", "separator": "_"}]})
    flow = topology.flows[0].description()
    config = mirror_connector_configs(flow, replication_factor=1, source_bootstrap="us:9092",
                                      target_bootstrap="central:9092",
                                      source_client={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    config = config[flow.connector_name("source")]
    spec = rename_check._flow(config)
    assert (spec.source, spec.target, list(spec.topics), spec.replication_policy, spec.separator) == \
        ("us", "central", ["orders", "clicks.*"], "identity", "_")
    assert "__.*" in spec.topics_exclude
    assert rename_check._client_settings(config, "source") == {"security.protocol": "SASL_SSL",
                                                               "sasl.mechanism": "PLAIN"}
