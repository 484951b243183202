"""The suite's Docker engine reached over TCP, as an engine on another machine
is (DOCKER_HOST=tcp://...): a relay from a free port of 127.0.0.1 to the
engine's unix socket, byte for byte (half-closes too: `docker exec`'s attached
stdin ends with one). Whatever uses its URL speaks the Engine API over TCP,
exactly as to a remote engine; only the ports the engine publishes stay on
this machine, which is why a test using it also checks that none is used."""
from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit

BUFFER = 65536


class EngineOverTcp:
    def __init__(self, engine_url: str):
        if not engine_url.startswith("unix://"):
            raise ValueError(f"the engine at {engine_url} is not on a unix socket: point DOCKER_HOST at one "
                             "(or unset it: tools/docker_engine.py starts the private engine)")
        self.socket_path = urlsplit(engine_url).path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = "tcp://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True, name="engine-over-tcp").start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            self.connections += 1
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                engine.connect(self.socket_path)
            except OSError:
                conn.close()
                engine.close()
                continue
            threading.Thread(target=_pair, args=(conn, engine), daemon=True).start()

    def close(self) -> None:
        self.listener.close()


def _pair(conn: socket.socket, engine: socket.socket) -> None:
    back = threading.Thread(target=_pump, args=(engine, conn), daemon=True)
    back.start()
    _pump(conn, engine)
    back.join()
    conn.close()
    engine.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(BUFFER):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)  # the other way may go on (an exec's output after its stdin ended)
    except OSError:  # reset: the other way ends too
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
