"""MirrorMaker2: the connector trio of one flow as ONE Pulumi dynamic resource
(MirrorMaker2Connectors, provider mirrorstack.mirror.provider), and the
component around it.
"""
from __future__ import annotations

import pulumi
from pulumi.dynamic import Resource

from mirrorstack import naming
from mirrorstack.connect.api import CONNECT_STATES
from mirrorstack.mirror.args import MirrorMaker2Args
from mirrorstack.mirror.preview import takeover_plan
from mirrorstack.mirror.provider import MirrorMaker2Provider


class MirrorMaker2Connectors(Resource, module="mirror", name="MirrorMaker2Connectors"):
    """The source, checkpoint and heartbeat connectors of one flow, as one resource.
    Outputs: `connectors` (name → config), `states` (name → state, task counts).
    Configs carry no secret: credentials are `${file:...}` references the Connect
    workers resolve; `secrets_digest` (a secret) changes when they rotate, and
    restarts the connectors so they read the new values. `connect_urls`: every
    worker's REST URL (any that answers is used); `connect_auth` (a secret
    {username, password}) when the REST API requires basic auth. `state`: the
    flow's state (running, paused, stopped), which every connector is put in and
    kept in (one paused or stopped by hand is a diff that `up` repairs); running
    is left out of the inputs, so stacks deployed before flow states see no change."""

    connectors: pulumi.Output[dict]
    states: pulumi.Output[dict]

    def __init__(self, name: str, *, flow: str, connect_url: pulumi.Input[str],
                 connectors: pulumi.Input[dict], secrets_digest: pulumi.Input[str] | None = None,
                 connect_urls: pulumi.Input[list] | None = None, connect_auth: pulumi.Input[dict] | None = None,
                 timeout_seconds: int = 300, restart_trigger: str = "", connect: str | None = None,
                 connect_ca_file: str | None = None, adopt: list[str] | None = None,
                 take_over: dict[str, str] | None = None, state: str = "running",
                 opts: pulumi.ResourceOptions | None = None):
        if state not in CONNECT_STATES:
            raise ValueError(f"{flow}: state {state!r} is not one of {', '.join(CONNECT_STATES)}")
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        super().__init__(MirrorMaker2Provider(), resource_name, {
            "flow": flow, "connect_url": connect_url, "connectors": connectors,
            "connect": connect, "connect_ca_file": connect_ca_file, "adopt": adopt or None,
            "take_over": take_over or None, "state": None if state == "running" else state,
            "secrets_digest": pulumi.Output.secret(secrets_digest) if secrets_digest is not None else None,
            "connect_urls": connect_urls,
            "connect_auth": pulumi.Output.secret(connect_auth) if connect_auth is not None else None,
            "timeout_seconds": str(timeout_seconds), "restart_trigger": restart_trigger, "states": None,
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            additional_secret_outputs=["secrets_digest", "connect_auth"])))


class MirrorMaker2(pulumi.ComponentResource):
    """One replication flow (source → target) in a Connect cluster, built from
    MirrorMaker2Args (the topology names it after the flow), in `state`
    (running, paused, stopped: the topology's flow_state of the flow).
    Outputs: `connector_names`, `states` (name → state and task counts)."""

    states: pulumi.Output[dict]

    def __init__(self, name: str, args: MirrorMaker2Args, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:mirror:MirrorMaker2", name, opts)
        from mirrorstack.mirror.connectors import take_over_names
        flow, connect_url, connect_urls = args.flow, args.connect_url, args.connect_urls
        connect_auth, connect_ca_file = args.connect_auth, args.connect_ca_file
        adopt = sorted(flow.connector_names.by_kind().values()) or None
        take_over = take_over_names(flow)
        self.connectors = MirrorMaker2Connectors(
            f"{flow.name}-connectors", flow=flow.name, connect_url=connect_url, connectors=args.connectors,
            secrets_digest=args.secrets_digest, connect_urls=connect_urls, connect_auth=connect_auth,
            restart_trigger=args.restart_trigger, connect=args.connect, connect_ca_file=connect_ca_file, adopt=adopt,
            take_over=take_over, state=args.state, opts=pulumi.ResourceOptions(parent=self))
        if adopt or take_over:  # say in the preview what happens to connectors made by hand
            plan = pulumi.Output.all(connect_url, connect_urls, connect_auth).apply(
                lambda a: takeover_plan({"connect_url": a[0], "connect_urls": a[1], "connect_auth": a[2],
                                         "connect_ca_file": connect_ca_file, "adopt": adopt, "take_over": take_over}))
            plan.apply(lambda lines: [pulumi.log.info(f"{flow.name}: {line}", resource=self) for line in lines])
        self.connector_names = self.connectors.connectors.apply(lambda c: sorted(c or {}))
        self.states = self.connectors.states
        self.register_outputs({"connector_names": self.connector_names, "states": self.states})
