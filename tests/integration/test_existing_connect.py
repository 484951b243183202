"""Replication on infrastructure a team already runs, through the real engine:
Kafka clusters and a Connect group (2 workers, HTTPS, REST basic auth) started
here outside any stack; the `existing-connect` stack takes over connectors
made by hand with mm2.sh (one flow keeps their names, one moves to
mirrorstack's), updates one flow, survives a dead worker, and `destroy` leaves
the workers and a foreign connector alone. Then the ways `up` must refuse, and
two stacks whose Connect clusters share one Kafka cluster."""
from __future__ import annotations

import json
from functools import partial

import pytest

from mirrorstack.platforms.local import launcher
from tests.support import connect_rest
from tests.support.external_connect import basic_auth, put_connectors, ready_check, rest_tls, seed_connectors
from tests.support.kafka_clients import consume, create_topic, produce
from tests.support.services import ConnectGroup, KafkaCluster, _parallel
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

USER, PASSWORD = "mirrorstack", "rest-pass-for-tests"
N, M, K = 1_000, 500, 300
FOREIGN = "team-b-heartbeats"  # a connector another team runs on the same workers


class Site:
    """What the team runs: us, uk, central, and Connect group `dc` on central."""

    def __init__(self, base):
        self.kafka = {a: KafkaCluster(a, base / a) for a in ("us", "uk", "central")}
        tls, self.ca_file = rest_tls(base / "dc-rest")
        auth, jvm_props = basic_auth(base / "dc-rest", {USER: PASSWORD, "admin": "admin-pass"})
        self.auth = (USER, PASSWORD)
        # The team's workers hand a lost worker's tasks to the others after 10 s (Kafka's default waits 5 min).
        self.dc = ConnectGroup("dc", base / "dc", self.kafka["central"], workers=2, scheme="https",
                               overrides={**tls, **auth, "scheduled.rebalance.max.delay.ms": "10000"},
                               ready=ready_check(self.ca_file, self.auth))
        self.dc.system_properties = jvm_props

    def start(self):
        _parallel(k.start for k in self.kafka.values())
        self.dc.start()
        return self

    def stop(self):
        self.dc.stop()
        _parallel(k.stop for k in self.kafka.values())

    def connectors(self, url: str | None = None) -> list[str]:
        return sorted(self._get("/connectors", url))

    def config(self, name: str) -> dict:
        return self._get(f"/connectors/{name}/config")

    def _get(self, path: str, url: str | None = None):
        url = url or next(u for u, h in zip(self.dc.rest_urls, self.dc.handles) if launcher.is_alive(h))
        return connect_rest.read(f"{url}{path}", verify=self.ca_file, auth=self.auth)

    def servers(self, alias: str) -> str:
        return self.kafka[alias].bootstrap_servers


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = Site(tmp_path_factory.mktemp("site"))
    try:
        yield site.start()
    finally:
        site.stop()


def _existing_connect_stack(project, site: Site, urls: list[str], password: str = PASSWORD) -> None:
    """Point the example stack at the site, as its comments say a user does (what
    one `pulumi config set --path` each would set, in one `config set-all`)."""
    values = []
    for alias in ("us", "uk", "central"):
        cluster = f"mirrorstack:topology.clusters.{alias}"
        values += ["--plaintext", f"{cluster}.external.bootstrap_servers={site.servers(alias)}",
                   "--plaintext", f"{cluster}.brokers=1"]
    for i, url in enumerate(urls):
        values += ["--plaintext", f"mirrorstack:topology.connect.dc.external.urls[{i}]={url}"]
    values += ["--plaintext", f"mirrorstack:topology.connect.dc.external.ca_file={site.ca_file}",
               "--secret", f"mirrorstack:connectSecrets.dc.password={password}"]
    project.run("config", "set-all", "--path", *values)


def _counts(report: dict, flow: str) -> tuple:
    c = report["flows"][flow]
    return c["source_records"], c["matched"], c["missing"], c["duplicates"]


