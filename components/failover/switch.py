"""FailoverSwitch: which side of a failover pair clients use, as one dynamic
resource. Changing the topology's `failover.active` is an update of it, and
the update IS the switch: mirrorstack.failover.procedure.run_switch (the gate, the
flow stopped, every group's offsets translated and written on the other side)
with its report as the output `report`. The flows' MirrorMaker2 components
depend on it, so on a switch the gate runs before any flow changes, and a
failed gate fails `up` with nothing changed.

The spec run_switch gets is plain JSON-able data built from the props; secrets
travel only as the Connect REST credentials (a secret prop) and `${file:...}`
references in client settings.
"""
from __future__ import annotations

import sys

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming
from mirrorstack.failover.args import FailoverSwitchArgs
from mirrorstack.failover.drill_report import describe_drill

# Props whose change is a change of the switch; the rest (addresses, connector
# names) are read from the new props when a switch runs, and never switch by themselves.
WATCHED = ("active", "primary", "standby", "cutover", "unplanned", "groups", "gate")


class SwitchRefused(RuntimeError):
    pass


def progress(message: str) -> None:
    print(f"mirrorstack: failover: {message}", file=sys.stderr, flush=True)


def switch_kind(standby: str, new: str, cutover: bool) -> str:
    """failover, failback or cutover, for a move of `active` to `new`."""
    if new == standby:
        return "cutover" if cutover else "failover"
    return "failback"


def describe(primary: str, standby: str, old: str | None, new: str, *, cutover: bool, unplanned: bool,
             gate: dict | None = None) -> str | None:
    """What `up` will do about the failover section, said in the preview; None
    when it switches nothing."""
    if old is None or old == new:
        return None
    kind = switch_kind(standby, new, cutover)
    if kind == "failback" and cutover:
        return (f"active {old} -> {new}: refused, the cutover to {old} is final; fix: set failover.active back to "
                f"{old}")
    flow, back = (f"{primary}->{standby}", f"{standby}->{primary}") if new == standby else \
        (f"{standby}->{primary}", f"{primary}->{standby}")
    if unplanned:
        how = (f"unplanned ({old} is lost): no gate; the groups move from the last checkpoints; what {old} held "
               "beyond them is reported unknown")
    else:
        g = gate or {}
        how = (f"planned: the gate waits up to {float(g.get('wait_seconds', 120)):g}s for at most "
               f"{int(g.get('in_flight', 0))} records in flight and fresh checkpoints, with no consumer of the "
               f"groups on {old}{' (active consumers allowed)' if g.get('allow_active_consumers') else ''}")
    rest = "" if kind == "cutover" or unplanned else f"; then {back} starts"
    if kind == "cutover":
        rest = "; final: no way back"
    return (f"{kind} {old} -> {new}, {how}; then {flow} stops and every group's offsets are translated and written "
            f"on {new}{rest}")


def _flow(piece: dict | None, auth: dict) -> dict | None:
    """A flow of the props as run_switch wants it; None values (Pulumi drops
    them from the props) put back."""
    if not piece:
        return None
    connect = dict(piece.get("connect") or {})
    out = {**piece, "connect": {"connect_url": connect.get("connect_url"),
                                "connect_urls": connect.get("connect_urls") or None,
                                "connect_auth": auth.get(piece.get("connect_name") or "") or None,
                                "connect_ca_file": connect.get("connect_ca_file") or None}}
    out["connectors"] = {k: (piece.get("connectors") or {}).get(k) for k in ("source", "checkpoint", "heartbeat")}
    out.pop("connect_name", None)
    return out


