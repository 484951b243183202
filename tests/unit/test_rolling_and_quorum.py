"""Rolling restarts and controller quorums without Kafka: the model rule, the
graph's one-node-at-a-time chain on every platform (Pulumi mocks), and the
local health checks' pieces."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest

from mirrorstack.connect import readiness
from mirrorstack.model.spec import load_topology
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.descriptions import NotReady
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.platforms.local import health, launcher
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.platforms.local.service import LocalServiceProvider
from tests.support import pulumi_mocks
from tests.support.http_stand_in import serve

STACK = "rolling"
TOPOLOGY = {
    "platform": "local",
    "clusters": {"us": {"brokers": 3, "controllers": 3}, "eu": {}},
    "connect": {"eu": {"kafka": "eu", "workers": 2}},
    "flows": [{"source": "us", "target": "eu"}],
    "monitoring": {},
}
CHAIN = ["us-controller", "us-controller-1", "us-controller-2", "us-broker-0", "us-broker-1", "us-broker-2"]


def _topology(**cluster):
    return {**TOPOLOGY, "clusters": {**TOPOLOGY["clusters"], "us": {"brokers": 3, **cluster}}}


@pytest.mark.parametrize("count", [1, 3, 5])
def test_quorum_sizes_that_keep_a_majority_are_accepted(count):
    assert load_topology(_topology(controllers=count)).clusters["us"].controllers == count


@pytest.mark.parametrize("count", [0, 2, 4, 7])
def test_other_controller_counts_are_refused_naming_the_field_and_the_fix(count):
    with pytest.raises(ValueError, match=rf"clusters\.us\.controllers: {count} is not a quorum size; fix: use 1, 3 or 5"):
        load_topology(_topology(controllers=count))


def test_an_external_cluster_has_no_controllers_to_set():
    topology = {**TOPOLOGY, "clusters": {"us": {"external": {"bootstrap_servers": "k:9092"}, "controllers": 3},
                                         "eu": {}}}
    with pytest.raises(ValueError, match=r"clusters\.us\.controllers: controllers only apply to deployed clusters"):
        load_topology(topology)


def _deploy(make_platform, topology=None):
    return pulumi_mocks.deploy(make_platform, load_topology(topology or TOPOLOGY), STACK)


NODE_TYPES = ("pulumi-python:dynamic/local:LocalService", "docker:index/container:Container", "kubernetes:apps/v1:StatefulSet")


ROLLOUT_TYPE = "pulumi-python:dynamic/kubernetes:StatefulSetRollout"


def _depends(mocks, name: str) -> set[str]:
    """The services (same kind of resource) that service `name` depends on; on
    kubernetes, through their rollout (the StatefulSet rolled and Ready), which
    in turn depends on its own StatefulSet."""
    (key,) = [k for k in mocks.dependencies if k[1] == f"{STACK}-{name}" and k[0].startswith(NODE_TYPES)]
    found = {dep.removeprefix(f"{STACK}-") for typ, dep in mocks.dependencies[key] if typ == key[0]}
    for typ, dep in mocks.dependencies[key]:
        if typ == ROLLOUT_TYPE:
            service = dep.removeprefix(f"{STACK}-").removesuffix("-rollout")
            assert (key[0], f"{STACK}-{service}") in mocks.dependencies[(typ, dep)], f"{dep} waits for its StatefulSet"
            found.add(service)
    return found


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local")
    return _deploy(lambda: LocalPlatform(STACK, str(folder)))


@pytest.mark.parametrize("platform", ["local", "docker", "kubernetes"])
def test_a_clusters_nodes_and_a_groups_workers_are_chained_one_after_another(platform, local_run, tmp_path):
    mocks, _ = local_run if platform == "local" else _deploy(
        {"docker": lambda: DockerPlatform(STACK), "kubernetes": lambda: KubernetesPlatform(STACK)}[platform],
        {**{k: v for k, v in TOPOLOGY.items() if k != "monitoring"}, "platform": platform})
    for before, node in zip(CHAIN, CHAIN[1:]):
        assert before in _depends(mocks, node), (node, _depends(mocks, node))
    assert not set(CHAIN) & _depends(mocks, "us-controller")
    # each node waits only for the one before it (the engine then runs them one at a time)
    assert not {"us-controller", "us-controller-1"} & _depends(mocks, "us-broker-0")
    assert "connect-eu-0" in _depends(mocks, "connect-eu-1")
    assert "eu-broker-0" in _depends(mocks, "connect-eu-0")


def test_extra_controllers_get_ids_beside_the_brokers_and_every_node_lists_all_voters(local_run):
    mocks, built = local_run
    services = mocks.of_type(pulumi_mocks.DYNAMIC)
    props = {name: dict(line.split("=", 1) for line in services[name]["files"]["server.properties"].splitlines()
                        if "=" in line and not line.startswith("#")) for name in CHAIN}
    assert [props[n]["node.id"] for n in CHAIN] == ["1", "1001", "1002", "2", "3", "4"]
    voters = props["us-controller"]["controller.quorum.voters"]
    assert [v.split("@")[0] for v in voters.split(",")] == ["1", "1001", "1002"]
    assert {p["controller.quorum.voters"] for p in props.values()} == {voters}
    assert services["eu-controller"]["health"]["kind"] == "tcp"  # a single controller: as before
    assert services["us-controller-1"]["health"]["kind"] == "controller"
    assert services["us-broker-2"]["health"]["node_id"] == "4"
    roles = [t.labels["role"] for t in built["topology"].clusters["us"].scrape_targets]
    assert roles == ["controller"] * 3 + ["broker"] * 3


def test_containers_probe_a_quorum_controller_by_its_listener():
    from mirrorstack.platforms.containers import probe_command
    spec = {"kind": "controller", "host": "c1", "port": "9093", "node_id": "1001", "quorum": "c0:9093,c1:9093"}
    assert probe_command(spec, lambda h, p: (h, p)) == ["bash", "-c", "exec 3<>/dev/tcp/c1/9093"]


def _metadata(brokers, partitions):
    """A confluent-kafka ClusterMetadata look-alike: partitions {(topic, id): (replicas, isrs[, leader])}
    (the leader: the first ISR member unless given)."""
    topics = {}
    for (topic, pid), (replicas, isrs, *leader) in partitions.items():
        topics.setdefault(topic, SimpleNamespace(topic=topic, partitions={}))
        topics[topic].partitions[pid] = SimpleNamespace(id=pid, replicas=replicas, isrs=isrs,
                                                        leader=leader[0] if leader else (isrs or [-1])[0])
    return SimpleNamespace(brokers={b: None for b in brokers}, topics=topics)


def test_under_replicated_counts_only_replicas_on_live_brokers():
    meta = _metadata([2, 3, 4], {("orders", 0): ([2, 3, 4], [2, 3]), ("orders", 1): ([3, 4, 2], [3, 4, 2]),
                                 ("audit", 0): ([4, 2, 3], [4])})
    assert health.under_replicated(meta) == ["audit-0", "orders-0"]
    # broker 4 down (not restarted yet): waiting for it would never end
    meta = _metadata([2, 3], {("orders", 0): ([2, 3, 4], [2, 3])})
    assert health.under_replicated(meta) == []


def test_a_partition_whose_isr_has_a_live_replica_but_no_leader_is_waited_for():
    # a one-broker cluster after its broker's restart: ISR [2], no leader elected yet
    meta = _metadata([2], {("payments", 0): ([2], [2], -1), ("payments", 1): ([2], [2])})
    assert health.leaderless(meta) == ["payments-0"]
    # only a dead broker could lead it (unclean election off): waiting would never end
    meta = _metadata([3], {("orders", 0): ([2, 3], [2], -1)})
    assert health.leaderless(meta) == []


def test_connect_waits_for_every_connector_and_task_to_run_or_be_deliberately_stopped():
    expanded = {
        "a": {"status": {"connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"},
                                                                     {"id": 1, "state": "UNASSIGNED"}]}},
        "b": {"status": {"connector": {"state": "STOPPED"}, "tasks": []}},
        "c": {"status": {"connector": {"state": "FAILED"}, "tasks": []}},
        "d": {"status": {"connector": {"state": "PAUSED"}, "tasks": [{"id": 0, "state": "PAUSED"}]}},
    }
    assert readiness.not_running(expanded) == ["a/1: UNASSIGNED", "c: FAILED"]
    assert readiness.not_running({}) == []  # a new group without connectors


def _connect_stand_in(health: tuple[int, str]):
    """Connect's REST API with no connectors: `/health` answers `health`."""
    plugins = [{"class": c, "type": "source", "version": "4.3.1"} for c in readiness.MIRROR_CONNECTOR_CLASSES]
    return serve(lambda path: health if path == "/health" else (
        200, json.dumps(plugins) if path.startswith("/connector-plugins") else "{}"))[0]


