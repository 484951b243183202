"""MirrorMaker2Args: what a MirrorMaker2 (one flow's connectors) is built from."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi

from mirrorstack.described import described
from mirrorstack.mm2.flows import FlowDescription


@dataclass(frozen=True, kw_only=True)
class MirrorMaker2Args:
    flow: FlowDescription = described(
        "the flow's description (the model's Flow.description()); its name names the connectors resource")
    connect_url: pulumi.Input[str] = described("the REST URL of the Connect group that runs the connectors")
    connectors: pulumi.Input[dict] = described(
        "connector kind (source, checkpoint, heartbeat) → its config "
        "(mirrorstack.mirror.connectors.mirror_connector_configs)")
    secrets_digest: pulumi.Input[str] | None = described(
        "a digest of the clusters' secret client files: when it changes the connectors restart and re-read "
        "their ${file:...} references", default=None)
    restart_trigger: str = described("any change of this value restarts the flow's connectors", default="")
    connect_urls: pulumi.Input[list] | None = described(
        "every worker's REST URL (any serves the whole API; tried in turn), or None for `connect_url` only",
        default=None)
    connect_auth: pulumi.Input[dict] | None = described(
        "the Connect REST credentials {username, password} (a secret), or None", default=None)
    connect: str | None = described("the Connect group's name in the topology (for messages)", default=None)
    connect_ca_file: str | None = described("the CA file that verifies the Connect REST API's HTTPS "
                                            "certificate, or None", default=None)
    state: str = described("running, paused or stopped (the topology's flow_state of the flow)",
                           default="running")
