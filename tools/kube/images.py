"""Images into the cluster's containerd without a registry: the cluster's own
(pause, CoreDNS: one static binary each, written as a docker-archive here) and
`make images`' from the Docker engine (`docker save`), through `ctr images import`."""
from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from tools.kube import layout


def ctr(*args: str, stdin=None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ctr", "--address", str(layout.CONTAINERD_SOCKET), "--namespace", "k8s.io", *args],
                          input=stdin, capture_output=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"kube: ctr {' '.join(args)} exited {done.returncode}: {done.stderr.decode().strip()}")
    return done


def present() -> set[str]:
    return set(ctr("images", "list", "--quiet").stdout.decode().split())


def archive(name: str, files: dict[str, Path], argv: list[str], links: dict[str, str] | None = None) -> bytes:
    """A docker-archive of one layer: `files` (path in the image → file here)
    and `links` (path → symlink target)."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        for inside, source in files.items():
            info = tar.gettarinfo(str(source), arcname=inside.lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with source.open("rb") as f:
                tar.addfile(info, f)
        for inside, target in (links or {}).items():
            info = tarfile.TarInfo(inside.lstrip("/"))
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Entrypoint": argv, "User": "0", "Env": ["PATH=/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for entry, data in (("layer.tar", layer_bytes), (config_name, config),
                            ("manifest.json", json.dumps([{"Config": config_name, "RepoTags": [name],
                                                           "Layers": ["layer.tar"]}]).encode())):
            info = tarfile.TarInfo(entry)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


# The shell and tools the provisioner's helper pods run (make a volume's folder, remove it).
BUSYBOX_APPLETS = ("sh", "mkdir", "rm", "chmod", "ls")


def import_own() -> None:
    """pause, CoreDNS, the volume provisioner and its helper, unless already there."""
    have = present()
    own = {
        layout.PAUSE_IMAGE: lambda: archive(layout.PAUSE_IMAGE, {"/pause": Path(layout.binary("pause"))}, ["/pause"]),
        layout.coredns_image(): lambda: archive(layout.coredns_image(), {"/coredns": Path(layout.binary("coredns"))},
                                                ["/coredns"]),
        layout.local_path_image(): lambda: archive(
            layout.local_path_image(), {"/local-path-provisioner": Path(layout.binary(layout.local_path_binary()))},
            ["/local-path-provisioner"]),
        layout.HELPER_IMAGE: lambda: archive(layout.HELPER_IMAGE, {"/bin/busybox": Path("/bin/busybox")}, ["/bin/sh"],
                                             {f"/bin/{applet}": "busybox" for applet in BUSYBOX_APPLETS}),
    }
    for name, build in own.items():
        if _full_name(name) not in have:
            ctr("images", "import", "-", stdin=build())


def import_from_docker(names: list[str]) -> list[str]:
    """Each image of the Docker engine not yet in the cluster; the ones imported."""
    import docker
    from tools.docker_engine import ensure_engine, stop_engine
    have = present()
    wanted = [n for n in names if _full_name(n) not in have]
    if not wanted:
        return []
    engine = ensure_engine()
    try:
        for name in wanted:
            try:
                image = engine.client.images.get(name)
            except docker.errors.ImageNotFound:
                raise SystemExit(f"kube: image {name} is not in the Docker engine: run `make images` first") from None
            print(f"kube: importing {name} into the cluster", flush=True)
            ctr("images", "import", "-", stdin=b"".join(image.save(named=True)))
    finally:
        stop_engine(engine)  # only if this process started it
    return wanted


def _full_name(name: str) -> str:
    """How containerd lists a short docker name (docker.io/library/... or docker.io/...)."""
    first = name.split("/")[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        return name  # a registry named
    return f"docker.io/{name}" if "/" in name else f"docker.io/library/{name}"
