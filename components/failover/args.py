"""FailoverSwitchArgs: what a FailoverSwitch is built from."""
from __future__ import annotations

from dataclasses import dataclass

from mirrorstack.described import described
from mirrorstack.model.spec import Failover


@dataclass(frozen=True, kw_only=True)
class FailoverSwitchArgs:
    failover: Failover = described("the topology's failover section: the pair, the active side, the gate, "
                                   "the groups, planned or unplanned")
    clusters: dict = described("alias → {bootstrap: bootstrap servers, client: Kafka client settings} of the "
                               "pair's two clusters")
    forward: dict = described("the primary → standby flow as the switch reads it: its description "
                              "(FlowDescription.to_dict), connectors and Connect "
                              "(mirrorstack.failover.switch.flow_piece)")
    reverse: dict | None = described("the standby → primary flow, as `forward`, or None", default=None)
    connect_auth: dict | None = described("Connect group name → REST credentials {username, password} "
                                          "(a secret), or None", default=None)
    runner: dict | None = described("where the switch runs: None in the program's process, else the platform's "
                                     "runner (Platform.switch_runner: kubernetes, a Job in the namespace; docker, a "
                                     "container on the stack's network)",
                                     default=None)