def test_existing_connect_takes_over_hand_made_connectors(site, tmp_path):
    url = site.dc.rest_urls[0]
    # mm2.sh's connectors for both regions, and another team's connector
    for region in ("us", "uk"):
        put_connectors(url, seed_connectors(region, "central", site.servers(region), site.servers("central")),
                       ca_file=site.ca_file, auth=site.auth)
    put_connectors(url, {FOREIGN: {**seed_connectors("uk", "central", site.servers("uk"), site.servers("central"))[
        "mm2-hbc-uk"]}}, ca_file=site.ca_file, auth=site.auth)
    sent = []
    for region in ("us", "uk"):
        create_topic(site.servers(region), "orders", 2, 1)
        sent += produce(site.servers(region), "orders", N, prefix=f"{region}-n")
    assert len(consume(site.servers("central"), "orders", 2 * N, timeout=300)) == 2 * N  # the seed replicates
    for region in ("us", "uk"):
        sent += produce(site.servers(region), "orders", M, prefix=f"{region}-m")

    with stack_project("existing-connect", tmp_path) as project:
        _existing_connect_stack(project, site, site.dc.rest_urls)
        preview = project.run("preview").stdout
        assert "mm2-msc-us: exists (RUNNING, made outside mirrorstack); up adopts it" in preview, preview
        assert ("mm2-msc-uk: exists (RUNNING); up stops it, copies its source offsets to "
                "uk->central.MirrorSourceConnector") in preview, preview
        # External clusters: no ACL is created there; the preview lists what their owners grant.
        assert "ACLs needed on us (external: mirrorstack creates none" in preview, preview
        assert "allow User:ANONYMOUS READ on TOPIC orders (LITERAL) for flow us->central: source read" in preview
        assert "allow User:ANONYMOUS WRITE on TOPIC orders (LITERAL) for flow uk->central: target write" \
            in preview, preview  # identity: the same name on the target
        up = project.run("up", "--yes", "--skip-preview", timeout=900)
        assert "source offsets carried over" in up.stdout + up.stderr
        assert site.connectors() == sorted([
            "mm2-msc-us", "mm2-cpc-us", "mm2-hbc-us", FOREIGN, "uk->central.MirrorCheckpointConnector",
            "uk->central.MirrorHeartbeatConnector", "uk->central.MirrorSourceConnector"])
        assert site.config("mm2-msc-us")["mirrorstack.stack"] == "existing-connect"  # adopted: now the stack's
        report = project.outputs()["validation"]
        assert report["passed"] is True, report
        for flow in ("us->central", "uk->central"):
            assert _counts(report, flow) == (N + M, N + M, 0, 0), (flow, report["flows"][flow])

        # An update of one flow changes only that flow's connectors.
        uk_before = {n: site.config(n) for n in site.connectors() if n.startswith("uk->")}
        project.run("config", "set", "--path", "mirrorstack:topology.flows[0].tasks_max", "1")
        steps = json.loads(project.run("preview", "--json").stdout)["steps"]
        assert [s["urn"].rsplit("::", 1)[1] for s in steps if s["op"] == "update"] == [
            "existing-connect-us->central-connectors"]
        project.run("up", "--yes", "--skip-preview", timeout=600)
        assert site.config("mm2-msc-us")["tasks.max"] == "1"
        assert {n: site.config(n) for n in uk_before} == uk_before

        # One worker down (the first URL): up goes on through the other.
        launcher.stop(site.dc.handles[0])
        project.run("config", "set", "--path", "mirrorstack:topology.flows[1].restart_trigger", "worker-0-down")
        project.run("up", "--yes", "--skip-preview", timeout=600)
        for region in ("us", "uk"):
            sent += produce(site.servers(region), "orders", K, prefix=f"{region}-k")
        project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=after-worker-down",
                    timeout=900)
        report = project.outputs()["validation"]
        for flow in ("us->central", "uk->central"):
            assert _counts(report, flow) == (N + M + K, N + M + K, 0, 0), (flow, report["flows"][flow])

        project.run("destroy", "--yes", "--skip-preview", timeout=600)
        assert launcher.is_alive(site.dc.handles[1])  # the workers are not the stack's
        assert site.connectors() == [FOREIGN]


def _one_flow(site: Site, **connect) -> dict:
    return {"platform": "local",
            "clusters": {a: {"brokers": 1, "external": {"bootstrap_servers": site.servers(a)}} for a in ("us", "central")},
            "connect": {"dc": {"kafka": "central", "external": connect}},
            "flows": [{"source": "us", "target": "central", "connect": "dc", "topics": ["refused"]}]}


