"""A stand-in for the pulumi-docker provider, on a real Docker engine.

pulumi-docker's provider plugin cannot be had on this machine (issue 18), so
`pulumi up` of a `platform: docker` stack cannot run here. This harness runs
the stack's Pulumi program under mocks (tests/support/pulumi_mocks.py) and,
for each registration, does on the engine (through the `docker` package)
what the provider would do with exactly those inputs:

- Network, Volume: created by name (bridge network; local volume);
- RemoteImage: must already exist locally (no registry: `make images`);
- Container: created with its command, entrypoint, env, hostname, network and
  aliases, volumes, user, ports published on their `ip`, health check, restart
  policy, memory/cpus, labels; the `uploads` are written into the created
  container BEFORE it starts, with their mode, owner and group (as the
  provider does, one tar entry per file); `wait` → until the health check
  passes (the log tail in the error when it does not); `must_run=False` with
  `attach` → until it exits (`exit_code`, `container_logs` outputs);
- dynamic resources (MirrorMaker 2 connectors, certificates, passwords): their
  REAL provider's `check` and `create`, e.g. the connectors go to Connect's
  published REST port.

The SDK registers a resource only once its inputs and `depends_on` are
resolved, and from several threads at once, so the order and parallelism are
the program's. `destroy()` undoes everything, newest first (dynamic resources
through their provider's `delete`).

What this proves: the docker platform's resource graph (names, addressing,
scripts, probes, file modes and owners, restart policy) works on a real engine
with real images. What it does not: the provider itself (its diffing, update
and replacement logic, state, how it maps each input; e.g. the terraform
provider's defaults where ours differ), or the Pulumi engine (previews,
replacements) — those are covered by the unit tests under mocks and by the
local platform's tests on the real engine.
"""
from __future__ import annotations

import base64
import io
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import dill
import docker
import docker.errors
from pulumi.runtime._serialization import _deserialize

from mirrorstack.platforms.containers import dns_label

from tests.support.pulumi_mocks import DYNAMIC, RecordingMocks, deploy, is_type, unwrap_secrets

NETWORK = "docker:index/network:Network"
VOLUME = "docker:index/volume:Volume"
IMAGE = "docker:index/remoteImage:RemoteImage"
CONTAINER = "docker:index/container:Container"
PROGRESS_EVERY = 30  # seconds between progress lines while waiting
LOG_TAIL = 40  # lines of a container's log in an error
STOP_WAIT = 120  # seconds for registrations under way to end before a tear-down


def nanoseconds(duration: str) -> int:
    """A provider duration ("5s", "2m", "500ms") in nanoseconds."""
    for unit, factor in (("ms", 10**6), ("s", 10**9), ("m", 60 * 10**9), ("h", 3600 * 10**9)):
        if duration.endswith(unit) and duration[:-len(unit)].replace(".", "", 1).isdigit():
            return int(float(duration[:-len(unit)]) * factor)
    raise ValueError(f"unsupported duration {duration!r}")


