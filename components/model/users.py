"""Kafka user names the stack holds itself, which no user of the stack file may take.

Every node certificate maps to one super user (components/kafka/acls.py). Its name
has an '@', which USER_NAME (every SASL user the model creates) refuses, so no
declared principal and no `security.user` can ever authenticate as a node.
Pure: no pulumi.
"""
from __future__ import annotations

from collections.abc import Mapping

USER_NAME = r"^[A-Za-z0-9_.-]+$"
NODE_PRINCIPAL = "kafka-nodes@mirrorstack"
# Brokers started by mirrorstack before the node principal took its '@' map their
# nodes to this name and keep it a super user until they are rolled.
RETIRED_NODE_PRINCIPAL = "kafka-nodes"


def super_user_names(settings: Mapping[str, str]) -> dict[str, str]:
    """The user names a cluster treats as super users, with why: the nodes' (and the
    retired nodes' name), and any `User:` listed in a `super.users` setting."""
    names = {NODE_PRINCIPAL: "the nodes' own principal, a super user",
             RETIRED_NODE_PRINCIPAL: "the nodes' principal of earlier mirrorstack versions, a super user on the "
                                     "brokers they started"}
    for entry in settings.get("super.users", "").split(";"):
        kind, _, name = entry.strip().partition(":")
        if kind == "User" and name:
            names[name] = "a super user by the `super.users` setting"
    return names
