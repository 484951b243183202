"""The java command line for Kafka's main classes (broker, storage tool, Connect).

Secrets never go on this command line: it is visible to every user of the host.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

BROKER_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
CONFIG_COMMAND_MAIN = "kafka.admin.ConfigCommand"  # kafka-configs.sh
CONNECT_DISTRIBUTED_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
CHOOSES_A_COLLECTOR = re.compile(r"-XX:\+Use\w+GC$")


def class_archive_name(main_class: str) -> str:
    """Which class-data archive (toolchain.class_archive) serves a JVM of
    Kafka's jars running `main_class`: Connect's for Connect, else the broker's."""
    return "connect" if main_class == CONNECT_DISTRIBUTED_MAIN else "broker"


def java_command(
    java: str, main_class: str, args: Sequence[str], *, classpath: str, heap: str,
    log4j_file: str | None = None, jmx_agent: tuple[str, str, int, str] | None = None,
    short_lived: bool = False, system_properties: Sequence[str] = (), options: Sequence[str] = (),
) -> list[str]:
    """`jmx_agent` is (jar, host, port, config file): the Prometheus javaagent.
    `short_lived` tools (the storage formatter) start faster with C1 and SerialGC.
    `system_properties`: `-Dkey=value` options (paths only, never a secret).
    `options`: the user's (Resources.jvm_options), last so that they win; a
    collector among them replaces G1 (the JVM refuses two)."""
    if short_lived:
        gc = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    else:
        gc = [] if any(CHOOSES_A_COLLECTOR.match(o) for o in options) else ["-XX:+UseG1GC"]
    argv = [java, f"-Xmx{heap}", *gc, "-Djava.awt.headless=true"]
    if log4j_file:
        argv.append(f"-Dlog4j2.configurationFile={log4j_file}")
    argv += list(system_properties)
    if jmx_agent:
        jar, host, port, config = jmx_agent
        argv.append(f"-javaagent:{jar}={host}:{port}:{config}")
    return argv + list(options) + ["-cp", classpath, main_class, *args]