def switch_spec(olds: dict, news: dict) -> dict:
    """run_switch's spec for moving `active` from olds' to news' (the new props
    give every address: they are what this `up` deploys)."""
    from mirrorstack.failover.rules import DEFAULT_EXACT
    old, new = olds["active"], news["active"]
    auth = news.get("connect_auth") or {}
    forward, reverse = _flow(news.get("forward"), auth), _flow(news.get("reverse"), auth)
    flow, back = (forward, reverse) if new == news["standby"] else (reverse, forward)
    gate = news.get("gate") or {}
    return {"from": old, "to": new, "mode": "unplanned" if news.get("unplanned") else "planned",
            "clusters": {alias: {"bootstrap": c.get("bootstrap"), "client": dict(c.get("client") or {})}
                         for alias, c in (news.get("clusters") or {}).items()},
            "flow": flow, "back_flow": back, "groups": list(news["groups"]) if news.get("groups") else None,
            "gate": {"in_flight": int(gate.get("in_flight", 0)), "wait_seconds": float(gate.get("wait_seconds", 120)),
                     "allow_active_consumers": bool(gate.get("allow_active_consumers", False))},
            "exact": {**DEFAULT_EXACT, **(news.get("exact") or {})}}


class FailoverSwitchProvider(ResourceProvider):
    def create(self, props):
        # The first deployment records which side is active; nothing to switch from.
        return CreateResult(id_=f"{props['primary']}<->{props['standby']}", outs={**props, "report": None})

    def diff(self, _id, olds, news):
        changed = [k for k in WATCHED if (olds.get(k) or None) != (news.get(k) or None)]
        replaces = [k for k in ("primary", "standby") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id, olds, news):
        old, new = olds.get("active"), news["active"]
        if old == new:  # unplanned true -> false (the reverse flow starts), gate, groups: recorded only
            report = olds.get("report")
            if olds.get("unplanned") and not news.get("unplanned") and (report or {}).get("mode") == "unplanned":
                report = {**report, "returned": count_returned(news, report)}  # the side left is back
            return UpdateResult(outs={**news, "report": report})
        if olds.get("cutover") and new == news["primary"]:
            raise SwitchRefused(f"active {old} -> {new} refused: the cutover to {old} is final (nothing flowed back "
                                f"to {new}); nothing was changed; fix: set failover.active back to {old}")
        spec = switch_spec(olds, news)
        if spec["flow"] is None:
            raise SwitchRefused(f"active {old} -> {new}: no flow {old}->{new} to switch with; nothing was changed")
        kind = switch_kind(news["standby"], new, bool(news.get("cutover")))
        progress(f"{kind} {old} -> {new} ({spec['mode']}) starts")
        report = {**run(spec, news.get("runner")), "kind": kind}
        for line in render(report).splitlines():
            progress(line)
        return UpdateResult(outs={**news, "report": report})

    def delete(self, _id, props):
        pass  # switches nothing: the clusters and flows are other resources


def run(spec: dict, runner: dict | None) -> dict:
    """run_switch's report, in this process, or where the platform's runner says (kubernetes: a Job;
    docker: a container on the stack's network), as the clusters answer only there."""
    if runner and runner.get("kind") == "docker-container":
        from mirrorstack.failover.docker_container import run_switch_container
        return run_switch_container(spec, runner, progress=progress)
    if runner:
        from mirrorstack.failover.kube_job import run_switch_job
        return run_switch_job(spec, runner, progress=progress)
    from mirrorstack.failover import procedure as failover_ops  # looked up now: unit tests replace run_switch
    return failover_ops.run_switch(spec, progress=progress)


def count_returned(news: dict, report: dict) -> dict:
    """The groups an unplanned switch moved, counted by record identity now that the side it left answers
    (procedure.Switch.returned): what each re-read and lost. Nothing is written; when the side left does
    not answer yet the report says so and `up` goes on (the reverse flow starts either way)."""
    spec = {**switch_spec({"active": report["from"]}, news), "mode": "returned", "moved": report.get("groups") or {}}
    try:
        counted = run(spec, news.get("runner"))
    except Exception as exc:  # noqa: BLE001 - counting must not hold the reverse flow back
        progress(f"{report['from']} is back, but what the moved groups re-read and lost could not be counted: {exc}")
        return {"mode": "returned", "from": report["from"], "to": report["to"], "groups": {},
                "notes": [f"not counted: {str(exc)[:500]}"]}
    for line in render(counted).splitlines():
        progress(line)
    return counted


