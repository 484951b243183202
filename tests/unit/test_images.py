"""The pure parts of `make images` and the private engine: names, pins, hashes, recipes."""
from __future__ import annotations

import pytest

from mirrorstack import versions
from mirrorstack.validation.job_config import SPARK_HOME_IN_IMAGE
from mirrorstack.platforms.containers import IMAGE_DATA_DIR, IMAGE_KAFKA_LIBS, IMAGE_SPARK_JARS, image_jmx_agent
from tools import docker_engine, images


def test_image_names_carry_the_pinned_versions():
    assert versions.mirrorstack_image("kafka") == f"mirrorstack/kafka:{versions.kafka_version()}"
    assert versions.mirrorstack_image("spark") == f"mirrorstack/spark:{versions.spark_version()}"
    assert versions.mirrorstack_image("prometheus") == f"mirrorstack/prometheus:{versions.debian_prometheus_version()}"
    assert [spec.key for spec in images.image_specs()] == list(versions.MIRRORSTACK_IMAGES)


def test_no_grafana_image_and_the_error_says_where_to_point():
    with pytest.raises(ValueError, match=r"images\.<key>.*registry") as error:
        versions.mirrorstack_image("grafana")
    assert "kafka, spark, prometheus" in str(error.value)


@pytest.mark.parametrize("debian, upstream", [
    ("2.42.0+ds-5+deb12u1", "2.42.0"), ("1:2.42.0-1", "2.42.0"), ("17.0.15+6-1~deb12u1", "17.0.15"),
    ("5.2.15-2+b7", "5.2.15"), ("3.11.2-1+b1", "3.11.2")])
def test_upstream_version(debian, upstream):
    assert images.upstream_version(debian) == upstream


def test_installed_versions_reads_only_installed_packages():
    status = ("Package: prometheus\nStatus: install ok installed\nVersion: 2.42.0+ds-5+deb12u1\n"
              "Description: monitoring\n Version: not this\n\n"
              "Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0-1\n")
    assert images.installed_versions(status) == {"prometheus": "2.42.0+ds-5+deb12u1"}


@pytest.mark.parametrize("key, package, pin", [
    ("prometheus", "prometheus", "DEBIAN_PROMETHEUS_VERSION"),
    ("spark", "python3-prometheus-client", "DEBIAN_PROMETHEUS_CLIENT_VERSION")])
def test_a_debian_package_version_other_than_the_pin_fails_naming_the_pin(key, package, pin):
    spec = next(s for s in images.image_specs() if s.key == key)
    assert package in spec.packages and spec.checks[package] == versions.debian_package_version(package)
    images.check_packages(spec, {package: f"{spec.checks[package]}+ds-5"})
    with pytest.raises(images.BuildError, match=rf"{pin} .* to 9\.9\.9"):
        images.check_packages(spec, {package: "9.9.9+ds-1"})
    with pytest.raises(images.BuildError, match="missing"):
        images.check_packages(spec, {})


def _spec(**changes):
    base = dict(key="kafka", packages=("bash", "openjdk-17-jre-headless"), hooks=("true",), dockerfile="USER 1000")
    return images.ImageSpec(**{**base, **changes})


def test_rootfs_key_follows_suite_packages_and_hooks_not_their_order():
    key = images.rootfs_key(_spec(), "bookworm")
    assert images.rootfs_key(_spec(packages=("openjdk-17-jre-headless", "bash")), "bookworm") == key
    assert images.rootfs_key(_spec(), "trixie") != key
    assert images.rootfs_key(_spec(packages=("bash",)), "bookworm") != key
    assert images.rootfs_key(_spec(hooks=("false",)), "bookworm") != key
    # The Dockerfile is no part of the root file system.
    assert images.rootfs_key(_spec(dockerfile="USER 185"), "bookworm") == key


def test_inputs_hash_follows_every_input(tmp_path):
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"one")
    jar.chmod(0o644)
    files = {"kafka-libs/a.jar": jar}
    digest = images.inputs_hash(_spec(), "bookworm", files)
    assert images.inputs_hash(_spec(), "bookworm", dict(files)) == digest  # deterministic
    assert images.inputs_hash(_spec(dockerfile="USER 185"), "bookworm", files) != digest
    assert images.inputs_hash(_spec(packages=("bash",)), "bookworm", files) != digest
    assert images.inputs_hash(_spec(), "bookworm", {"kafka-libs/b.jar": jar}) != digest  # where it goes
    jar.chmod(0o755)
    assert images.inputs_hash(_spec(), "bookworm", files) != digest  # its mode
    jar.chmod(0o644)
    jar.write_bytes(b"two")
    assert images.inputs_hash(_spec(), "bookworm", files) != digest  # its content
    jar.write_bytes(b"one")
    assert images.inputs_hash(_spec(), "bookworm", files) == digest


def test_the_specs_put_the_contract_paths_in_place():
    specs = {spec.key: spec for spec in images.image_specs()}
    kafka, spark, prometheus = specs["kafka"].dockerfile, specs["spark"].dockerfile, specs["prometheus"].dockerfile
    assert f"COPY kafka-libs/ {IMAGE_KAFKA_LIBS}/" in kafka
    assert image_jmx_agent().startswith(kafka.split("COPY jmx/ ")[1].split()[0])
    assert "USER 1000" in kafka and any(IMAGE_DATA_DIR in hook and "1000:1000" in hook for hook in specs["kafka"].hooks)
    assert f"COPY pyspark/ {SPARK_HOME_IN_IMAGE}/" in spark and f"COPY spark-kafka/ {IMAGE_SPARK_JARS}/" in spark
    assert "USER 185" in spark and f"SPARK_HOME={SPARK_HOME_IN_IMAGE}" in spark
    assert 'ENTRYPOINT ["/usr/bin/prometheus"]' in prometheus and "VOLUME" not in prometheus  # no stray volumes
    assert images.dockerfile(specs["kafka"]).startswith("FROM scratch\nADD rootfs.tar /\n")
    assert not any(" RUN " in f" {images.dockerfile(s)}" for s in specs.values())  # no RUN: no network needed


def test_user_hooks_add_the_user_and_the_folders_it_owns():
    hooks = images.user_hooks("appuser", 1000, "/home/appuser", ["/var/lib/kafka/data"])
    assert hooks[0] == 'echo "appuser:x:1000:1000::/home/appuser:/bin/bash" >> "$1/etc/passwd"'
    assert 'mkdir -p "$1/var/lib/kafka/data" && chown 1000:1000 "$1/var/lib/kafka/data"' in hooks


def test_the_private_dockerd_keeps_to_its_own_paths():
    argv = docker_engine.dockerd_command()
    assert argv[0] == "dockerd" and "--bridge=none" in argv
    assert f"--host=unix://{docker_engine.SOCKET}" in argv
    assert f"--data-root={docker_engine.DATA_ROOT}" in argv and f"--exec-root={docker_engine.EXEC_ROOT}" in argv
    assert f"--pidfile={docker_engine.PID_FILE}" in argv


def test_no_engine_and_no_dockerd_names_the_make_step(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(docker_engine, "answering", lambda url: None)  # nothing answers
    monkeypatch.setattr(docker_engine.shutil, "which", lambda program: None)
    with pytest.raises(docker_engine.EngineError, match="`make docker-engine`"):
        docker_engine.ensure_engine()


def test_the_images_cli_refuses_an_image_it_does_not_build(capsys):
    with pytest.raises(SystemExit):
        images.main(["grafana"])
    assert "no image grafana: choose from kafka, spark, prometheus" in capsys.readouterr().err
