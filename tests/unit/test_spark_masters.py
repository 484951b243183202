"""Where the validation job's Spark runs: the masters the model accepts, the
platforms that run the job in the program (the only ones a cluster master can
serve), what the local platform asks a cluster's executors for, and a master
that does not answer failing the job before any JVM or session starts."""
from __future__ import annotations

import argparse
import socket

import pytest

from mirrorstack.model.capabilities import capabilities, offering
from mirrorstack.model.spec import Topology, Validation
from mirrorstack.spark.masters import MasterUnreachable, master_answers, master_endpoints, on_loopback
from mirrorstack.spark.spark_io import executor_settings

PLATFORMS = ("local", "docker", "kubernetes")


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "spark://127.0.0.1:7077",
                                    "spark://m1.example.com:7077,m2.example.com:7077",
                                    "sc://127.0.0.1:15002", "sc://spark-connect.example.com", "sc://connect:15002/",
                                    "k8s://https://kubernetes.default.svc", "k8s://https://kubernetes.default.svc:443"])
def test_the_masters_the_job_runs_on_are_accepted(master):
    assert Validation(master=master).master == master


def said_of(platform: str, validation: dict) -> str:
    """What the model says of a topology on `platform` with `validation` ("" when it accepts it)."""
    data = {"platform": platform, "clusters": {"a": {}, "b": {}}, "flows": [{"source": "a", "target": "b"}],
            "validation": validation, "images": {"kafka": "r/kafka:1", "spark": "r/spark:1"}}
    try:
        Topology.model_validate(data)
    except ValueError as error:
        return str(error)
    return ""


@pytest.mark.parametrize("master", ["spark://m:7077", "sc://m:15002"])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_cluster_master_only_where_the_job_runs_in_the_program(platform, master):
    said = said_of(platform, {"master": master})
    refused = not capabilities(platform).runs_job_in_program
    assert (f"validation.master: {master}: on " in said) == refused, said
    if refused:
        assert f"use platform {' or '.join(offering('runs_job_in_program'))}" in said


@pytest.mark.parametrize("platform", PLATFORMS)
def test_executor_pods_only_where_the_driver_runs_in_the_cluster(platform):
    said = said_of(platform, {"master": "k8s://https://kubernetes.default.svc", "executor_instances": 3,
                              "executor_memory": "512m"})
    refused = not capabilities(platform).spark_executor_pods
    assert ("executor pods need the job's driver in a cluster; fix: use platform kubernetes" in said) == refused, said
    assert refused == (platform != "kubernetes")


def test_a_cluster_is_asked_only_what_is_set_and_local_is_asked_nothing():
    assert Validation().standalone_executors is None  # a stack deployed before sees no new input
    assert Validation(master="sc://m:15002").standalone_executors is None  # a Spark Connect server sizes its own
    assert Validation(master="spark://m:7077").standalone_executors == {"executor_wait_seconds": 60}
    asked = Validation(master="spark://m:7077", executor_memory="2g", executor_cores=1, max_cores=4,
                       executor_wait_seconds=30).standalone_executors
    assert asked == {"executor_memory": "2g", "executor_cores": 1, "max_cores": 4, "executor_wait_seconds": 30}
    args = argparse.Namespace(executor_memory="2g", executor_cores=1, max_cores=None)
    assert executor_settings(args) == {"spark.executor.memory": "2g", "spark.executor.cores": "1"}


def test_the_addresses_of_a_master():
    assert master_endpoints("spark://m1:7077,10.0.0.2:7078") == [("m1", 7077), ("10.0.0.2", 7078)]
    assert master_endpoints("sc://connect") == [("connect", 15002)]  # Spark Connect's default port
    assert master_endpoints("sc://connect:443/") == [("connect", 443)]


def test_the_driver_binds_loopback_only_for_a_master_on_this_machine():
    assert on_loopback("spark://127.0.0.1:7077") and on_loopback("spark://localhost:7077,127.0.0.1:7078")
    assert not on_loopback("spark://127.0.0.1:7077,spark-master.example.com:7077")


@pytest.mark.parametrize("scheme", ["spark", "sc"])
def test_a_master_that_does_not_answer_fails_before_the_job_naming_the_field(scheme):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(MasterUnreachable, match=rf"validation.master \(--master\) {scheme}://127.0.0.1:{port}: nothing "
                                                rf"answers at 127.0.0.1:{port} .*; fix: start it, or correct validation.master"):
        master_answers(f"{scheme}://127.0.0.1:{port}")
    with socket.socket() as listening:  # one of several answering is enough
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        master_answers(f"spark://127.0.0.1:{port},127.0.0.1:{listening.getsockname()[1]}")
        master_answers(f"sc://127.0.0.1:{listening.getsockname()[1]}")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_job_to_submit_yourself_only_where_up_reaches_the_clusters(platform):
    said = said_of(platform, {"submit": "yourself"})
    refused = not capabilities(platform).runs_job_in_program
    assert ("validation.submit: `up` reads the report of a job you submit from the flows' clusters" in said) == \
        refused, said