def render(report: dict) -> str:
    from mirrorstack.failover.rules import render_report
    return render_report(report)


class FailoverSwitch(Resource, module="failover", name="FailoverSwitch"):
    """The failover section of a topology, built from FailoverSwitchArgs.
    Outputs: `active` (the side clients use) and `report` (the last switch's
    report, None before the first switch)."""

    active: pulumi.Output[str]
    report: pulumi.Output[dict]

    def __init__(self, name: str, args: FailoverSwitchArgs, opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(name, opts)
        failover = args.failover
        gate = failover.gate
        super().__init__(FailoverSwitchProvider(), resource_name, {
            **pair_props(args), "cutover": failover.cutover, "unplanned": failover.unplanned,
            # strings and floats: numbers in dynamic props come back as floats anyway
            "gate": {"in_flight": gate.in_flight, "wait_seconds": float(gate.wait_seconds),
                     "allow_active_consumers": gate.allow_active_consumers},
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["connect_auth"])))


def pair_props(args: FailoverSwitchArgs) -> dict:
    """What the switch and the drill both carry: the pair, its groups, how groups move (`exact`: recorded,
    never a switch by itself), both sides' addresses, the flows, the REST credentials (a secret) and
    where they run; `report` None until one ran."""
    failover, connect_auth = args.failover, args.connect_auth
    return {"primary": failover.primary, "standby": failover.standby, "active": failover.active,
            "groups": failover.groups,
            "exact": {"enabled": failover.exact, "search_records": failover.exact_search_records},
            "clusters": args.clusters, "forward": args.forward, "reverse": args.reverse,
            "connect_auth": pulumi.Output.secret(connect_auth) if connect_auth else None,
            "runner": args.runner, "report": None}


def flow_piece(flow, connect) -> dict:
    """A flow as the switch's props carry it (run_switch's `flow` without the
    credentials): its description (what it copies, the names of its internal
    topics), its connectors and its Connect."""
    described = flow.description()
    return {"description": described.to_dict(),
            "connectors": {"source": described.connector_name("source"),
                           "checkpoint": described.connector_name("checkpoint") if described.checkpoints else None,
                           "heartbeat": described.connector_name("heartbeat") if described.heartbeats else None},
            "connect_name": flow.connect,
            "connect": {"connect_url": connect.rest_url,
                        "connect_urls": connect.rest_urls,
                        "connect_ca_file": connect.ca_file}}


def failover_output(switch: FailoverSwitch, drill=None) -> pulumi.Output[dict]:
    """The stack output `failover`: {active, report} (the last switch's report), and `drill` (the last
    drill's report) when the section has one."""
    if drill is None:
        return pulumi.Output.all(active=switch.active, report=switch.report).apply(
            lambda a: {"active": a["active"], "report": a.get("report")})
    return pulumi.Output.all(active=switch.active, report=switch.report, drill=drill.report).apply(
        lambda a: {"active": a["active"], "report": a.get("report"), "drill": a.get("drill")})


def log_plan(topology, previous: pulumi.Output, resource: pulumi.Resource) -> None:
    """Says in the preview what the switch will do (the last deployment's
    `failover` output gives the side active now)."""
    fo = topology.failover

    def show(last):
        old = (last or {}).get("active")
        line = describe(fo.primary, fo.standby, old, fo.active, cutover=fo.cutover, unplanned=fo.unplanned,
                        gate=fo.gate.model_dump())
        if line:
            pulumi.log.info(f"failover: {line}", resource=resource)
        drill = describe_drill(fo.primary, fo.standby, fo.active, fo.drill.model_dump() if fo.drill else None,
                               ((last or {}).get("drill") or {}).get("run"))
        if drill:
            pulumi.log.info(f"failover: {drill}", resource=resource)
    previous.apply(show)
