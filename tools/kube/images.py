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


def single_binary_archive(name: str, binary: Path, argv: list[str]) -> bytes:
    """A docker-archive of one layer holding `binary` at /<its name>."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tar.gettarinfo(str(binary), arcname=binary.name)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        with binary.open("rb") as f:
            tar.addfile(info, f)
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Entrypoint": argv, "User": "0"},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for entry, data in (("layer.tar", layer_bytes), (config_name, config),
                            ("manifest.json", json.dumps([{"Config": config_name, "RepoTags": [name],
                                                           "Layers": ["layer.tar"]}]).encode())):
            info = tarfile.TarInfo(entry)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive.getvalue()


def import_own() -> None:
    """pause and CoreDNS, unless already there."""
    have = present()
    for name, binary, argv in ((layout.PAUSE_IMAGE, "pause", ["/pause"]),
                               (layout.coredns_image(), "coredns", ["/coredns"])):
        if _full_name(name) not in have:
            ctr("images", "import", "-", stdin=single_binary_archive(name, Path(layout.binary(binary)), argv))


def import_from_docker(names: list[str]) -> list[str]:
    """Each image of the Docker engine not yet in the cluster; the ones imported."""
    import docker
    from tools.docker_engine import ensure_engine
    have = present()
    wanted = [n for n in names if _full_name(n) not in have]
    if not wanted:
        return []
    engine = ensure_engine()
    for name in wanted:
        try:
            image = engine.client.images.get(name)
        except docker.errors.ImageNotFound:
            raise SystemExit(f"kube: image {name} is not in the Docker engine: run `make images` first") from None
        print(f"kube: importing {name} into the cluster", flush=True)
        ctr("images", "import", "-", stdin=b"".join(image.save(named=True)))
    return wanted


def _full_name(name: str) -> str:
    """How containerd lists a short docker name (docker.io/library/... or docker.io/...)."""
    first = name.split("/")[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        return name  # a registry named
    return f"docker.io/{name}" if "/" in name else f"docker.io/library/{name}"
