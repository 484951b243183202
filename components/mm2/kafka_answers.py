"""Kafka answers worth asking again, for the confluent_kafka clients of the validation job and the
failover switch: a topic created a moment ago may still be electing its leader, and a broker just
restarted (a roll, a data centre back) answers NOT_LEADER or UNKNOWN_TOPIC_OR_PART for a partition
the metadata lists until its own metadata has caught up. Standard library only (the job's zip carries
it): the client's classes come with what it raised."""
from __future__ import annotations

import time

ATTEMPTS = 10  # a second apart: a broker's metadata catches up within seconds


def transient(error) -> bool:
    """`error` (a confluent_kafka KafkaError) may not be the answer if asked again."""
    codes = type(error)
    return error.retriable() or error.code() in (
        codes.NOT_LEADER_FOR_PARTITION, codes.LEADER_NOT_AVAILABLE, codes._TIMED_OUT, codes.UNKNOWN_TOPIC_OR_PART,
        codes.COORDINATOR_LOAD_IN_PROGRESS, codes.COORDINATOR_NOT_AVAILABLE)  # a group coordinator loading


def asked_again(ask, look_up_leader, attempts: int = ATTEMPTS):
    """`ask()`'s answer, asked again a second later, after `look_up_leader()`, while it raises a
    KafkaException with a transient error; a lasting one (an authorization error, say) is raised at once."""
    for attempt in range(attempts):
        try:
            return ask()
        except Exception as exc:
            error = exc.args[0] if exc.args else None
            if not hasattr(error, "retriable") or not transient(error) or attempt == attempts - 1:
                raise
            time.sleep(1)
            look_up_leader()
    raise AssertionError("unreachable")
