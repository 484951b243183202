"""How the program and its providers reach a port inside a Kubernetes cluster
(Connect's REST API) without anyone keeping a `kubectl port-forward` open:
an address `kube://<namespace>/<kind>/<name>:<port>[?context=..&kubeconfig=..]`
is opened on first use as `kubectl port-forward` on a free 127.0.0.1 port,
kept for the life of the process that opened it (one per target, shared by
every call) and stopped with it. kubectl authenticates exactly as the user's
own does (certificates, tokens, exec plugins such as EKS's and GKE's), so
this works for a remote cluster too. Pure but for the kubectl it starts."""
from __future__ import annotations

import atexit
import ctypes
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from urllib.parse import parse_qs, urlencode, urlsplit

SCHEME = "kube"
OPEN_TIMEOUT = 30.0  # seconds for kubectl to report its local port
# A kubectl that said nothing for 30 s on a loaded machine (a suite run at load 16) answered when
# started again: a few tries before Connect counts as unreachable.
OPEN_ATTEMPTS = 3
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")
_tunnels: dict[str, tuple[subprocess.Popen, int]] = {}
_lock = threading.Lock()


class TunnelError(RuntimeError):
    pass


def address(namespace: str, kind: str, name: str, port: int, *, context: str | None = None,
            kubeconfig: str | None = None, local_port: int | None = None) -> str:
    """`local_port`: open the tunnel on that port of 127.0.0.1 (a Kafka listener
    advertised there), not on a free one."""
    query = urlencode({k: v for k, v in (("context", context), ("kubeconfig", kubeconfig),
                                          ("local", str(local_port) if local_port else None)) if v})
    return f"{SCHEME}://{namespace}/{kind}/{name}:{port}" + (f"?{query}" if query else "")


def is_tunnelled(url: str) -> bool:
    return url.startswith(f"{SCHEME}://")


def inside(url: str, cluster_domain: str = "cluster.local", scheme: str = "http") -> str:
    """`url` as a pod of the cluster reaches it: a kube:// address of a
    Service becomes the Service's DNS name; any other URL is itself."""
    if not is_tunnelled(url):
        return url
    namespace, kind, name, port, _ = _parts(url)
    if kind != "service":
        raise TunnelError(f"{url}: only a Service has a name inside the cluster, not a {kind}")
    return f"{scheme}://{name}.{namespace}.svc.{cluster_domain}:{port}"


def _parts(url: str) -> tuple[str, str, str, str, dict[str, str]]:
    """(namespace, kind, name, port, options) of a kube:// address."""
    parts = urlsplit(url)
    kind, _, target = parts.path.strip("/").partition("/")
    name, _, port = target.rpartition(":")
    return parts.netloc, kind, name, port, {k: v[0] for k, v in parse_qs(parts.query).items()}


def kubectl_in(namespace: str, context: str | None = None) -> list[str]:
    """kubectl's command line up to the verb, in a namespace and the provider's context."""
    return [kubectl(), "--namespace", namespace, *(["--context", context] if context else [])]


def kubectl() -> str:
    found = shutil.which("kubectl")
    if not found:
        raise TunnelError("kubectl not found on PATH: the kubernetes platform opens its port-forwards to Connect "
                          "with it; fix: install kubectl (or `make kube`, which builds one) and put it on PATH")
    return found


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def local(url: str, scheme: str = "http") -> str:
    """`url` itself unless it is a kube:// address; else the local URL of its tunnel."""
    if not is_tunnelled(url):
        return url
    with _lock:
        known = _tunnels.get(url)
        if known and known[0].poll() is None:
            return f"{scheme}://127.0.0.1:{known[1]}"
        namespace, kind, name, port, options = _parts(url)
        argv = [kubectl(), "port-forward", "--namespace", namespace, "--address", "127.0.0.1",
                *(["--context", options["context"]] if "context" in options else []),
                *(["--kubeconfig", options["kubeconfig"]] if "kubeconfig" in options else []),
                f"{kind}/{name}", f"{options.get('local', '')}:{port}"]
        failures = []
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            try:
                local_port = _read_port(proc)  # with `local`, that port: kubectl binds it or fails
                break
            except TunnelError as exc:
                failures.append(f"try {attempt}: {exc}")
        else:
            raise TunnelError(f"could not open {url} (kubectl port-forward, {OPEN_ATTEMPTS} tries of "
                              f"{OPEN_TIMEOUT:.0f}s): {'; '.join(failures)}")
        _tunnels[url] = (proc, local_port)
        return f"{scheme}://127.0.0.1:{local_port}"


def _read_port(proc: subprocess.Popen) -> int:
    found: list[int] = []
    def read() -> None:
        for line in proc.stdout:
            match = _FORWARDING.search(line)
            if match:
                found.append(int(match.group(1)))
                break
    errors: deque[str] = deque(maxlen=5)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # stderr drained for the life of the tunnel, so kubectl never blocks on a full pipe
    threading.Thread(target=lambda: errors.extend(line.strip() for line in proc.stderr), daemon=True).start()
    reader.join(OPEN_TIMEOUT)
    if not found:
        proc.kill()
        proc.wait()
        time.sleep(0.1)  # the stderr thread's last lines
        raise TunnelError('; '.join(errors) or f"no answer in {OPEN_TIMEOUT:.0f}s")
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # "Handling connection for"
    return found[0]


def close_all() -> None:
    with _lock:
        for proc, _ in _tunnels.values():
            proc.terminate()
        deadline = time.monotonic() + 5
        for proc, _ in _tunnels.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        _tunnels.clear()


atexit.register(close_all)


def forget(url: str) -> None:
    """Stop `url`'s tunnel (its pod went away): the next use opens a new one."""
    with _lock:
        known = _tunnels.pop(url, None)
    if known:
        known[0].terminate()
