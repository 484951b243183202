"""`make images`: the mirrorstack/* images, built from Debian packages with no registry.

Each image is a minimal Debian root file system made by mmdebstrap from the
pinned suite (components/versions.env: DEBIAN_SUITE) with the packages it needs,
its user and folders made by hooks; the tar is cached under
~/.cache/mirrorstack/, keyed by suite, sources, packages and hooks. A Dockerfile
with no RUN step (`FROM scratch`, `ADD` the tar, `COPY` the project's own .tools
and .venv content) builds it into the engine of tools/docker_engine.py.

The images honour the contract of components/platforms/containers.py:
- mirrorstack/kafka:<KAFKA_VERSION>: JRE 17, bash, Kafka's jars (.tools/kafka)
  in IMAGE_KAFKA_LIBS, the JMX agent (.tools/jmx) at image_jmx_agent(), user
  uid IMAGE_KAFKA_UID owning IMAGE_DATA_DIR;
- mirrorstack/spark:<pyspark version>: JRE 17, python3, the .venv's pyspark as
  SPARK_HOME_IN_IMAGE (so the versions match), the spark-sql-kafka jars
  (.tools/spark-kafka) in IMAGE_SPARK_JARS, user uid IMAGE_SPARK_UID,
  the .venv's confluent_kafka and urllib3 (the failover switch in a pod), its
  pandas and pyarrow (the continuous validator's driver and executors), and
  Debian's python3-prometheus-client (the Connect supervisor's /metrics);
- mirrorstack/prometheus:<DEBIAN_PROMETHEUS_VERSION>: Debian's prometheus,
  entrypoint `prometheus` (flags only, as with prom/prometheus), /prometheus
  writable by its user (nobody, as in prom/prometheus).

An image whose inputs are unchanged (the hash in its INPUTS_LABEL) is skipped,
so a warm run hashes the inputs, asks the engine and is done.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from docker.errors import ImageNotFound

from mirrorstack import toolchain, versions
from mirrorstack.platforms.containers import (IMAGE_DATA_DIR, IMAGE_KAFKA_LIBS, IMAGE_KAFKA_UID,
                                             IMAGE_SPARK_JARS, IMAGE_SPARK_STATE_DIR, IMAGE_SPARK_UID,
                                             SPARK_HOME_IN_IMAGE, image_jmx_agent)

INPUTS_LABEL = "org.mirrorstack.inputs"  # sha256 of everything an image is made of
MMDEBSTRAP_VARIANT = "apt"  # Essential + apt: the smallest set apt can add packages to
# Merged /usr made by symlinks, not by the usrmerge package (which pulls in 45 MB of Perl).
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"
# No docs (but the copyrights), man pages or translations in the images: removed once
# installed (excluding them from dpkg breaks maintainer scripts linking man pages).
SLIM_HOOK = ('rm -rf "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/usr/share/locale/* '
             '"$1"/var/cache/debconf/*-old "$1"/var/log/apt/* "$1"/var/log/dpkg.log '
             '&& find "$1/usr/share/doc" -type f ! -name copyright -delete')
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mirrorstack"


def debian_sources(suite: str, mirror: str = "http://deb.debian.org/debian",
                   security: str = "http://deb.debian.org/debian-security") -> list[str]:
    """The suite with its updates and security fixes (the mirror may be overridden:
    MIRRORSTACK_DEBIAN_MIRROR; the packages, so the cache key, stay the same)."""
    return [f"deb {mirror} {suite} main", f"deb {mirror} {suite}-updates main",
            f"deb {security} {suite}-security main"]


def user_hooks(name: str, uid: int, home: str, owned: list[str]) -> list[str]:
    """mmdebstrap customize hooks ($1: the root) adding a user (no `passwd` package
    needed) and the folders it owns."""
    hooks = [f'echo "{name}:x:{uid}:{uid}::{home}:/bin/bash" >> "$1/etc/passwd"',
             f'echo "{name}:x:{uid}:" >> "$1/etc/group"']
    for folder in [home, *owned]:
        hooks.append(f'mkdir -p "$1{folder}" && chown {uid}:{uid} "$1{folder}"')
    return hooks


@dataclass(frozen=True)
class ImageSpec:
    key: str  # versions.mirrorstack_image's key
    packages: tuple[str, ...]
    hooks: tuple[str, ...]
    dockerfile: str  # after `FROM scratch` + `ADD rootfs.tar /`
    files: Callable[[], dict[str, Path]] = field(default=lambda: {}, compare=False)  # context path -> source
    checks: dict[str, str] = field(default_factory=dict)  # Debian package -> its pinned upstream version, asserted

    @property
    def name(self) -> str:
        return versions.mirrorstack_image(self.key)


def _kafka_files() -> dict[str, Path]:
    libs = toolchain.kafka_libs()
    files = {f"kafka-libs/{jar.name}": jar for jar in sorted(libs.glob("*.jar"))}
    files["jmx/" + Path(image_jmx_agent()).name] = toolchain.jmx_agent_jar()
    return files


def _spark_files() -> dict[str, Path]:
    import py4j
    import pyspark

    files = {f"spark-kafka/{jar.name}": jar for jar in toolchain.spark_kafka_jars()}
    for prefix, package in (("pyspark", Path(pyspark.__file__).parent), ("py4j", Path(py4j.__file__).parent),
                            *switch_packages(), *streaming_packages()):
        for path in sorted(package.rglob("*")):
            relative = path.relative_to(package)
            # No bytecode caches, no Windows scripts, no test suites or C headers: python3 compiles what it runs.
            if (path.is_file() and not {"__pycache__", "tests", "include"} & set(relative.parts)
                    and path.suffix != ".cmd"):
                files[f"{prefix}/{relative}"] = path
    return files


def _venv_packages(modules, libs: tuple[str, ...] = ()) -> list[tuple[str, Path]]:
    """The .venv's packages of `modules`, and the folders `libs` of shared libraries their wheels
    bundle beside them, under python-packages/ in the COPY context (the image's python3 is the same
    CPython 3.11, so the wheels' binaries load there)."""
    site = Path(modules[0].__file__).parent.parent
    folders = [Path(m.__file__).parent for m in modules] + [site / lib for lib in libs]
    return [(f"python-packages/{folder.name}", folder) for folder in folders if folder.is_dir()]


def switch_packages() -> list[tuple[str, Path]]:
    """What the failover switch needs beside python3 when it runs in a pod
    (components/failover/kube_job.py): confluent_kafka (librdkafka in
    confluent_kafka.libs) and urllib3."""
    import confluent_kafka
    import urllib3

    return _venv_packages((confluent_kafka, urllib3), libs=("confluent_kafka.libs",))


def streaming_packages() -> list[tuple[str, Path]]:
    """What the continuous validator (spark/streaming.py, `applyInPandasWithState`) needs beside
    pyspark in its driver's and its executors' python3: pandas and pyarrow with their dependencies
    (Debian's pandas is older than PySpark accepts)."""
    import dateutil
    import numpy
    import pandas
    import pyarrow
    import pytz
    import tzdata

    return _venv_packages((pandas, numpy, pyarrow, dateutil, pytz, tzdata), libs=("numpy.libs",))


def image_specs() -> list[ImageSpec]:
    kafka_home = "/home/appuser"
    spark_home_dir = "/home/spark"
    kafka = ImageSpec(
        "kafka", packages=("openjdk-17-jre-headless", "bash"),
        hooks=tuple(user_hooks("appuser", IMAGE_KAFKA_UID, kafka_home, [IMAGE_DATA_DIR])),
        dockerfile="\n".join([
            f"COPY kafka-libs/ {IMAGE_KAFKA_LIBS}/",
            f"COPY jmx/ {Path(image_jmx_agent()).parent}/",
            f"ENV PATH={PATH} LANG=C.UTF-8 HOME={kafka_home}",
            f"USER {IMAGE_KAFKA_UID}",
            f"WORKDIR {kafka_home}",
            'CMD ["bash"]']),
        files=_kafka_files)
    python_packages = "/usr/lib/python3/dist-packages"
    spark = ImageSpec(
        "spark", packages=("openjdk-17-jre-headless", "bash", "python3", "python3-prometheus-client"),
        hooks=tuple(user_hooks("spark", IMAGE_SPARK_UID, spark_home_dir,
                               [f"{spark_home_dir}/.ivy2", IMAGE_SPARK_STATE_DIR])
                    # `import pyspark` is SPARK_HOME, as in a pip install (py4j beside it).
                    + [f'ln -s {SPARK_HOME_IN_IMAGE} "$1{python_packages}/pyspark"']),
        dockerfile="\n".join([
            f"COPY pyspark/ {SPARK_HOME_IN_IMAGE}/",
            f"COPY py4j/ {python_packages}/py4j/",
            f"COPY python-packages/ {python_packages}/",
            f"COPY spark-kafka/ {IMAGE_SPARK_JARS}/",
            f"ENV PATH={SPARK_HOME_IN_IMAGE}/bin:{PATH} LANG=C.UTF-8 HOME={spark_home_dir} "
            f"SPARK_HOME={SPARK_HOME_IN_IMAGE} PYSPARK_PYTHON=python3",
            f"USER {IMAGE_SPARK_UID}",
            f"WORKDIR {IMAGE_SPARK_STATE_DIR}",
            'CMD ["bash"]']),
        files=_spark_files, checks=_pinned("python3-prometheus-client"))
    prometheus = ImageSpec(
        "prometheus", packages=("prometheus",),
        hooks=('mkdir -p "$1/prometheus" && chown 65534:65534 "$1/prometheus"',
               # 220 MB of time zone data the web UI does not load (it loads moment-timezone-with-data.min.js).
               'rm -rf "$1/usr/share/javascript/moment-timezone/data"'),
        dockerfile="\n".join([
            f"ENV PATH={PATH} LANG=C.UTF-8",
            "USER 65534",
            "WORKDIR /prometheus",
            "EXPOSE 9090",
            'ENTRYPOINT ["/usr/bin/prometheus"]',
            'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]']),
        checks=_pinned("prometheus"))
    return [kafka, spark, prometheus]


def _pinned(*packages: str) -> dict[str, str]:
    return {package: versions.debian_package_version(package) for package in packages}


def rootfs_key(spec: ImageSpec, suite: str) -> str:
    """What the cached root file system is made of (not the mirror it came from)."""
    recipe = {"suite": suite, "sources": debian_sources(suite), "variant": MMDEBSTRAP_VARIANT,
              "hook_dir": MERGED_USR_HOOKS, "packages": sorted(spec.packages), "hooks": [*spec.hooks, SLIM_HOOK]}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def dockerfile(spec: ImageSpec) -> str:
    return f"FROM scratch\nADD rootfs.tar /\n{spec.dockerfile}\n"


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def inputs_hash(spec: ImageSpec, suite: str, files: dict[str, Path]) -> str:
    """The hash of everything the image is made of: its root file system's recipe,
    its Dockerfile, and each copied file's path, mode and content."""
    digest = hashlib.sha256()
    digest.update(f"{spec.name}\n{rootfs_key(spec, suite)}\n{dockerfile(spec)}\n".encode())
    for target in sorted(files):
        source = files[target]
        digest.update(f"{target} {source.stat().st_mode & 0o777:o} {file_digest(source)}\n".encode())
    return digest.hexdigest()


def upstream_version(debian_version: str) -> str:
    """`1:2.42.0+ds-5+deb12u1` -> `2.42.0`: no epoch, revision or repack suffix."""
    version = debian_version.split(":", 1)[-1].rsplit("-", 1)[0]
    for mark in ("+", "~"):
        version = version.split(mark, 1)[0]
    return version


def installed_versions(dpkg_status: str) -> dict[str, str]:
    """Package -> version from a /var/lib/dpkg/status text."""
    found = {}
    for stanza in dpkg_status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if "Package" in fields and "Version" in fields and fields.get("Status", "").endswith(" installed"):
            found[fields["Package"]] = fields["Version"]
    return found


class BuildError(RuntimeError):
    pass


def rootfs(spec: ImageSpec, suite: str, refresh: bool = False, log=print) -> Path:
    """The cached root file system tar; made by mmdebstrap when missing."""
    key = rootfs_key(spec, suite)[:16]
    target = cache_dir() / f"rootfs-{spec.key}-{suite}-{key}.tar"
    if target.is_file() and not refresh:
        return target
    if not shutil.which("mmdebstrap"):
        raise BuildError("mmdebstrap not found: run `make docker-engine` (installs it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    mirror = os.environ.get("MIRRORSTACK_DEBIAN_MIRROR")
    sources = debian_sources(suite, *([mirror] if mirror else []))
    argv = ["mmdebstrap", "--quiet", f"--variant={MMDEBSTRAP_VARIANT}", "--format=tar",
            "--aptopt=APT::Install-Recommends \"false\"", f"--hook-dir={MERGED_USR_HOOKS}",
            f"--include={','.join(spec.packages)}",
            *(f"--customize-hook={hook}" for hook in [*spec.hooks, SLIM_HOOK]),
            suite, str(target) + ".part", *sources]
    log(f"images: {spec.key}: mmdebstrap {suite} + {', '.join(spec.packages)} -> {target}")
    started = time.monotonic()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0:
        Path(str(target) + ".part").unlink(missing_ok=True)
        raise BuildError(f"mmdebstrap for {spec.key} failed (exit {done.returncode}): {shlex.join(argv)}\n"
                         + "\n".join(done.stderr.splitlines()[-25:]))
    os.replace(str(target) + ".part", target)
    for old in target.parent.glob(f"rootfs-{spec.key}-*.tar"):  # superseded recipes
        if old != target:
            old.unlink()
    log(f"images: {spec.key}: root file system made in {time.monotonic() - started:.0f} s "
        f"({target.stat().st_size / 1e6:.0f} MB)")
    return target


def package_versions(rootfs_tar: Path) -> dict[str, str]:
    with tarfile.open(rootfs_tar) as tar:
        for member in tar:
            if member.name.lstrip("./") == "var/lib/dpkg/status":
                return installed_versions(tar.extractfile(member).read().decode())
    raise BuildError(f"{rootfs_tar} has no var/lib/dpkg/status")


def check_packages(spec: ImageSpec, found: dict[str, str]) -> None:
    for package, wanted in spec.checks.items():
        have = found.get(package)
        if have is None or upstream_version(have) != wanted:
            raise BuildError(f"{spec.key}: the suite's {package} is {have or 'missing'}, the pin is {wanted}: "
                             f"set {versions.DEBIAN_PACKAGE_PINS[package]} in components/versions.env to "
                             f"{upstream_version(have) if have else '?'}")


def build(client, spec: ImageSpec, suite: str, files: dict[str, Path], digest: str, refresh: bool, log=print) -> None:
    """Build the image from its root file system and files (no RUN: no network, no container)."""
    tar_path = rootfs(spec, suite, refresh, log)
    found = package_versions(tar_path)
    check_packages(spec, found)
    labels = {INPUTS_LABEL: digest, "org.mirrorstack.debian-suite": suite,
              **{f"org.mirrorstack.package.{p}": found[p] for p in spec.packages if p in found}}
    started = time.monotonic()
    with tempfile.TemporaryFile(dir=cache_dir()) as context:
        with tarfile.open(fileobj=context, mode="w") as tar:
            _add_text(tar, "Dockerfile", dockerfile(spec))
            tar.add(tar_path, arcname="rootfs.tar")
            for target in sorted(files):
                tar.add(files[target], arcname=target, filter=_root_owned)
        context.seek(0)
        log(f"images: {spec.key}: building {spec.name}")
        stream = client.api.build(fileobj=context, custom_context=True, tag=spec.name, labels=labels, rm=True,
                                  forcerm=True, network_mode="none", pull=False, decode=True)
        output = []
        for chunk in stream:
            if "error" in chunk:
                raise BuildError(f"building {spec.name} failed: {chunk['error']}\n" + "".join(output[-10:]))
            output.append(chunk.get("stream", ""))
    # The image this one replaced, now untagged.
    client.images.prune(filters={"dangling": True, "label": f"{INPUTS_LABEL}"})
    size = client.images.get(spec.name).attrs["Size"]
    log(f"images: {spec.key}: built {spec.name} in {time.monotonic() - started:.0f} s ({size / 1e6:.0f} MB)")


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def current_digest(client, name: str) -> str | None:
    try:
        return (client.images.get(name).labels or {}).get(INPUTS_LABEL)
    except ImageNotFound:
        return None


def build_images(client, keys: list[str] | None = None, refresh: bool = False, log=print) -> dict[str, str]:
    """Build the images (all, or `keys`) whose inputs changed; returns name -> "built" | "up to date"."""
    suite = versions.debian_suite()
    outcome = {}
    for spec in image_specs():
        if keys and spec.key not in keys:
            continue
        files = spec.files()
        digest = inputs_hash(spec, suite, files)
        if not refresh and current_digest(client, spec.name) == digest:
            outcome[spec.name] = "up to date"
            log(f"images: {spec.name} is up to date")
            continue
        build(client, spec, suite, files, digest, refresh, log)
        outcome[spec.name] = "built"
    return outcome


def main(argv: list[str] | None = None) -> int:
    from tools.docker_engine import EngineError, ensure_engine, stop_engine

    parser = argparse.ArgumentParser(prog="python -m tools.images", description=__doc__.split("\n\n")[0])
    parser.add_argument("keys", nargs="*", metavar="IMAGE",
                        help=f"only these ({', '.join(versions.MIRRORSTACK_IMAGES)}); default: all")
    parser.add_argument("--refresh", action="store_true",
                        help="remake the root file systems (newer Debian packages) and rebuild")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.keys) - set(versions.MIRRORSTACK_IMAGES))
    if unknown:
        parser.error(f"no image {', '.join(unknown)}: choose from {', '.join(versions.MIRRORSTACK_IMAGES)}")
    started = time.monotonic()
    try:
        engine = ensure_engine()
    except EngineError as error:
        print(f"images: {error}", file=sys.stderr)
        return 1
    try:
        build_images(engine.client, args.keys, args.refresh)
    except (BuildError, toolchain.ToolMissing) as error:
        print(f"images: {error}", file=sys.stderr)
        return 1
    finally:
        stop_engine(engine)
    print(f"images: done in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
