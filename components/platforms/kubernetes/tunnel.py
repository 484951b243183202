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
# A kubectl that ends at once (its pod restarting, the local port not yet let go by a tunnel that
# just closed) is started again after a pause, for up to this long: three starts 0.1 s apart all
# failed in a suite run while the node was loaded (2026-11-30).
EXIT_RETRY_SECONDS = 60.0
EXIT_PAUSES = (1.0, 2.0, 4.0, 8.0)  # then 8 s each
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")
_tunnels: dict[str, tuple[subprocess.Popen, int]] = {}
_lock = threading.Lock()
_opening: dict[str, threading.Lock] = {}


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
        opening = _opening.setdefault(url, threading.Lock())
    with opening:  # one kubectl per target at a time; other targets open meanwhile
        with _lock:
            known = _tunnels.get(url)
        if not (known and known[0].poll() is None):
            namespace, kind, name, port, options = _parts(url)
            argv = [kubectl(), "port-forward", "--namespace", namespace, "--address", "127.0.0.1",
                    *(["--context", options["context"]] if "context" in options else []),
                    *(["--kubeconfig", options["kubeconfig"]] if "kubeconfig" in options else []),
                    f"{kind}/{name}", f"{options.get('local', '')}:{port}"]
            known = _open(url, argv, options.get("local"))
            with _lock:
                _tunnels[url] = known
        return f"{scheme}://127.0.0.1:{known[1]}"


def _open(url: str, argv: list[str], local_port: str | None) -> tuple[subprocess.Popen, int]:
    """kubectl started until it forwards: again after a silent try (OPEN_ATTEMPTS of
    OPEN_TIMEOUT), and after a growing pause when it ended at once (pauses up to EXIT_RETRY_SECONDS)."""
    failures: list[str] = []  # each try's words
    silent = ended = 0
    paused = 0.0
    while True:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        try:
            return proc, _read_port(proc)  # with `local_port`, that port: kubectl binds it or fails
        except _Silent as exc:
            silent, pause = silent + 1, 0.0
            failures.append(str(exc))
        except _Ended as exc:
            ended, pause = ended + 1, EXIT_PAUSES[min(ended, len(EXIT_PAUSES) - 1)]
            held = f" ({_holder(local_port)})" if local_port and "address already in use" in str(exc) else ""
            failures.append(f"{exc}{held}")
        if silent >= OPEN_ATTEMPTS or paused >= EXIT_RETRY_SECONDS:
            raise TunnelError(f"could not open {url} (kubectl port-forward, {len(failures)} tries: {silent} "
                              f"silent for {OPEN_TIMEOUT:.0f}s, {ended} ended, {paused:.0f}s of pauses): "
                              f"{_tries(failures)}")
        time.sleep(pause)
        paused += pause


def _tries(failures: list[str]) -> str:
    """'try 1: a; tries 2-7: b': each run of tries that said the same, once."""
    runs: list[list] = []
    for number, said in enumerate(failures, 1):
        if runs and runs[-1][2] == said:
            runs[-1][1] = number
        else:
            runs.append([number, number, said])
    return "; ".join(f"try {a}: {said}" if a == b else f"tries {a}-{b}: {said}" for a, b, said in runs)


class _Silent(TunnelError):
    """kubectl said nothing within OPEN_TIMEOUT."""


class _Ended(TunnelError):
    """kubectl ended without forwarding."""


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
    drain = threading.Thread(target=lambda: errors.extend(line.strip() for line in proc.stderr), daemon=True)
    drain.start()
    reader.join(OPEN_TIMEOUT)
    if found:
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # "Handling connection for"
        return found[0]
    ended = not reader.is_alive()  # its stdout closed: it ended, it did not fall silent
    if ended:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    code = proc.wait()
    drain.join(5)  # its last words, read to the end of the pipe
    said = "; ".join(e for e in errors if e)
    if ended:
        raise _Ended(f"kubectl ended (exit {code}): {said or 'it said nothing'}")
    raise _Silent(said or f"no answer in {OPEN_TIMEOUT:.0f}s")


def _holder(port: str) -> str:
    """Who listens on 127.0.0.1:`port`, as `ss` says (best effort)."""
    try:
        shown = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5)
        return f"held by: {shown.stdout.strip() or 'nothing now'}"
    except (OSError, subprocess.SubprocessError):
        return "`ss -ltnp` tells which process holds it"


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