def test_a_connect_worker_still_reading_its_internal_topics_is_not_ready():
    """A restarted worker whose herder has not read the group's internal topics lists no
    connectors at all, as a new group does: seen after a roll of its Kafka cluster (2026-11-29),
    the check passed and `up` then waited 90 s on a worker that never finished starting.
    Its /health tells the two apart, and the wait says what it waits for."""
    starting = _connect_stand_in((503, json.dumps({
        "status": "starting", "message": "Worker is still starting up. Current worker action: initializing and "
                                         "reading to the end of internal topics"})))
    healthy = _connect_stand_in((200, json.dumps({"status": "healthy", "message": "Worker has completed startup"})))
    try:
        with pytest.raises(NotReady, match=r"the worker is starting: Worker is still starting up.*internal topics"
                                           r".*kafka-transactions.sh describe-producers"):
            readiness.connect_ready(f"http://127.0.0.1:{starting.server_address[1]}")
        assert readiness.connect_ready(f"http://127.0.0.1:{healthy.server_address[1]}")  # no connectors yet
    finally:
        starting.shutdown()
        healthy.shutdown()


QUORUM_TABLE = """NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t
1     \tAAAAAAAAAAAAAAAAAAAAAA\t30          \t0  \t1795594409069     \t1795594409069        \tLeader  \t
1001  \tAAAAAAAAAAAAAAAAAAAAAA\t25          \t5  \t1795594409000     \t1795594408000        \tFollower\t
"""