def _refused_up(folder, topology: dict, password: str | None):
    """`up` of a stack of its own (state, folder, ports) with `topology`: what the CLI said."""
    with stack_project("existing-connect", folder, topology) as p:
        if password:
            p.run("config", "set", "--secret", "--path", "mirrorstack:connectSecrets.dc.password", password)
        return p.run("up", "--yes", "--skip-preview", check=False, timeout=300)


def test_up_refuses_what_the_workers_cannot_do(site, tmp_path):
    """Each case is a stack of its own; they run at once (each up only talks to
    its workers and fails before anything is made), the one on the workers
    without the mirror plugins once those run."""
    bare = ConnectGroup("bare", tmp_path / "bare", site.kafka["central"], without_jars=("connect-mirror",),
                        ready=ready_check(None, None, mirror=False))
    try:
        dead = "http://127.0.0.1:9"  # nothing listens on the discard port here
        cases = {
            "wrong password": ({"urls": site.dc.rest_urls[1:], "username": USER, "ca_file": site.ca_file},
                               "wrong-password", "refused the credentials (401 Unauthorized)"),
            "unreachable": ({"urls": [dead]}, None, f"Kafka Connect at {dead} is unreachable"),
            "no mirror plugins": ({"urls": bare.rest_urls}, None,
                                  f"Kafka Connect at {bare.rest_url} has no MirrorSourceConnector, "
                                  "MirrorCheckpointConnector, MirrorHeartbeatConnector plugin"),
        }
        # exactly-once needs a worker setting the stack cannot see: the workers' answer decides
        eos = _one_flow(site, urls=site.dc.rest_urls[1:], username=USER, ca_file=site.ca_file)
        eos["flows"][0]["exactly_once"] = True

        def run(case: str):
            connect, password, _ = cases[case]
            if case == "no mirror plugins":
                bare.start()
            return _refused_up(tmp_path / case.replace(" ", "-"), _one_flow(site, **connect), password)

        names = list(cases)
        *done_cases, done_eos = _parallel([*(partial(run, case) for case in names),
                                           partial(_refused_up, tmp_path / "eos", eos, PASSWORD)])
        for case, done in zip(names, done_cases):
            message = cases[case][2]
            assert done.returncode != 0, case
            assert message in done.stdout + done.stderr, (case, done.stdout[-3000:])
            assert "wrong-password" not in done.stdout + done.stderr
        done = done_eos
        assert done.returncode != 0
        assert "exactly-once source support" in done.stdout + done.stderr, done.stdout[-3000:]
    finally:
        bare.stop()


def test_two_stacks_share_a_kafka_cluster_for_their_connect_groups(site, tmp_path):
    """Each deploys Connect `central` on the external cluster central: their
    groups (and storage topics) carry the stack, so neither sees the other's."""
    projects = []
    try:
        for stack, source in (("existing-connect", "us"), ("edge-push", "uk")):
            topology = {"platform": "local",
                        "clusters": {a: {"brokers": 1, "external": {"bootstrap_servers": site.servers(a)}}
                                     for a in (source, "central")},
                        "flows": [{"source": source, "target": "central", "topics": [f"{stack}-only"]}]}
            context = stack_project(stack, tmp_path / stack, topology)
            project = context.__enter__()
            projects.append((context, project))
        # both at once: each stack's Connect group joins on central while the other's does
        _parallel(partial(project.run, "up", "--yes", "--skip-preview", timeout=900) for _, project in projects)
        groups = set()
        for (_, project), (stack, source) in zip(projects, (("existing-connect", "us"), ("edge-push", "uk"))):
            out = project.outputs()
            groups.add(out["connect_groups"]["central"])
            listed = sorted(connect_rest.read(f"{out['connect']['central']}/connectors"))
            assert listed == [f"{source}->central.Mirror{k}Connector" for k in ("Checkpoint", "Heartbeat", "Source")]
        assert groups == {"mirrorstack-existing-connect-central", "mirrorstack-edge-push-central"}
    finally:
        _parallel(partial(project.run, "destroy", "--yes", "--skip-preview", check=False, timeout=600)
                  for _, project in projects)
        for context, project in projects:
            context.__exit__(None, None, None)
