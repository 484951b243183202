"""What runs Prometheus and Grafana, as descriptions a platform runs (Platform.run):
the official images where the platform runs containers, else Prometheus as this
machine's binary and Grafana's files only (for any Grafana a person starts)."""
from __future__ import annotations

from collections.abc import Callable

from mirrorstack import toolchain
from mirrorstack.platforms.base import fill_dir
from mirrorstack.platforms.descriptions import ImageService, ProcessService, Service, WrittenFiles

PROMETHEUS_PORT, PROMETHEUS_USER = 9090, 65534  # the official image's port and user (nobody)
PROMETHEUS_DIR = "/etc/mirrorstack/prometheus"  # its files in the container
PROMETHEUS_DATA = "/prometheus"  # where the image keeps its TSDB
GRAFANA_PORT, GRAFANA_USER = 3000, 472
GRAFANA_HOME = {"provisioning/": "/etc/grafana/", "dashboards/": "/var/lib/grafana/"}  # file key prefix → folder
GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards"
GRAFANA_PASSWORD_FILE = "/etc/mirrorstack/grafana-admin-password"


def prometheus_service(name: str, files: dict, platform, runs_containers: bool) -> Service:
    """Prometheus with `files` (prometheus.yml and its rule files; `{dir}` is their folder)."""
    if runs_containers:
        return ImageService(
            name, "prometheus", PROMETHEUS_PORT, user=PROMETHEUS_USER, publish=True, scratch=PROMETHEUS_DATA,
            args=[f"--config.file={PROMETHEUS_DIR}/prometheus.yml", f"--storage.tsdb.path={PROMETHEUS_DATA}"],
            files={key: fill_dir(content, PROMETHEUS_DIR) for key, content in files.items()},
            paths={key: f"{PROMETHEUS_DIR}/{key}" for key in files})
    host, port = platform.address(name, "web")
    url = f"http://{host}:{port}"
    return ProcessService(
        name, argv=[toolchain.prometheus_binary(), "--config.file={dir}/prometheus.yml",
                    "--storage.tsdb.path={dir}/data", f"--web.listen-address={host}:{port}"],
        files=files, health={"kind": "http", "url": f"{url}/-/ready"}, url=url)


def grafana_service(name: str, files: Callable[[str, str], dict], prometheus_url, admin_password, platform,
                    runs_containers: bool) -> Service:
    """Grafana with `files(prometheus_url, dashboards folder)` (its provisioning: the
    datasource, and the dashboards); the admin password read from a secret file
    (Grafana's `__FILE` variables), so it is in no environment or command line."""
    if not runs_containers:  # paths independent of Grafana's --homepath
        return WrittenFiles(name, files(prometheus_url, f"{platform.service_dir(name)}/dashboards"))
    made = files(prometheus_url, GRAFANA_DASHBOARDS)
    paths = {key: GRAFANA_HOME[prefix] + key for key in made for prefix in GRAFANA_HOME if key.startswith(prefix)}
    return ImageService(
        name, "grafana", GRAFANA_PORT, user=GRAFANA_USER, publish=True, files=made,
        secret_files={"admin-password": admin_password}, paths={**paths, "admin-password": GRAFANA_PASSWORD_FILE},
        env=(("GF_SECURITY_ADMIN_PASSWORD__FILE", GRAFANA_PASSWORD_FILE), ("GF_USERS_ALLOW_SIGN_UP", "false")))