def test_the_quorum_tools_table_is_read_per_node():
    assert health.quorum_row(QUORUM_TABLE, 1001) == {
        "NodeId": "1001", "DirectoryId": "AAAAAAAAAAAAAAAAAAAAAA", "LogEndOffset": "25", "Lag": "5",
        "LastFetchTimestamp": "1795594409000", "LastCaughtUpTimestamp": "1795594408000", "Status": "Follower"}
    assert health.quorum_row(QUORUM_TABLE, 1002) is None


def test_a_controller_without_enough_voters_listening_for_a_majority_only_needs_to_listen():
    with socket.socket() as own, socket.socket() as closed:
        own.bind(("127.0.0.1", 0)), own.listen()
        closed.bind(("127.0.0.1", 0))  # bound, not listening: refused
        port, other = own.getsockname()[1], closed.getsockname()[1]
        spec = {"kind": "controller", "host": "127.0.0.1", "port": str(port), "node_id": "1",
                "quorum": f"127.0.0.1:{port},127.0.0.1:{other},127.0.0.1:{other + 1 if other < 65535 else 1}"}
        assert health.check(spec, since_ms=0) is True  # a new cluster's first controller: no quorum yet


def test_waiting_prints_what_the_check_waits_for_to_stderr(tmp_path, capsys):
    handle = launcher.start("sleeper", [sys.executable, "-c", "import time; time.sleep(30)"],
                            log_file=tmp_path / "sleeper.log")
    calls = []

    def check():
        calls.append(1)
        if len(calls) < 8:
            raise health.NotReady("back in the cluster; waiting for 2 under-replicated partitions (orders-0, orders-1)")
        return True
    try:
        launcher.wait_until_healthy(handle, check, timeout=20, what="us-broker-1", interval=0.1, progress_every=0.3)
    finally:
        launcher.stop(handle)
    assert ("mirrorstack: us-broker-1: back in the cluster; waiting for 2 under-replicated partitions "
            "(orders-0, orders-1)") in capsys.readouterr().err


