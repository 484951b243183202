"""Log4j2 configuration for Kafka's JVMs (Kafka 4 logs through Log4j2).

Everything goes to stdout; the launcher sends stdout to the service's log file.
"""
from __future__ import annotations

from mirrorstack.properties import render_properties


def log4j2_properties(level: str = "INFO", quiet_loggers: tuple[str, ...] = ("org.apache.kafka.clients", "org.reflections")) -> str:
    props = {
        "status": "warn",
        "appender.stdout.type": "Console",
        "appender.stdout.name": "STDOUT",
        "appender.stdout.layout.type": "PatternLayout",
        "appender.stdout.layout.pattern": "[%d] %p %m (%c)%n",
        "rootLogger.level": level,
        "rootLogger.appenderRef.stdout.ref": "STDOUT",
    }
    for i, name in enumerate(quiet_loggers):
        props[f"logger.quiet{i}.name"] = name
        props[f"logger.quiet{i}.level"] = "WARN"
    return render_properties(props)
