import pytest

from mirrorstack.kafka import broker

from mirrorstack.connect import worker as connect
from mirrorstack.platforms.log4j2 import log4j2_properties
from mirrorstack.properties import render_properties
from tests.support.golden import assert_golden

VOTERS = broker.quorum_voters({1: "127.0.0.1:9093"})


def test_quorum_voters_are_sorted_id_at_address():
    assert broker.quorum_voters({3: "h3:1", 1: "h1:1"}) == "1@h1:1,3@h3:1"


def test_controller_properties_golden():
    props = broker.controller_properties(1, host="127.0.0.1", port=9093, voters=VOTERS,
                                         log_dir="/data/controller", broker_count=2)
    assert_golden("controller.properties", render_properties(props))


def test_broker_properties_golden():
    props = broker.broker_properties(2, host="127.0.0.1", port=9092, voters=VOTERS,
                                     log_dir="/data/broker-0", broker_count=2)
    assert_golden("broker.properties", render_properties(props))


@pytest.mark.parametrize("brokers, rf, isr", [(1, "1", "1"), (2, "2", "2"), (5, "3", "2")])
def test_internal_topics_never_ask_for_more_replicas_than_brokers(brokers, rf, isr):
    props = broker.broker_properties(2, host="h", port=1, voters=VOTERS, log_dir="/d", broker_count=brokers)
    assert props["offsets.topic.replication.factor"] == rf
    assert props["transaction.state.log.replication.factor"] == rf
    assert props["share.coordinator.state.topic.replication.factor"] == rf
    assert props["transaction.state.log.min.isr"] == isr
    ctrl = broker.controller_properties(1, host="h", port=1, voters=VOTERS, log_dir="/d", broker_count=brokers)
    assert ctrl["default.replication.factor"] == rf


def test_overrides_win_over_generated_values():
    props = broker.broker_properties(2, host="h", port=1, voters=VOTERS, log_dir="/d", broker_count=1,
                                     overrides={"log.dirs": "/elsewhere", "num.partitions": "6"})
    assert props["log.dirs"] == "/elsewhere"
    assert props["num.partitions"] == "6"


def test_an_external_listener_is_added_beside_the_others_and_resolves_its_host_from_the_environment():
    props = broker.broker_properties(2, host="b.ns.svc", port=9092, voters=VOTERS, log_dir="/d", broker_count=1,
                                     listen_host="0.0.0.0")
    out = broker.with_external_listener(props, advertised="${env:HOST_IP}:31090", listen="0.0.0.0:9094")
    assert out["listeners"] == "PLAINTEXT://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094"
    assert out["advertised.listeners"] == "PLAINTEXT://b.ns.svc:9092,EXTERNAL://${env:HOST_IP}:31090"
    assert out["listener.security.protocol.map"].split(",")[-1] == "EXTERNAL:PLAINTEXT"
    assert out["inter.broker.listener.name"] == "PLAINTEXT"  # brokers keep talking in the cluster
    assert out["config.providers.env.class"].endswith("EnvVarConfigProvider")
    plain = broker.with_external_listener(props, advertised="node-1:31090", listen="0.0.0.0:9094")
    assert "config.providers" not in plain


def test_connect_worker_properties_golden():
    props = connect.worker_properties("connect-central", bootstrap_servers="127.0.0.1:9092",
                                      host="127.0.0.1", rest_port=8083, kafka_broker_count=1)
    assert_golden("connect-worker.properties", render_properties(props))


def test_log4j2_config_golden():
    assert_golden("log4j2.properties", log4j2_properties())




def test_a_rack_comes_with_the_rack_aware_replica_selector_and_keeps_the_file_provider():
    props = broker.broker_properties(2, host="h", port=1, voters=VOTERS, log_dir="/d", broker_count=1,
                                     overrides={"config.providers": "file", "config.providers.file.class": "F"})
    out = broker.with_rack(props, "${env:NODE_ZONE}")
    assert (out["broker.rack"], out["replica.selector.class"]) == ("${env:NODE_ZONE}", broker.RACK_AWARE_SELECTOR)
    assert out["config.providers"] == "file,env" and out["config.providers.file.class"] == "F"
    assert broker.with_env_provider(out) == out  # listed once
    mine = broker.with_rack({**props, "broker.rack": "rack-7"}, "${env:NODE_ZONE}")
    assert mine["broker.rack"] == "rack-7" and mine["config.providers"] == "file"  # a setting wins, no env needed
