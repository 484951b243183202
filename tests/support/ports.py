import socket
from contextlib import ExitStack


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports on 127.0.0.1 (held open together while picked)."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports
