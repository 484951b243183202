"""A service that runs one of Kafka's main classes, the same on every platform.

`java_service` is the one place that turns what a component asks for (main
class, arguments, files, heap, one-time preparation, after-start steps, `-D`
options, metrics) into the java command lines and generated files a platform
runs: `java <jvm options> -cp <kafka libs>/* <main> <args>`. The local platform
runs them as processes; docker and kubernetes run the very same lines in a
container (not the image's shell scripts), so any image with a JRE and Kafka's
jars behaves alike. A platform supplies only where things are: `JavaRuntime`
(java, Kafka's jars, the JMX agent) and the service's folder, which replaces
`{dir}` in arguments and options.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mirrorstack.platforms import jvm
from mirrorstack.platforms.log4j2 import log4j2_properties

TOOL_HEAP = "256m"  # preparation and after-start steps are short-lived tools
LOG4J_FILE = "log4j2.properties"
JMX_CONFIG_FILE = "jmx-exporter.yaml"


@dataclass(frozen=True)
class JavaRuntime:
    """Where a platform finds java, Kafka's jars (a folder) and, for services
    with metrics, the JMX exporter agent jar."""
    java: str
    kafka_libs: str
    jmx_agent: str | None = None


@dataclass(frozen=True)
class JavaService:
    """What to run: `files` (relative to the service's folder), the service's
    `argv`, then `prepare` (before it, once per start) and `after_start`
    (once it is healthy) command lines."""
    files: dict[str, str]
    argv: list[str]
    prepare: list[list[str]]
    after_start: list[list[str]]
    checks: list[list[str]] = ()  # tools a readiness check runs (containers.rejoined_check)


def java_service(runtime: JavaRuntime, *, folder: str, main: str, args: Sequence[str], files: dict,
                 heap: str, user_jvm_options: Sequence[str] = (), prepare: Sequence[tuple[str, Sequence[str]]] = (),
                 after_start: Sequence[tuple[str, Sequence[str]]] = (), jvm_options: Sequence[str] = (),
                 metrics: tuple[str, int, str] | None = None,
                 checks: Sequence[tuple[str, Sequence[str]]] = ()) -> JavaService:
    """`folder`: the service's folder as the service sees it (`{dir}`).
    `metrics`: the (host, port) the JMX exporter agent serves on and its
    config (the rules, whoever runs the service chose them), written to
    `jmx-exporter.yaml` in the folder. Tools (prepare, after start) get
    neither the agent (its port is the service's) nor `jvm_options`.
    `user_jvm_options`: the topology's (Resources.jvm_options), the service's only."""
    fill = lambda items: [a.replace("{dir}", folder) for a in items]  # noqa: E731
    files = {LOG4J_FILE: log4j2_properties(), **files}
    agent = None
    if metrics is not None:
        if not runtime.jmx_agent:
            raise ValueError("metrics need the JMX exporter agent: JavaRuntime.jmx_agent is not set")
        host, port, files[JMX_CONFIG_FILE] = metrics
        agent = (runtime.jmx_agent, host, port, f"{folder}/{JMX_CONFIG_FILE}")

    def java(main_class: str, arguments: Sequence[str], java_heap: str, **extra) -> list[str]:
        return jvm.java_command(runtime.java, main_class, fill(arguments), classpath=f"{runtime.kafka_libs}/*",
                                heap=java_heap, log4j_file=f"{folder}/{LOG4J_FILE}", **extra)

    tools = lambda steps: [java(m, a, TOOL_HEAP, short_lived=True) for m, a in steps]  # noqa: E731
    return JavaService(files=files, argv=java(main, args, heap, jmx_agent=agent, system_properties=fill(jvm_options),
                                                 options=user_jvm_options),
                       prepare=tools(prepare), after_start=tools(after_start), checks=tools(checks))
