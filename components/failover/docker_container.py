"""A failover switch run as a one-shot container on the stack's Docker network.

The switch reads and writes both clusters of the pair, whose bootstrap
addresses are container names on the stack's network: from where `pulumi up`
runs they do not resolve, and a published port cannot stand in for Kafka
(clients go on to every broker's advertised address). So the provider starts
the switch there, through the Docker API of the engine the stack runs on (the
`docker` package; a remote engine as the provider reaches it): a container of
the Spark image (python3, confluent_kafka, urllib3), the spec (it holds the
Connect REST credentials), the code it runs and the pair's client files
(where their `${file:...}` references point) written into it 0400/0600 for the
image's user before it starts. Its log is the switch's progress, shown as it
comes, then its report. The container is removed whatever happened."""
from __future__ import annotations

import io
import json
import tarfile
import uuid
from urllib.parse import urlsplit

from mirrorstack.failover import elsewhere
from mirrorstack.failover.elsewhere import MOUNT, SWITCH_SECONDS, SwitchRunFailed
from mirrorstack.platforms.docker import tunnel as docker_tunnel

LABEL = "failover-switch"  # the mirrorstack.service label, beside the stack's
TIMED_OUT = 124  # coreutils' timeout (in every Spark image) when the bound ran out
MEMORY = "256m"


def in_network_url(url: str, inside: dict[str, str]) -> str:
    """`url` as a container on the stack's network reaches it: a published
    127.0.0.1 port or a docker:// tunnel's container becomes the service's
    name there (`inside`: host:port → in-network host:port); another URL is itself."""
    parts = urlsplit(url)
    known = inside.get(parts.netloc.split("@")[-1])
    if known is None:
        return url
    if docker_tunnel.is_tunnelled(url):  # its query says how to reach the engine: nothing for the container
        return f"http://{known}"
    return f"{parts.scheme}://{known}{parts.path}"


def in_network_spec(spec: dict, inside: dict[str, str]) -> dict:
    """The spec with each Connect URL as the switch's container reaches it."""
    out = json.loads(json.dumps(spec))
    for key in ("flow", "back_flow"):
        connect = (out.get(key) or {}).get("connect")
        if connect:
            connect["connect_url"] = in_network_url(connect["connect_url"], inside)
            if connect.get("connect_urls"):
                connect["connect_urls"] = [in_network_url(u, inside) for u in connect["connect_urls"]]
    return out


def archive(spec: dict, code: bytes, clients: dict, uid: int) -> bytes:
    """A tar written at / before the container starts: the spec and the code
    (0400), each client file in its folder (0600), owned by `uid`."""
    files = [(f"{MOUNT}/spec.json", json.dumps(spec).encode(), 0o400), (f"{MOUNT}/switch.zip", code, 0o400)]
    for _, client in sorted(clients.items()):
        files += [(f"{client['dir']}/{name}", content.encode(), 0o600)
                  for name, content in sorted((client.get("files") or {}).items())]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, data, mode in files:
            entry = tarfile.TarInfo(path.lstrip("/"))
            entry.size, entry.mode, entry.uid, entry.gid = len(data), mode, uid, uid
            tar.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


def deadline_seconds(spec: dict) -> int:
    return int(float((spec.get("gate") or {}).get("wait_seconds", 120)) + SWITCH_SECONDS)


def create(client, name: str, spec: dict, runner: dict):
    """The switch's container, created (not started) on the stack's network."""
    import docker.errors
    try:
        return client.containers.create(
            runner["image"], name=name, command=["timeout", "--kill-after=30", str(deadline_seconds(spec)),
                                                 *elsewhere.command()],
            user=str(runner["uid"]), environment=elsewhere.ENVIRONMENT, network=runner["network"],
            labels={"mirrorstack.stack": runner["stack"], "mirrorstack.service": LABEL}, mem_limit=MEMORY,
            detach=True)
    except docker.errors.ImageNotFound as exc:
        raise SwitchRunFailed(f"the switch's image {runner['image']} is not on the Docker engine ({exc}); nothing "
                              "was changed; fix: `make images` (images.spark: the mirrorstack/spark image), then "
                              "run `pulumi up` again") from exc
    except docker.errors.APIError as exc:
        raise SwitchRunFailed(f"the switch's container could not be created on network {runner['network']}: "
                              f"{exc.explanation or exc}; nothing was changed; fix the cause, then run `pulumi up` "
                              "again") from exc


def follow(container, progress) -> list[str]:
    """Every line the switch printed, its progress passed on as it comes; a
    follow cut short is read again, whole, once the container has ended."""
    lines, pending = [], b""
    for chunk in container.logs(stream=True, follow=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            lines.append(raw.decode(errors="replace"))
            if (said := elsewhere.progress_of(lines[-1])) is not None:
                progress(said)
    if pending:
        lines.append(pending.decode(errors="replace"))
    if elsewhere.finished(lines):
        return lines
    exit_code = container.wait(timeout=SWITCH_SECONDS).get("StatusCode")
    whole = container.logs().decode(errors="replace").splitlines()
    for line in whole[len(lines):]:
        if (said := elsewhere.progress_of(line)) is not None:
            progress(said)
    ran_out = " (it ran out of time and was stopped)" if exit_code == TIMED_OUT else ""
    return [*whole, f"(exit code {exit_code}{ran_out})"]


def run_switch_container(spec: dict, runner: dict, progress) -> dict:
    """mirrorstack.failover.procedure.run_switch, run on the stack's network; the same report or GateFailed."""
    client = docker_tunnel.engine(runner.get("engine"), runner.get("cert_path"))
    name = f"{runner['prefix']}-switch-{uuid.uuid4().hex[:10]}"
    inside = in_network_spec(spec, runner.get("inside") or {})
    progress(f"the switch runs on the stack's network {runner['network']}, as container {name} (the clusters' "
             "addresses resolve there only)")
    container = create(client, name, spec, runner)
    try:
        container.put_archive("/", archive(inside, elsewhere.code_zip(), runner.get("clients") or {},
                                           int(runner["uid"])))
        container.start()
        return elsewhere.outcome(f"container {name}", follow(container, progress))
    finally:
        # The spec holds the REST credentials: it does not outlive the switch.
        try:
            container.remove(force=True)
        except Exception as exc:  # noqa: BLE001 - the switch's outcome comes first; say what is left
            progress(f"could not remove container {name} ({exc}); remove it by hand (`docker rm -f {name}`): "
                     "it holds the Connect REST credentials")
        client.close()
