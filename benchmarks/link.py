"""An emulated link between two data centres: Toxiproxy on 127.0.0.1.

This kernel has no netem, so latency (and optionally a bandwidth cap) is
injected by a TCP proxy. Half the round trip is added in each direction;
Toxiproxy delays every chunk by its timestamp, so the link is pipelined: it
adds delay, not a per-request stall. Brokers reached across the link
advertise a listener whose port is the proxy's (see wan_listener).
"""
from __future__ import annotations

from pathlib import Path

import requests

from mirrorstack import toolchain
from mirrorstack.platforms.local import launcher
from tests.support.ports import free_ports

HOST = "127.0.0.1"
WAN_LISTENER = "WAN"


class Link:
    """One Toxiproxy server; `proxy(name, upstream_port)` returns the port that
    reaches `upstream_port` across the link."""

    def __init__(self, base_dir: Path, rtt_ms: int, rate_kbytes: int | None = None):
        self.base_dir = Path(base_dir)
        self.rtt_ms, self.rate_kbytes = rtt_ms, rate_kbytes
        self.api_port = free_ports(1)[0]
        self.handle: launcher.ProcessHandle | None = None

    @property
    def api(self) -> str:
        return f"http://{HOST}:{self.api_port}"

    def start(self) -> Link:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.handle = launcher.start("toxiproxy", [toolchain.toxiproxy_binary(), "-host", HOST,
                                                   "-port", str(self.api_port)],
                                     log_file=self.base_dir / "toxiproxy.log")
        launcher.wait_until_healthy(self.handle, lambda: requests.get(f"{self.api}/version", timeout=2).ok,
                                    timeout=30, what=f"Toxiproxy at {self.api}")
        return self

    def proxy(self, name: str, upstream_port: int, listen_port: int) -> int:
        requests.post(f"{self.api}/proxies", timeout=5, json={
            "name": name, "listen": f"{HOST}:{listen_port}", "upstream": f"{HOST}:{upstream_port}",
            "enabled": True}).raise_for_status()
        for stream in ("upstream", "downstream"):
            toxics = [("latency", {"latency": self.rtt_ms // 2, "jitter": 0})]
            if self.rate_kbytes:
                toxics.append(("bandwidth", {"rate": self.rate_kbytes}))
            for kind, attributes in toxics:
                requests.post(f"{self.api}/proxies/{name}/toxics", timeout=5, json={
                    "name": f"{kind}-{stream}", "type": kind, "stream": stream, "toxicity": 1.0,
                    "attributes": attributes}).raise_for_status()
        return listen_port

    def stop(self) -> None:
        if self.handle:
            launcher.stop(self.handle)


def wan_listener(broker_port: int, wan_port: int, proxy_port: int) -> dict[str, str]:
    """Broker overrides adding a listener reached through the link: it listens
    on `wan_port` and advertises the proxy's port, so clients across the link
    keep going through the proxy after the metadata exchange."""
    return {
        "listeners": f"PLAINTEXT://{HOST}:{broker_port},{WAN_LISTENER}://{HOST}:{wan_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{broker_port},{WAN_LISTENER}://{HOST}:{proxy_port}",
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{WAN_LISTENER}:PLAINTEXT",
    }
