"""How the program and its providers reach a port of a container on a Docker
engine that is not on this machine (Connect's REST API, a broker's ADMIN
listener), with nothing published for them: an address
`docker://<container>:<port>?host=<engine URL>[&cert_path=..][&local=<port>]`
is opened on first use as a listener on 127.0.0.1 (a free port, or `local`),
kept for the life of the process that opened it (one per address) and closed
with it. Each connection to it runs a small relay in the container through
the Docker API (`docker exec`: bash's /dev/tcp to 127.0.0.1:<port> there, its
stdin and stdout carried on the API connection itself), so it needs nothing
but what reaches the engine: the engine URL the provider uses (tcp:// with
DOCKER_TLS_VERIFY and DOCKER_CERT_PATH or `cert_path`, ssh://), through the
`docker` package. Pure but for the engine it talks to."""
from __future__ import annotations

import atexit
import os
import shlex
import socket
import struct
import threading
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

SCHEME = "docker"
HOST = "127.0.0.1"
ENGINE_TIMEOUT = 30  # seconds per Docker API call (exec create and start)
FRAME_HEADER = 8  # the engine's multiplexed stream: stream id, 3 zero bytes, length (big endian)
STDOUT = 1
BUFFER = 65536


class TunnelError(RuntimeError):
    pass


def address(container: str, port: int, *, host: str, cert_path: str | None = None,
            local_port: int | None = None) -> str:
    """`host`: the engine's URL; `local_port`: open the tunnel on that port of
    127.0.0.1 (a Kafka listener advertised there), not on a free one."""
    query = urlencode({k: v for k, v in (("host", host), ("cert_path", cert_path),
                                          ("local", str(local_port) if local_port else None)) if v})
    return f"{SCHEME}://{container}:{port}?{query}"


def is_tunnelled(url: str) -> bool:
    return url.startswith(f"{SCHEME}://")


def is_remote(engine: str | None) -> bool:
    """Whether the program reaches the engine over a network (tcp://, ssh://):
    then its published ports are on another machine's loopback."""
    return bool(engine) and not engine.startswith(("unix://", "npipe://"))


def relay_command(port: int) -> list[str]:
    """The relay run in the container for one connection: stdin to
    127.0.0.1:`port` and back to stdout until either side closes (then the
    other copy is stopped, so the exec ends and the connection closes)."""
    script = (f"exec 3<>/dev/tcp/127.0.0.1/{int(port)} 4<&0 || exit 3; "
              "cat <&3 & cat <&4 >&3 & wait -n; kill %1 %2 2>/dev/null")
    return ["bash", "-c", script]


def _parts(url: str) -> tuple[str, int, dict[str, str]]:
    parts = urlsplit(url)
    container, _, port = parts.netloc.rpartition(":")
    options = {k: v[0] for k, v in parse_qs(parts.query).items()}
    if not container or not port.isdigit() or not options.get("host"):
        raise TunnelError(f"{url}: not a docker:// address (docker://<container>:<port>?host=<engine URL>)")
    return container, int(port), options


def _client(options: dict[str, str]):
    try:
        import docker
    except ImportError as exc:
        raise TunnelError("the `docker` package is not installed: the docker platform reaches a remote engine's "
                          "containers through it; fix: pip install 'mirrorstack[docker]'") from exc
    environment = {**os.environ, "DOCKER_HOST": options["host"]}
    if options.get("cert_path"):
        environment.update({"DOCKER_CERT_PATH": options["cert_path"], "DOCKER_TLS_VERIFY": "1"})
    try:
        # ssh://: the user's own ssh (its config, keys and agent), as the docker CLI does
        return docker.from_env(environment=environment, timeout=ENGINE_TIMEOUT, use_ssh_client=True)
    except docker.errors.DockerException as exc:
        raise TunnelError(f"cannot use the Docker engine at {options['host']}: {exc}") from exc


def engine(host: str | None, cert_path: str | None = None):
    """A client of the engine at `host` as the provider reaches it (None: DOCKER_HOST, else the local socket)."""
    if host:
        return _client({"host": host, "cert_path": cert_path})
    import docker
    try:
        return docker.from_env(timeout=ENGINE_TIMEOUT)
    except docker.errors.DockerException as exc:
        raise TunnelError(f"cannot use the Docker engine (DOCKER_HOST, else the local socket): {exc}") from exc


