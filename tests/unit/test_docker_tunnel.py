"""A Docker engine on another machine: the docker platform publishes nothing for
the program and its clients open their own docker:// tunnel (docker_tunnel).
Here: the graph under mocks, the relay script against a real TCP server, the
engine's stream framing. On a real engine over TCP: tests/integration/test_docker_platform.py
(TestSecure)."""
from __future__ import annotations

import socket
import struct
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from mirrorstack.model.spec import load_topology
from mirrorstack.platforms import make_platform, tunnels
from mirrorstack.platforms.docker import tunnel as docker_tunnel
from mirrorstack.platforms.docker.platform import DockerPlatform
from tests.support.pulumi_mocks import DYNAMIC, deploy, is_type, unwrap_secrets
from tests.support.stacks import on_platform

ROOT = Path(__file__).resolve().parents[2]
ENGINE = "tcp://docker-host.example:2376"


def secure_on_docker():
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.secure.yaml").read_text())
    return load_topology(on_platform(document["config"]["mirrorstack:topology"], "docker"))


@pytest.fixture(scope="module")
def remote():
    return deploy(lambda: DockerPlatform("secure", docker_host=ENGINE), secure_on_docker(), "secure")


def test_a_remote_engine_gets_no_published_port_and_docker_tunnels_for_rest_and_admin(remote):
    mocks, built = remote
    assert built["platform"].rest_access == "tunnel"
    containers = mocks.of_type("docker:index/container:Container")
    kafka = [name for name in containers if "broker" in name or name.startswith("connect-")]
    assert len(kafka) == 3 and all(not containers[name].get("ports") for name in kafka), \
        {name: containers[name].get("ports") for name in kafka}
    dynamic = {r.name: unwrap_secrets(r.inputs) for r in mocks.resources if is_type(r.typ, DYNAMIC)}
    (mm2,) = [inputs for name, inputs in dynamic.items() if name.endswith("-connectors")]
    container, port, options = docker_tunnel._parts(mm2["connect_url"])
    assert (container, port, options) == ("mirrorstack-secure-connect-central-0", 8083, {"host": ENGINE})
    for alias in ("edge", "central"):  # the ACL resource opens each broker's ADMIN tunnel where it is advertised
        acls = dynamic[f"{alias}-acls"]
        (tunnel,) = acls["tunnels"]
        container, port, options = docker_tunnel._parts(tunnel)
        assert container == f"mirrorstack-secure-{alias}-broker-0"
        assert port == built["platform"].address(f"{alias}-broker-0", "admin")[1]
        assert acls["bootstrap"] == f"127.0.0.1:{options['local']}" and options["host"] == ENGINE


@pytest.mark.parametrize("engine, access", [
    (None, "published"), ("unix:///var/run/docker.sock", "published"), ("tcp://10.0.0.5:2376", "tunnel"),
    ("ssh://deploy@docker-host", "tunnel")])
