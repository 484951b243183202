"""FailoverDrill: the failover section's `drill`, as one dynamic resource.
Setting or changing `failover.drill.run` is its create or update, and that IS
the drill (mirrorstack.failover.drill, run where the switch runs: in this
process, a Kubernetes Job or a container on the stack's Docker network), with
its report as the output `report`. It depends on the switch and the pair's
flows, so it rehearses from the side active after this `up`, on running flows.
A drill that does not pass its objective fails `up`; nothing real was touched."""
from __future__ import annotations

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming
from mirrorstack.failover.args import FailoverSwitchArgs
from mirrorstack.failover import switch


def drill_spec(props: dict) -> dict:
    """run_switch's spec for a drill from the active side to the other one."""
    active = props["active"]
    other = props["standby"] if active == props["primary"] else props["primary"]
    spec = switch.switch_spec({"active": active}, {**props, "active": other, "unplanned": False})
    return {**spec, "mode": "drill", "drill": dict(props["drill"])}


class FailoverDrillProvider(ResourceProvider):
    def create(self, props):
        return CreateResult(id_=f"drill-{props['primary']}<->{props['standby']}", outs=self._drill(props))

    def diff(self, _id, olds, news):
        changed = [k for k in ("drill", "active", "groups", "exact") if (olds.get(k) or None) != (news.get(k) or None)]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id, olds, news):
        if (olds.get("drill") or {}).get("run") == news["drill"]["run"]:
            return UpdateResult(outs={**news, "report": olds.get("report")})  # settings only: no drill
        return UpdateResult(outs=self._drill(news, olds.get("report")))

    def delete(self, _id, props):
        pass  # a drill leaves nothing behind: its copies are deleted when it ends

    @staticmethod
    def _drill(props: dict, last: dict | None = None) -> dict:
        from mirrorstack.failover.drill_report import render_drill
        spec = drill_spec(props)
        switch.progress(f"drill {props['drill']['run']} {spec['from']} -> {spec['to']} starts (nothing real is touched)")
        report = switch.run(spec, props.get("runner"))
        # When the last drill passed (this one, or the one before): what the overdue alert watches.
        report["last_passed_at"] = report["at"] if report.get("passed") else (last or {}).get("last_passed_at")
        for line in render_drill(report).splitlines():
            switch.progress(line)
        return {**props, "report": report}


class FailoverDrill(Resource, module="failover", name="FailoverDrill"):
    """failover.drill, built from the switch's FailoverSwitchArgs. Output `report`: the last drill's."""

    report: pulumi.Output[dict]

    def __init__(self, name: str, args: FailoverSwitchArgs, opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(name, opts)
        super().__init__(FailoverDrillProvider(), resource_name, {
            **switch.pair_props(args), "drill": args.failover.drill.model_dump(),
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["connect_auth"])))