def upload_archive(uploads: list[dict]) -> bytes:
    """A tar of the container's uploads: one entry per file at its full path,
    with its mode (`permissions`, else 0755 when `executable`, else 0644) and
    owner/group (numeric ids; root when unset). No folder entries: the engine
    creates missing folders (root, 0755) and leaves existing ones as they are."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for upload in uploads:
            if upload.get("source"):
                data = Path(upload["source"]).read_bytes()
            elif upload.get("contentBase64"):
                data = base64.b64decode(upload["contentBase64"])
            else:
                data = upload["content"].encode()
            entry = tarfile.TarInfo(upload["file"].lstrip("/"))
            entry.size, entry.mtime = len(data), int(time.time())
            default = 0o755 if upload.get("executable") else 0o644
            entry.mode = int(upload["permissions"], 8) if upload.get("permissions") else default
            entry.uid, entry.gid = int(upload.get("owner") or 0), int(upload.get("group") or 0)
            tar.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


def log_tail(container) -> str:
    return container.logs(tail=LOG_TAIL).decode(errors="replace")


@dataclass
class Created:
    """Something the harness made, to undo in `destroy`."""
    typ: str
    name: str
    id: str
    outputs: dict = field(default_factory=dict)


class DockerEngineMocks(RecordingMocks):
    """Records the graph like RecordingMocks and carries each resource out on
    the engine of `client` (see the module docstring)."""

    def __init__(self, client: docker.DockerClient, progress=print):
        super().__init__()
        self.client = client
        self.progress = progress
        self.created: list[Created] = []  # in creation order
        # A failed registration fails the program while others still run in their
        # threads: `destroy` stops new work and waits for those before undoing.
        self._stopping = threading.Event()
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)

    def results(self, args, registration):
        with self._idle:
            if self._stopping.is_set():
                raise RuntimeError(f"{args.name}: the deployment is being torn down")
            self._in_flight += 1
        try:
            return self._carry_out(args)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def _carry_out(self, args):
        if not args.custom:
            return args.name + "_id", args.inputs  # component resources: nothing to do
        inputs = unwrap_secrets(args.inputs)
        if is_type(args.typ, DYNAMIC):
            return self._dynamic(args.typ, args.name, inputs)
        make = {NETWORK: self._network, VOLUME: self._volume, IMAGE: self._image, CONTAINER: self._container}
        if args.typ not in make:
            raise NotImplementedError(f"the docker harness does not create {args.typ} ({args.name})")
        try:
            return make[args.typ](args.name, integers(inputs))
        except docker.errors.APIError as error:  # the engine's reason, not only the HTTP status
            raise RuntimeError(f"{args.typ} {args.name}: {error.explanation or error}") from error

    def _remember(self, typ: str, name: str, id_: str, outputs: dict) -> tuple[str, dict]:
        with self._lock:
            self.created.append(Created(typ, name, id_, outputs))
        return id_, outputs

    # ------------------------------------------------------------ resources

    def _network(self, name, inputs):
        network = self.client.networks.create(inputs["name"], driver=inputs.get("driver") or "bridge",
                                              labels=labels(inputs), check_duplicate=True)
        return self._remember(NETWORK, inputs["name"], network.id, {**inputs, "driver": "bridge"})

    def _volume(self, name, inputs):
        volume = self.client.volumes.create(inputs["name"], labels=labels(inputs))
        return self._remember(VOLUME, inputs["name"], volume.id, {**inputs, "mountpoint": volume.attrs["Mountpoint"]})

    def _image(self, name, inputs):
        try:
            image = self.client.images.get(inputs["name"])
        except docker.errors.ImageNotFound:
            raise RuntimeError(f"image {inputs['name']} is not in the engine and nothing can be pulled here: "
                               "`make images` builds the mirrorstack images") from None
        # Not remembered: images are kept (keep_locally), as every stack's are.
        return image.id, {**inputs, "imageId": image.id, "repoDigest": (image.attrs.get("RepoDigests") or [""])[0]}

    def _container(self, name, inputs):
        api = self.client.api
        network, *others = inputs.get("networksAdvanced") or [{}]
        if others:
            raise NotImplementedError(f"{name}: more than one network")
        ports = inputs.get("ports") or []
        check = inputs.get("healthcheck")
        host_config = api.create_host_config(
            binds={v["volumeName"]: {"bind": v["containerPath"], "mode": "ro" if v.get("readOnly") else "rw"}
                   for v in inputs.get("volumes") or []},
            port_bindings={p["internal"]: (p.get("ip") or "0.0.0.0", p["external"]) for p in ports},
            restart_policy={"Name": inputs.get("restart") or "no"},
            mem_limit=f"{int(inputs['memory'])}m" if inputs.get("memory") else None,
            nano_cpus=int(float(inputs["cpus"]) * 1e9) if inputs.get("cpus") else None,
            network_mode=network.get("name"))
        networking = api.create_networking_config({network["name"]: api.create_endpoint_config(
            aliases=network.get("aliases"))}) if network else None
        created = api.create_container(
            inputs["image"], name=inputs["name"], command=inputs.get("command"),
            entrypoint=inputs.get("entrypoints"), environment=inputs.get("envs"), hostname=inputs.get("hostname"),
            user=inputs.get("user"), labels=labels(inputs), ports=[p["internal"] for p in ports],
            healthcheck={"test": check["tests"], "interval": nanoseconds(check["interval"]),
                         "timeout": nanoseconds(check["timeout"]), "start_period": nanoseconds(check["startPeriod"]),
                         "retries": int(check["retries"])} if check else None,
            host_config=host_config, networking_config=networking)
        outputs = {**inputs, "id": created["Id"]}
        self._remember(CONTAINER, inputs["name"], created["Id"], outputs)
        container = self.client.containers.get(created["Id"])
        uploads = inputs.get("uploads") or []
        if uploads and not container.put_archive("/", upload_archive(uploads)):
            raise RuntimeError(f"{inputs['name']}: the engine refused the uploads")
        container.start()
        if inputs.get("mustRun") is False and inputs.get("attach"):
            outputs.update(self._run_to_exit(container, inputs))
        elif inputs.get("wait"):
            self._wait_healthy(container, int(inputs.get("waitTimeout") or 60))
        return container.id, outputs

    def _wait_healthy(self, container, timeout: int) -> None:
        started = last = time.monotonic()
        while True:
            self._check_not_stopping(container.name)
            container.reload()
            health = container.attrs["State"].get("Health", {}).get("Status")
            if health == "healthy":
                return
            now = time.monotonic()
            if health == "unhealthy" or now - started > timeout:
                raise RuntimeError(f"container {container.name} is {health or container.status} after "
                                   f"{now - started:.0f} s (timeout {timeout} s); its log ends:\n{log_tail(container)}")
            if now - last >= PROGRESS_EVERY:
                self.progress(f"[docker harness] waiting for {container.name} to be healthy "
                              f"({now - started:.0f} s, {health or container.status})")
                last = now
            time.sleep(1)

    def _run_to_exit(self, container, inputs) -> dict:
        """Wait until the container exits (progress printed on long runs); its exit code and logs."""
        started = time.monotonic()
        while True:
            self._check_not_stopping(container.name)
            try:
                exit_code = container.wait(timeout=PROGRESS_EVERY)["StatusCode"]
                break
            except Exception as timed_out:  # requests' ReadTimeout / ConnectionError on the wait call
                if "timed out" not in str(timed_out).lower():
                    raise
                self.progress(f"[docker harness] {container.name} still running ({time.monotonic() - started:.0f} s)")
        logs = container.logs().decode(errors="replace") if inputs.get("logs") else None
        return {"exitCode": exit_code, "containerLogs": logs}

    def _check_not_stopping(self, name: str) -> None:
        if self._stopping.is_set():
            raise RuntimeError(f"{name}: the deployment is being torn down")

    def _dynamic(self, typ, name, inputs):
        provider = _deserialize(lambda: dill.loads(base64.b64decode(inputs["__provider"])))
        checked = provider.check({}, inputs)
        if checked.failures:
            raise RuntimeError(f"{name}: {[(f.property, f.reason) for f in checked.failures]}")
        props = checked.inputs or inputs
        result = provider.create(props)
        outputs = {**(result.outs or {}), "__provider": inputs["__provider"]}
        return self._remember(typ, name, result.id, outputs)

    # ------------------------------------------------------------ tear-down

    def destroy(self) -> None:
        """Remove what was created, newest first, once no registration is
        under way; goes on after a failure and raises them all at the end."""
        with self._idle:
            self._stopping.set()
            if not self._idle.wait_for(lambda: self._in_flight == 0, timeout=STOP_WAIT):
                raise RuntimeError(f"{self._in_flight} registration(s) still under way after {STOP_WAIT} s")
        errors = []
        while self.created:
            item = self.created.pop()
            try:
                if is_type(item.typ, DYNAMIC):
                    provider = _deserialize(lambda: dill.loads(base64.b64decode(item.outputs["__provider"])))
                    provider.delete(item.id, item.outputs)
                elif item.typ == CONTAINER:
                    self.client.api.remove_container(item.id, force=True, v=False)
                elif item.typ == VOLUME:
                    self.client.api.remove_volume(item.name)
                elif item.typ == NETWORK:
                    self.client.api.remove_network(item.id)
            except docker.errors.NotFound:
                pass
            except Exception as error:  # noqa: BLE001 (the rest must still go)
                errors.append(f"{item.typ} {item.name}: {error}")
        if errors:
            raise RuntimeError("destroy failed for: " + "; ".join(errors))


def integers(value):
    """Numbers arrive as floats on the wire; the provider's schema makes the whole ones integers."""
    if isinstance(value, dict):
        return {k: integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integers(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def labels(inputs: dict) -> dict[str, str]:
    return {entry["label"]: entry["value"] for entry in inputs.get("labels") or []}


@dataclass
class EngineStack:
    """A topology deployed on the engine by the harness."""
    mocks: DockerEngineMocks
    built: dict

    @property
    def platform(self):
        return self.built["platform"]

    def container(self, service: str):
        return self.mocks.client.containers.get(f"{self.platform.prefix}-{service}")

    def outputs_of(self, typ: str) -> dict[str, dict]:
        """name → outputs of what the harness created of type `typ` (DYNAMIC for dynamic resources)."""
        return {c.name: c.outputs for c in self.mocks.created if is_type(c.typ, typ)}


def remove_leftovers(client: docker.DockerClient, stack: str, progress=print) -> None:
    """Remove what a run stopped half-way (a crashed test worker, an interrupted
    suite) left of `stack` on the engine: its containers (which the engine
    would restart, unless-stopped), then its volumes and network, so the next
    deploy of the same stack does not meet "already exists"."""
    prefix = dns_label(f"mirrorstack-{stack}")
    containers = client.containers.list(all=True, filters={"label": f"mirrorstack.stack={stack}"})
    for container in containers:
        container.remove(force=True, v=False)
    volumes = [v for v in client.volumes.list() if v.name.startswith(f"{prefix}-")]
    for volume in volumes:
        volume.remove(force=True)
    networks = [n for n in client.networks.list(names=[prefix]) if n.name == prefix]
    for network in networks:
        network.remove()
    if containers or volumes or networks:
        progress(f"removed what an interrupted run left of stack {stack}: {len(containers)} container(s), "
                 f"{len(volumes)} volume(s), {len(networks)} network(s)")


def deploy_on_engine(client: docker.DockerClient, make_platform, topology, stack: str, progress=print) -> EngineStack:
    """Run the program of `topology` on `make_platform()` with the harness as
    the docker provider, after removing what an interrupted run left of the
    same stack. On failure, what was created is destroyed and the error raised."""
    remove_leftovers(client, stack, progress)
    mocks = DockerEngineMocks(client, progress)
    try:
        _, built = deploy(make_platform, topology, stack, mocks)
    except BaseException:
        mocks.destroy()
        raise
    return EngineStack(mocks, built)