def test_the_access_follows_where_the_engine_is(engine, access, monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert make_platform("docker", "s", local_dir="unused", docker_host=engine).rest_access == access


def test_docker_host_from_the_environment_and_a_wrong_rest_access_named(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2375")
    assert DockerPlatform("s").rest_access == "tunnel"
    assert DockerPlatform("s", rest_access="published").rest_access == "published"
    with pytest.raises(ValueError, match=r"mirrorstack:restAccess 'port-forward'.*published, tunnel"):
        DockerPlatform("s", rest_access="port-forward")
    monkeypatch.delenv("DOCKER_HOST")
    with pytest.raises(ValueError, match=r"restAccess tunnel needs the engine's URL .*docker:host or DOCKER_HOST"):
        DockerPlatform("s", rest_access="tunnel")


def test_an_address_round_trips_and_other_urls_are_themselves():
    url = docker_tunnel.address("mirrorstack-s-connect-c-0", 8083, host="ssh://me@host:2222", local_port=12345)
    assert tunnels.is_tunnelled(url) and docker_tunnel._parts(url) == (
        "mirrorstack-s-connect-c-0", 8083, {"host": "ssh://me@host:2222", "local": "12345"})
    assert tunnels.local("http://127.0.0.1:8083") == "http://127.0.0.1:8083"
    with pytest.raises(tunnels.TunnelError, match="not a docker:// address"):
        tunnels.local("docker://no-port?host=tcp://h:1")


def serve_once(reply: bytes) -> tuple[socket.socket, list[bytes]]:
    """A TCP server on 127.0.0.1 that reads one line, answers `reply` and closes."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def answer():
        conn, _ = server.accept()
        with conn:
            received.append(conn.makefile("rb").readline())
            conn.sendall(reply)
    threading.Thread(target=answer, daemon=True).start()
    return server, received


def test_the_relay_carries_both_ways_and_ends_when_the_server_closes():
    """What runs in the container for each connection, run here with bash. Its
    stdin stays open: a client that closes its end is done (no half-close)."""
    server, received = serve_once(b"pong\n")
    with server:
        relay = subprocess.Popen(docker_tunnel.relay_command(server.getsockname()[1]), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
        relay.stdin.write(b"ping\n")
        relay.stdin.flush()
        assert relay.stdout.read() == b"pong\n"  # to its end: the relay closed its output
        assert relay.wait(timeout=20) == 0 and received == [b"ping\n"]
        relay.stdin.close()


def test_the_relay_ends_when_the_client_closes():
    server = socket.create_server(("127.0.0.1", 0))
    with server:
        relay = subprocess.Popen(docker_tunnel.relay_command(server.getsockname()[1]), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
        conn, _ = server.accept()  # the server never closes: only the client's end can stop the relay
        with conn:
            relay.stdin.close()
            assert relay.wait(timeout=20) == 0
            assert conn.recv(10) == b""  # and the server saw the connection close


def test_only_the_relays_stdout_frames_reach_the_client():
    engine, relay = socket.socketpair()
    client, local = socket.socketpair()
    frame = lambda stream, data: struct.pack(">BxxxL", stream, len(data)) + data  # noqa: E731
    engine.sendall(frame(1, b"HTTP/1.1 200 OK\r\n") + frame(2, b"bash: warning\n") + frame(1, b"\r\nbody"))
    engine.close()
    docker_tunnel._receive_frames(relay, local)
    assert client.recv(100) == b"HTTP/1.1 200 OK\r\n\r\nbody" and client.recv(10) == b""


def test_a_relay_that_cannot_connect_in_the_container_exits_3():
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    relay = subprocess.run(docker_tunnel.relay_command(port), input=b"", capture_output=True, timeout=20)
    assert relay.returncode == 3


class _FailingApi:
    """An engine whose exec fails, or whose relay ends with `code`."""

    def __init__(self, code=None, refuse=None):
        self.code, self.refuse = code, refuse

    def exec_create(self, container, command, **_):
        if self.refuse:
            raise RuntimeError(self.refuse)
        return {"Id": "e1"}

    def exec_start(self, exec_id, socket):  # noqa: A002 (the docker package's name)
        import socket as sockets
        mine, theirs = sockets.socketpair()
        theirs.close()  # the relay ended at once
        return mine

    def exec_inspect(self, exec_id):
        return {"ExitCode": self.code}


@pytest.mark.parametrize("api, why", [
    (_FailingApi(code=3), "the relay in broker-0 could not connect to 127.0.0.1:9092 there"),
    (_FailingApi(refuse="container is restarting"), "docker exec in broker-0 failed: container is restarting"),
])
def test_why_a_relay_failed_is_kept_for_the_message(api, why):
    """A client sees only its connection close; the tunnel says why (broker_logins adds it to its error)."""
    listener = socket.socket()
    tunnel = docker_tunnel._Tunnel("docker://broker-0:9092?host=tcp://e:1", "broker-0", 9092,
                                   type("Client", (), {"api": api})(), listener)
    client, conn = socket.socketpair()
    with client, listener:
        tunnel._relay(conn)
        assert client.recv(10) == b""
    assert tunnel.failures == [why]
