"""What the platforms were asked to run in a mocked deploy of a stack
(tests/support/pulumi_mocks.py): containers, manifests, start scripts split
into command lines, the shipped validation job. Shared by the unit tests of
the platforms, the stacks, monitoring and security."""
from __future__ import annotations

import base64
import shlex
from pathlib import Path

from mirrorstack import toolchain
from mirrorstack.platforms.containers import JOB_DIR
from mirrorstack.validation.package import ZIP_NAME, job_zip
from tests.support.pulumi_mocks import AGGREGATION, DYNAMIC, ints

STACK = AGGREGATION
JOB = "validation-job"  # the Spark validation job the aggregation stack runs


def connectors_of(mocks) -> dict[str, dict]:
    return {n: r for n, r in mocks.of_type(DYNAMIC).items() if n.endswith("-connectors")}


def containers(mocks, *, job: bool = False, supervisors: bool = False):
    """The services' containers (or, with job, only the validation job's; with
    supervisors, only the Connect groups' self-healing supervisors')."""
    found = mocks.of_type("docker:index/container:Container")
    return {n: c for n, c in found.items() if (n == JOB) == job and n.startswith("supervisor-") == supervisors}


def manifests_of(built, kind: str) -> dict[str, dict]:
    return {m["metadata"]["name"]: m for m in built["manifests"] if m["kind"] == kind}


def shipped_job(platform: str, mocks, built) -> tuple[bytes, list[str], str]:
    """(the job package's zip as the platform ships it, spark-submit's argv, the
    folder the zip lands in): docker uploads it, kubernetes puts it in the job's
    ConfigMap as binary data."""
    if platform == "docker":
        container = mocks.of_type("docker:index/container:Container")[JOB]
        uploads = {u["file"]: u for u in ints(container["uploads"])}
        return base64.b64decode(uploads[f"{JOB_DIR}/{ZIP_NAME}"]["contentBase64"]), container["command"], JOB_DIR
    config_map = manifests_of(built, "ConfigMap")[f"{JOB}-job"]
    (container,) = manifests_of(built, "Job")[JOB]["spec"]["template"]["spec"]["containers"]
    return base64.b64decode(config_map["binaryData"][ZIP_NAME]), container["command"], f"{JOB_DIR}/job"


def assert_ships_the_job_package(platform: str, mocks, built) -> None:
    """The `spark` package goes to spark-submit as one zip on --py-files, byte for byte the built one."""
    shipped, argv, folder = shipped_job(platform, mocks, built)
    assert shipped == job_zip()
    assert argv[argv.index("--py-files") + 1] == f"{folder}/{ZIP_NAME}"


def script_steps(script: str) -> list[list[str]]:
    """The command lines of a container's start script without after-start
    steps: `<prepare> && ... && exec <service>` (the service last, `exec` dropped)."""
    steps = [shlex.split(step) for step in script.split(" && ")]
    assert steps[-1][0] == "exec"
    return [*steps[:-1], steps[-1][1:]]


def script_commands(script: str) -> dict[str, list[list[str]]]:
    """prepare, service and after-start command lines of a container's start
    script (containers.container_script, both of its forms)."""
    if "\n" not in script:
        *prepare, service = script_steps(script)
        return {"prepare": prepare, "service": service, "after_start": []}
    lines = script.splitlines()
    prepare = [line.removesuffix(" || exit $?") for line in lines if line.endswith(" || exit $?")]
    return {"prepare": [shlex.split(line) for line in prepare],
            "service": shlex.split(next(line for line in lines if line.endswith(" &")).removesuffix(" &")),
            "after_start": [shlex.split(line.rsplit(" 2>/dev/null || ", 1)[1].removesuffix("; do"))
                            for line in lines if line.startswith("until ") and not line.endswith("(")]}


def local_commands(mocks, folder: Path, services, local=None, other=None) -> dict[str, dict[str, list[list[str]]]]:
    """The local platform's command lines of `services` (LocalService inputs),
    its host paths (java, .tools' Kafka jars, the service folder) put as an
    image has them; with the `local` and `other` platforms, its addresses put
    as `other`'s (e.g. an after-start step's bootstrap server)."""
    java, libs = toolchain.java_binary(), str(toolchain.kafka_libs())
    addresses = {}
    if local is not None:
        for key, port in local._ports.items():  # "service/port name" → local port
            addresses["%s:%d" % local.address(*key.split("/", 1))] = "%s:%d" % other.address(*key.split("/", 1))

    def in_image(argv: list[str], service: str) -> list[str]:
        argv = [("java" if arg == java else arg).replace(f"{libs}/", "/opt/kafka/libs/")
                .replace(f"{folder}/{service}", f"/opt/mirrorstack/{service}") for arg in argv]
        return [addresses.get(arg, arg) for arg in argv]
    found = {n: r for n, r in mocks.of_type(DYNAMIC).items() if n in services}
    return {n: {"prepare": [in_image(a, n) for a in r.get("prepare") or []], "service": in_image(r["argv"], n),
                "after_start": [in_image(a, n) for a in r.get("after_start") or []]} for n, r in found.items()}


def container_commands(docker_mocks, k8s_built) -> tuple[dict, dict]:
    """(docker, kubernetes) service → its start script's command lines."""
    docker_side = {n: script_commands(c["command"][0])
                   for n, c in docker_mocks.of_type("docker:index/container:Container").items()
                   if n != JOB and c["command"][0] != "python3"}  # not mirrorstack's Python services
    k8s_side = {n: script_commands(sts["spec"]["template"]["spec"]["containers"][0]["command"][2])
                for n, sts in manifests_of(k8s_built, "StatefulSet").items()}
    return docker_side, k8s_side
