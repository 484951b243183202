"""What the docker and kubernetes platforms share: the image contract, names,
ports, the container's start script and its health probes.

A Kafka container runs the java command lines of `java_service` (the local
platform's, with the image's paths), started by a small `sh` script, not by
the image's own scripts. So any image works that holds (the image contract):

- a JRE, `java` on its PATH, plus `sh` and `bash` (the start script, probes);
- Kafka's jars in IMAGE_KAFKA_LIBS (the official `apache/kafka` has them);
- a user with uid IMAGE_KAFKA_UID that runs the container and owns
  IMAGE_DATA_DIR (so a fresh volume mounted there is writable);
- for metrics, the pinned JMX exporter agent at `image_jmx_agent()` (docker
  uploads it there from .tools; on kubernetes the image must carry it).

A Spark image for the validation job (`bin/spark-submit` in
SPARK_HOME_IN_IMAGE, Python, user IMAGE_SPARK_UID) must carry
the spark-sql-kafka jars of `make spark-kafka` in IMAGE_SPARK_JARS (docker
uploads them there). Nothing is downloaded when a container or pod starts.
"""
from __future__ import annotations

import re
import shlex
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from mirrorstack import toolchain
from mirrorstack.platforms.base import python_service_config
from mirrorstack.platforms.descriptions import TOOLS_CONFIG
from mirrorstack.platforms.java_service import JavaRuntime
from mirrorstack.versions import jmx_exporter_version, official_image

HOST = "127.0.0.1"  # published ports and port-forwards: loopback of the Pulumi program's host
ADMIN_PORT_NAME = "admin"  # a broker's listener for the ACL resource (Platform.admin_listener)
FILES_ROOT = "/opt/mirrorstack"  # a service's files: FILES_ROOT/<service>
JOB_DIR = "/opt/mirrorstack/validation"  # the Spark validation job's files
JOB_TIMEOUT_SECONDS = 2 * 3600  # a validation run: the whole of a large backlog read by Spark
CLIENTS_ROOT = "/etc/mirrorstack/clients"  # a cluster's client folder: CLIENTS_ROOT/<alias>
CONTAINER_PORTS = {"kafka": 9092, "controller": 9093, "rest": 8083}

# The image contract (see the module docstring). IMAGE_LIB mirrors .tools: jmx/, spark-kafka/.
IMAGE_JAVA = "java"
IMAGE_KAFKA_LIBS = "/opt/kafka/libs"
IMAGE_KAFKA_UID = 1000  # `appuser` of apache/kafka
IMAGE_DATA_DIR = "/var/lib/kafka/data"
IMAGE_SPARK_UID = 185  # `spark` of apache/spark
IMAGE_LIB = "/opt/mirrorstack/lib"
IMAGE_SPARK_JARS = f"{IMAGE_LIB}/spark-kafka"
SPARK_HOME_IN_IMAGE = "/opt/spark"
# The spark image's work folder, its user's own: where a Python service that runs Spark keeps its
# state (a container's file system is kept when the container restarts).
IMAGE_SPARK_STATE_DIR = f"{SPARK_HOME_IN_IMAGE}/work-dir"

# After-start steps (e.g. creating the SCRAM user) retry while the broker comes up;
# the health check reports healthy only once they are done (the marker file).
AFTER_START_DONE = "/tmp/mirrorstack-after-start.done"
AFTER_START_ATTEMPTS = 36
AFTER_START_PAUSE = 5  # seconds between attempts: 3 minutes in all, plus the attempts themselves
READY_PAUSE = 5  # seconds between readiness checks (two short JVMs each)


class OfficialImages:
    """The pinned official images: what a topology without `images:` runs."""

    def of(self, key: str) -> str:
        return official_image(key)


OFFICIAL_IMAGES = OfficialImages()


def image_jmx_agent() -> str:
    """The pinned JMX exporter agent inside a Kafka image (the name .tools gives it)."""
    version = jmx_exporter_version()
    return f"{IMAGE_LIB}/jmx/jmx_prometheus_javaagent-{version}.jar"


def image_spark_jars() -> list[str]:
    """The spark-sql-kafka jars inside a Spark image: those `make spark-kafka` installed."""
    return [f"{IMAGE_SPARK_JARS}/{jar.name}" for jar in toolchain.spark_kafka_jars()]


def image_runtime() -> JavaRuntime:
    """java, Kafka's jars and the JMX agent as an image holds them."""
    return JavaRuntime(java=IMAGE_JAVA, kafka_libs=IMAGE_KAFKA_LIBS, jmx_agent=image_jmx_agent())


