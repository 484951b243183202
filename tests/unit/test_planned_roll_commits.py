"""A planned roll stops a Connect worker with TERM: its source tasks stop, each
waiting up to offset.flush.timeout.ms for the records it sent, and commit those
records' offsets, all within task.shutdown.graceful.timeout.ms (Kafka cancels a
task that takes longer, and a cancelled task skips its final commit: its next
owner copies again everything since the last periodic one). The worker stops
its connectors, then its tasks, each set within that timeout; every platform
must wait longer than both before it kills (local and docker: STOP_GRACE_SECONDS;
kubernetes: the pods' termination grace). benchmarks/roll_duplicates.py measures
what a roll duplicates."""
from __future__ import annotations

import inspect

from mirrorstack.connect.worker import worker_properties
from mirrorstack.model.kubernetes import KubernetesSettings
from mirrorstack.model.spec import load_topology
from mirrorstack.platforms.base import STOP_GRACE_SECONDS
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.platforms.local import launcher
from tests.support import pulumi_mocks

MM2_POLL_MS = 1000  # MirrorSourceTask's consumer.poll.timeout.ms: a task sees the stop after its poll returns
TOPOLOGY = {"clusters": {"us": {}, "eu": {}}, "connect": {"eu": {"kafka": "eu"}}, "flows": [{"source": "us", "target": "eu"}]}


KAFKA_DEFAULTS = {"task.shutdown.graceful.timeout.ms": "5000", "offset.flush.timeout.ms": "5000",
                  "offset.flush.interval.ms": "60000"}


def _ms(props: dict, key: str) -> int:
    return int(props.get(key, KAFKA_DEFAULTS[key]))


def test_a_stopping_task_has_time_to_wait_for_its_records_and_commit_their_offsets():
    props = worker_properties("g", bootstrap_servers="b:9092", host="h", rest_port=8083, kafka_broker_count=1)
    graceful = _ms(props, "task.shutdown.graceful.timeout.ms")
    assert graceful >= MM2_POLL_MS + _ms(props, "offset.flush.timeout.ms") + 2000, props
    assert graceful > _ms(props, "offset.flush.interval.ms"), props  # a stop never outlasts a commit period unseen


def test_every_platform_waits_for_a_workers_connectors_and_then_its_tasks_before_it_kills():
    props = worker_properties("g", bootstrap_servers="b:9092", host="h", rest_port=8083, kafka_broker_count=1)
    needed = 2 * _ms(props, "task.shutdown.graceful.timeout.ms") / 1000
    assert STOP_GRACE_SECONDS > needed
    assert inspect.signature(launcher.stop).parameters["grace_seconds"].default == STOP_GRACE_SECONDS  # local
    assert KubernetesSettings().termination_grace_seconds >= STOP_GRACE_SECONDS


def test_docker_stops_a_replaced_kafka_or_connect_container_with_term_and_the_grace():
    # Without destroy_grace_seconds pulumi-docker removes a replaced container by force (KILL).
    mocks, _ = pulumi_mocks.deploy(lambda: DockerPlatform("rolls"), load_topology({**TOPOLOGY, "platform": "docker"}),
                                   "rolls")
    containers = mocks.of_type("docker:index/container:Container")
    services = {name: inputs for name, inputs in containers.items() if name.endswith(("eu-broker-0", "connect-eu-0"))}
    assert len(services) == 2, sorted(containers)
    for name, inputs in services.items():
        assert inputs.get("destroyGraceSeconds") == inputs.get("stopTimeout") == STOP_GRACE_SECONDS, (name, inputs)


def test_kubernetes_gives_connect_pods_the_termination_grace():
    mocks, _ = pulumi_mocks.deploy(lambda: KubernetesPlatform("rolls"),
                                   load_topology({**TOPOLOGY, "platform": "kubernetes"}), "rolls")
    sets = mocks.of_type("kubernetes:apps/v1:StatefulSet")
    (workers,) = [inputs for name, inputs in sets.items() if "connect-eu" in name]
    assert workers["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= STOP_GRACE_SECONDS