@dataclass
class _Tunnel:
    url: str
    container: str
    port: int
    client: object
    listener: socket.socket
    lock: threading.Lock = field(default_factory=threading.Lock)  # one API call at a time on the client
    closed: threading.Event = field(default_factory=threading.Event)
    connections: int = 0  # relays started, for tests and messages
    failures: list[str] = field(default_factory=list)  # why relays ended badly, for messages (the last few)

    @property
    def local_port(self) -> int:
        return self.listener.getsockname()[1]

    def serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        try:
            with self.lock:
                self.connections += 1
                api = self.client.api
                exec_id = api.exec_create(self.container, relay_command(self.port), stdin=True, stdout=True,
                                          stderr=True, tty=False)["Id"]
                stream = api.exec_start(exec_id, socket=True)
        except Exception as exc:  # container gone or restarting, engine down: the client sees its connection close
            self._failed(f"docker exec in {self.container} failed: {getattr(exc, 'explanation', None) or exc}")
            conn.close()
            return
        raw = stream._sock if isinstance(stream, socket.SocketIO) else stream
        raw.settimeout(None)  # a Kafka or HTTP connection may idle for minutes
        threading.Thread(target=_send_all, args=(conn, raw), daemon=True).start()
        _receive_frames(raw, conn)
        try:
            with self.lock:
                code = self.client.api.exec_inspect(exec_id).get("ExitCode")
        except Exception as exc:
            code = f"unknown ({exc})"
        if code == 3:
            self._failed(f"the relay in {self.container} could not connect to 127.0.0.1:{self.port} there")

    def _failed(self, why: str) -> None:
        self.failures = [*self.failures[-4:], why]


def _close(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _send_all(conn: socket.socket, raw) -> None:
    """The client's bytes into the relay's stdin; the client closing ends the exec."""
    try:
        while data := conn.recv(BUFFER):
            raw.sendall(data)
    except OSError:
        pass
    finally:
        _close(raw)


def _receive_frames(raw, conn: socket.socket) -> None:
    """The relay's stdout (stderr dropped) back to the client, until the exec ends."""
    pending = b""
    try:
        while True:
            while len(pending) < FRAME_HEADER:
                chunk = raw.recv(BUFFER)
                if not chunk:
                    return
                pending += chunk
            stream, length = struct.unpack(">BxxxL", pending[:FRAME_HEADER])
            pending = pending[FRAME_HEADER:]
            while len(pending) < length:
                chunk = raw.recv(BUFFER)
                if not chunk:
                    return
                pending += chunk
            if stream == STDOUT:
                conn.sendall(pending[:length])
            pending = pending[length:]
    except OSError:
        pass
    finally:
        _close(conn)
        _close(raw)


_tunnels: dict[str, _Tunnel] = {}
_lock = threading.Lock()


def local(url: str, scheme: str = "http") -> str:
    """`url` itself unless it is a docker:// address; else the local URL of its tunnel."""
    if not is_tunnelled(url):
        return url
    with _lock:
        known = _tunnels.get(url)
        if known and not known.closed.is_set():
            return f"{scheme}://{HOST}:{known.local_port}"
        container, port, options = _parts(url)
        client = _client(options)
        try:
            client.api.inspect_container(container)
        except Exception as exc:
            client.close()
            reason = getattr(exc, "explanation", None) or exc
            raise TunnelError(f"cannot reach container {container} on the Docker engine at {options['host']}: "
                              f"{reason}; fix: check the engine answers there (`docker -H {shlex.quote(options['host'])}"
                              f" ps`) and the stack is up") from exc
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # again at once after forget()
        try:
            listener.bind((HOST, int(options.get("local") or 0)))
        except OSError as exc:
            listener.close()
            client.close()
            raise TunnelError(f"cannot open {url} on {HOST}:{options.get('local')}: {exc}; fix: free that port "
                              "where `up` runs (a broker's ADMIN listener is advertised there)") from exc
        listener.listen(64)
        tunnel = _Tunnel(url, container, port, client, listener)
        threading.Thread(target=tunnel.serve, daemon=True, name=f"docker-tunnel-{container}:{port}").start()
        _tunnels[url] = tunnel
        return f"{scheme}://{HOST}:{tunnel.local_port}"


def failures(url: str) -> list[str]:
    """Why `url`'s tunnel's last relays failed, if any did (for a message naming the tunnel)."""
    known = _tunnels.get(url)
    return list(known.failures) if known else []


def connections(url: str) -> int:
    """How many connections `url`'s tunnel has relayed (0: none open)."""
    known = _tunnels.get(url)
    return known.connections if known else 0


def forget(url: str) -> None:
    """Close `url`'s tunnel: the next use opens a new one."""
    with _lock:
        known = _tunnels.pop(url, None)
    if known:  # relays under way go on to their end
        known.closed.set()
        _close(known.listener)


def close_all() -> None:
    for url in list(_tunnels):
        forget(url)


atexit.register(close_all)