def dns_label(name: str, max_len: int = 63) -> str:
    """A DNS-1035 label (lowercase, [a-z0-9-], starts with a letter). A name
    that had to change gets a hash suffix, so `US_east` and `us-east` differ."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not label[:1].isalpha():
        label = f"s-{label}".strip("-")
    if label != name or len(label) > max_len:
        suffix = f"{zlib.crc32(name.encode()):08x}"[:6]
        label = f"{label[:max_len - 7].rstrip('-')}-{suffix}"
    return label


def container_port(port_name: str, taken: set[int]) -> int:
    """Fixed ports for the known port names; others hashed into 9100-9899."""
    port = CONTAINER_PORTS.get(port_name) or 9100 + zlib.crc32(port_name.encode()) % 800
    while port in taken:
        port += 1
    return port


def rejoined_check(node_id: str, brokers: list[str], describe: list[str]) -> str:
    """POSIX sh (the image's /bin/sh) that succeeds once broker `node_id` is
    registered, every partition with a replica on a registered broker has it
    in its ISR, and every partition whose ISR holds a registered broker has a
    leader: local/health.py's rule for a rolling restart, asked with Kafka's
    own tools (`brokers`: kafka-broker-api-versions, `describe`: kafka-topics
    --describe). Replicas on brokers that are down do not count."""
    # kafka-topics separates a partition's fields by tabs ("\tReplicas: 1,2\tIsr: 1"), so a
    # tab before the name tells "Replicas:" from "Adding Replicas:" during a reassignment.
    field = "printf '%s\\n' \"$line\" | sed -n \"s/.*\t$1: \\([^\t]*\\).*/\\1/p\""
    return "\n".join([
        f"live=\" $({shlex.join(brokers)} 2>/dev/null | sed -n 's/.*(id: \\([0-9][0-9]*\\) rack.*/\\1/p' "
        "| tr '\\n' ' ')\"",
        f"case \"$live\" in *\" {node_id} \"*) ;; *) exit 1 ;; esac",
        f"out=$({shlex.join(describe)} 2>/dev/null) || exit 1",
        f"field() {{ {field}; }}",
        "printf '%s\\n' \"$out\" | while IFS= read -r line; do",
        "  case \"$line\" in *'Partition: '*) ;; *) continue ;; esac",
        "  leader=$(field Leader); isr=$(field Isr)",
        "  for r in $(field Replicas | tr ',' ' '); do",  # a live replica out of the ISR: catching up
        "    case \"$live\" in *\" $r \"*) case \",$isr,\" in *\",$r,\"*) ;; *) exit 1 ;; esac ;; esac",
        "  done",
        "  case \"$live\" in *\" $leader \"*) continue ;; esac",  # no live leader while a live replica is in the ISR
        "  for r in $(printf '%s' \"$isr\" | tr ',' ' '); do case \"$live\" in *\" $r \"*) exit 1 ;; esac; done",
        "done"])


READY_CHECK_CONFIG = "ready-check.properties"  # the Kafka tools' client settings on a secured listener
BROKER_VERSIONS_MAIN = "org.apache.kafka.tools.BrokerApiVersionsCommand"  # kafka-broker-api-versions.sh
TOPICS_MAIN = "org.apache.kafka.tools.TopicCommand"  # kafka-topics.sh


def tasks_running_check(host: str, port: int, auth_file: str | None = None) -> str:
    """sh that succeeds once Connect's `/health` says healthy (its herder has read the
    group's internal topics: before, the worker lists no connectors at all), then
    `/connectors?expand=status` lists every connector and task RUNNING, or
    deliberately PAUSED or STOPPED: connect/readiness.py's check after a worker's
    restart (the group rebalanced, its tasks run again; a group without connectors
    passes). bash for /dev/tcp (the image's /bin/sh may be dash)."""
    health = _http_get(host, port, "/health", auth_file)
    get = _http_get(host, port, "/connectors?expand=status", auth_file)
    script = (f"health=$({health}) && printf '%s' \"$health\" | head -n 1 | grep -q ' 200 ' && "
              f"out=$({get}) && printf '%s' \"$out\" | head -n 1 | grep -q ' 200 ' && "
              "! printf '%s' \"$out\" | grep -o '\"state\":\"[A-Z_]*\"' "
              "| grep -qv -e '\"RUNNING\"' -e '\"PAUSED\"' -e '\"STOPPED\"'")
    return f"bash -c {shlex.quote(script)}"


@dataclass(frozen=True)
class ReadyGate:
    """A readiness check the start script runs after the service answers
    (container_script's `ready_check`): Kafka tools it needs (java_service
    makes their command lines, passed to `script`) and files they read."""
    tools: list[tuple[str, list[str]]]
    files: dict[str, str]
    script: Callable[[list[list[str]]], str]


def ready_gate(health: dict, in_network, folder: str, files: dict[str, str]) -> ReadyGate | None:
    """What a rolling restart waits for on local, for a service in a container:
    a broker (health kind kafka with its node id) rejoined every ISR, asked with
    Kafka's tools on its own listener (on a secured one with the settings of the
    service's file the health's `tools_config` names, a copy of it: the node's
    own certificate); a Connect worker's group runs every task. None for other
    services (their probe is enough)."""
    if health.get("kind") == "connect":
        url = urlsplit(health["url"])
        host, port = in_network(url.hostname, url.port or 80)
        return ReadyGate([], {}, lambda _: tasks_running_check(host, port, health.get("auth_file")))
    if health.get("kind") != "kafka" or "node_id" not in health:
        return None
    host, port = tcp_target(health, in_network)
    common, gate_files = ["--bootstrap-server", f"{host}:{port}"], {}
    if TOOLS_CONFIG in health:
        gate_files[READY_CHECK_CONFIG] = files[health[TOOLS_CONFIG]]
        common += ["--command-config", f"{folder}/{READY_CHECK_CONFIG}"]
    node_id = health["node_id"]
    return ReadyGate([(BROKER_VERSIONS_MAIN, common), (TOPICS_MAIN, [*common, "--describe"])], gate_files,
                     lambda argvs: rejoined_check(node_id, *argvs))


def container_script(service: list[str], prepare: list[list[str]] = (), after_start: list[list[str]] = (),
                     ready_check: str | None = None) -> str:
    """The `sh -c` script running a `java_service`'s command lines: the
    one-time preparation steps (idempotent), then `exec` the service, so the
    JVM replaces the shell as PID 1 and receives the stop signal itself (a
    clean, controlled shutdown).

    With `after_start` steps (run once the service answers, e.g. creating the
    SCRAM user) the shell stays: it starts the service in the background,
    retries each step until it succeeds (the broker needs a few seconds),
    touches AFTER_START_DONE (which the health check requires), then waits
    for the service, forwarding TERM/INT to it, and exits with its status.
    A step that never succeeds stops the service (exit 1, so the container
    restarts and the steps run again).

    `ready_check` (a sh script, e.g. `rejoined_check`) then runs every
    READY_PAUSE seconds, with no cap, until it succeeds; only then is the
    marker touched: the service is not ready (a roll does not go on) while,
    say, its partitions catch up, however long that takes, and it is never
    stopped for it."""
    steps = [shlex.join(argv) for argv in prepare]
    if not after_start and not ready_check:
        return " && ".join([*steps, "exec " + shlex.join(service)])
    lines = [f"rm -f {AFTER_START_DONE}", *(f"{step} || exit $?" for step in steps),
             f"{shlex.join(service)} &",
             "pid=$!",
             "stopping=",
             "trap 'stopping=1; kill -TERM \"$pid\" 2>/dev/null' TERM INT",
             "failed="]
    for i, argv in enumerate(after_start):
        lines += [
            "n=0",
            # Stop trying when stopping, after a failed step, or when the service is gone (its status tells).
            f"until [ -n \"$stopping$failed\" ] || ! kill -0 \"$pid\" 2>/dev/null || {shlex.join(argv)}; do",
            "  n=$((n + 1))",
            f"  if [ \"$n\" -ge {AFTER_START_ATTEMPTS} ]; then",
            f"    echo 'mirrorstack: after-start step {i + 1} ({_main_class(argv)}) did not succeed; "
            "stopping the service' >&2",
            "    failed=1; kill -TERM \"$pid\" 2>/dev/null; break",
            "  fi",
            f"  sleep {AFTER_START_PAUSE}",
            "done"]
    if ready_check:
        lines += ["until [ -n \"$stopping$failed\" ] || ! kill -0 \"$pid\" 2>/dev/null || (",
                  ready_check,
                  f"); do sleep {READY_PAUSE}; done"]
    lines += [f"[ -n \"$stopping$failed\" ] || ! kill -0 \"$pid\" 2>/dev/null || touch {AFTER_START_DONE}",
              # `wait` returns early when a trapped signal arrives: wait again until the JVM is gone.
              "wait \"$pid\"; status=$?",
              "while kill -0 \"$pid\" 2>/dev/null; do wait \"$pid\"; status=$?; done",
              "[ -z \"$failed\" ] || exit 1",
              "exit \"$status\""]
    return "\n".join(lines)


def _main_class(argv: list[str]) -> str:
    """The main class of a java command line (the word after the classpath)."""
    return argv[argv.index("-cp") + 2] if "-cp" in argv else argv[0]


def _http_get(host: str, port: int, path: str, auth_file: str | None = None) -> str:
    # No curl/wget in the image: plain HTTP/1.0 over bash's /dev/tcp.
    if auth_file is None:
        request = r"'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n'"  # printf turns \r\n into CR LF
        return f"exec 3<>/dev/tcp/{host}/{port} && printf {request} {shlex.quote(path)} {host} >&3 && cat <&3"
    # Basic auth from a Connect credentials file (`user: password`), read at probe time:
    # the password is in no command line (printf is a shell builtin; base64 reads stdin).
    request = r"'GET %s HTTP/1.0\r\nHost: %s\r\nAuthorization: Basic %s\r\n\r\n'"
    read = ('{ IFS= read -r line || [ -n "$line" ]; } < ' + shlex.quote(auth_file) + ' && user="${line%%:*}" && '
            'password="${line#*:}" && '
            'password="${password# }" && auth="$(printf %s:%s "$user" "$password" | base64 | tr -d \'\\n\')"')
    return (f"{read} && exec 3<>/dev/tcp/{host}/{port} && "
            f"printf {request} {shlex.quote(path)} {host} \"$auth\" >&3 && cat <&3")


def tcp_target(spec: dict, in_network) -> tuple[str, int] | None:
    """The address a `tcp` or `kafka` health spec is checked at inside the
    network, else None. A broker is checked by a TCP connect to its listener,
    not by a Kafka client (a JVM every few seconds in every container): Kafka
    opens a listener with a fixed port only when it starts serving requests,
    once the broker has caught up with the metadata log (SocketServer's
    acceptors start in `enableRequestProcessing`), so accepting is the sign."""
    if spec["kind"] in ("tcp", "controller"):  # a quorum member: containers probe its listener only
        return in_network(spec["host"], int(spec["port"]))
    if spec["kind"] == "kafka":
        host, _, port = spec["bootstrap"].split(",")[0].rpartition(":")
        return in_network(host, int(port))
    return None


def probe_command(spec: dict, in_network, *, ready_file: str | None = None) -> list[str]:
    """A health spec (see local/health.py::check) as a command run inside the
    container, with bash and no JVM. `in_network(host, port)` turns an address
    the Pulumi program uses (a published port) into the one reachable from
    inside. `ready_file`: must exist too (the after-start steps are done)."""
    command = _probe(spec, in_network)
    if ready_file:
        return ["bash", "-c", f"test -f {shlex.quote(ready_file)} && {command}"]
    return ["bash", "-c", command]


def _probe(spec: dict, in_network) -> str:
    kind = spec["kind"]
    target = tcp_target(spec, in_network) if kind in ("tcp", "controller", "kafka") else None
    if target is not None:
        return f"exec 3<>/dev/tcp/{target[0]}/{target[1]}"
    if kind in ("http", "connect"):
        url = urlsplit(spec["url"])
        host, port = in_network(url.hostname, url.port or 80)
        if kind == "connect":  # as local: healthy (it has read its group's topics), the MM2 plugins listed
            health = _http_get(host, port, "/health", spec.get("auth_file"))
            request = _http_get(host, port, "/connector-plugins", spec.get("auth_file"))
            return f"{health} | head -n 1 | grep -q ' 200 ' && {request} | grep -q MirrorSourceConnector"
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        return _http_get(host, port, path) + " | head -n 1 | grep -q ' 200 '"
    raise ValueError(f"unknown health check kind {kind!r}")


# A control-plane Python service (a PythonModuleService) in the spark image: python3,
# urllib3 and prometheus_client are there; the modules it runs are shipped as source
# beside its config.
PYTHON_SERVICE_PORT = 9405  # its /healthz and /metrics


@dataclass(frozen=True)
class PythonService:
    folder: str
    code: dict[str, str]  # absolute path in the container → module source
    argv: list[str]  # `python3 -m`: run in code_dir (or with it on PYTHONPATH), the module is found there
    secrets_file: str | None
    spark: dict | None = None  # a service that runs Spark: its spark_jars and state_dir

    @property
    def code_dir(self) -> str:
        return f"{self.folder}/code"

    @property
    def config_file(self) -> str:
        return f"{self.folder}/config.json"

    def config_text(self, config: dict) -> str:
        return python_service_config(config, f"0.0.0.0:{PYTHON_SERVICE_PORT}", self.secrets_file, self.spark)


def python_service(service: str, module: str, ships, has_secrets: bool, runs_spark: bool = False) -> PythonService:
    from mirrorstack.shipping import module_sources
    folder = f"{FILES_ROOT}/{dns_label(service)}"
    code = {f"{folder}/code/{path}": text.decode() for path, text in module_sources(ships).items()}
    spark = {"spark_jars": image_spark_jars(), "state_dir": IMAGE_SPARK_STATE_DIR} if runs_spark else None
    return PythonService(folder, code, ["python3", "-B", "-m", module, f"{folder}/config.json"],
                         f"{folder}/secrets/config.json" if has_secrets else None, spark)