def test_a_failed_roll_names_the_last_reason(tmp_path):
    handle = launcher.start("sleeper", [sys.executable, "-c", "import time; time.sleep(30)"],
                            log_file=tmp_path / "sleeper.log")

    def check():
        raise health.NotReady("answers; not yet registered in the cluster (node id 3)")
    try:
        with pytest.raises(launcher.ServiceFailed, match=r"us-broker-1 .*not healthy after 1s.*node id 3"):
            launcher.wait_until_healthy(handle, check, timeout=1, what="us-broker-1", interval=0.1)
    finally:
        launcher.stop(handle)


def test_a_stricter_health_check_alone_restarts_no_deployed_service(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stat = open(f"/proc/{proc.pid}/stat").read()
        start_time = stat[stat.rindex(")") + 2:].split()[19]
        olds = {"name": "us-broker-0", "workdir": str(tmp_path), "files": {"a": "1"}, "argv": ["x"], "prepare": [],
                "health": {"kind": "kafka", "bootstrap": "h:1", "brokers": "1"}, "timeout_seconds": "180",
                "pid": str(proc.pid), "start_time": start_time, "log_file": str(tmp_path / "l")}
        news = {**olds, "health": {**olds["health"], "node_id": "2"}}
        assert LocalServiceProvider().diff("id", olds, news).changes is False
        assert LocalServiceProvider().diff("id", olds, {**news, "files": {"a": "2"}}).changes is True
    finally:
        proc.kill(), proc.wait()


def test_a_deployed_clusters_controller_count_cannot_change():
    from mirrorstack.stack_history import controller_change_problem
    last = {"clusters": {"us": "h:1", "eu": "h:2"}, "controllers": {"us": 3, "eu": 1}}
    assert controller_change_problem("us", 3, last) is None
    assert controller_change_problem("us", 3, {**last, "controllers": {"us": 3.0}}) is None  # as the engine returns it
    assert "runs 3 controller(s), not 5" in controller_change_problem("us", 5, {**last, "controllers": {"us": 3.0}})
    assert controller_change_problem("new", 3, last) is None  # not deployed yet
    assert controller_change_problem("us", 1, None) is None  # a new stack
    problem = controller_change_problem("us", 1, last)
    assert problem.startswith("clusters.us.controllers: the deployed cluster runs 3 controller(s), not 1")
    assert "fix: set it back to 3" in problem
    # deployed before the `controllers` output existed: it runs one
    assert "runs 1 controller(s), not 3" in controller_change_problem("us", 3, {"clusters": {"us": "h:1"}})


def test_tls_controllers_of_a_quorum_are_asked_with_their_own_certificate(tmp_path):
    topology = load_topology(_topology(controllers=3, security={"protocol": "SSL"}))
    mocks, _ = pulumi_mocks.deploy(lambda: LocalPlatform(STACK, str(tmp_path)), topology, STACK, pulumi_mocks.RecordingMocks())
    controller = mocks.of_type(pulumi_mocks.DYNAMIC)["us-controller-2"]
    folder = tmp_path.resolve() / "us-controller-2"
    assert controller["health"]["command_config"] == f"{folder}/admin.properties"
    admin = controller["files"]["admin.properties"]
    assert "security.protocol=SSL" in admin and f"{folder}/secrets/server.pem" in admin
