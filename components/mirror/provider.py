"""The dynamic provider of a flow's connectors (MirrorMaker2Connectors):
create, diff, update, delete and read, made of mirrorstack.mirror.reconcile's
steps over the mirrorstack.connect.api client.

Pulumi pickles this class by reference (module path and class name): moving or
renaming it needs a `pickled` row in components/model/deprecations.py.
"""
from __future__ import annotations

from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from mirrorstack.connect.api import (CONNECT_STATES, TARGET_STATES, ConnectError, client_from, progress, summarize,
                                    wait_state)
from mirrorstack.mirror.preview import say_outage
from mirrorstack.mirror.reconcile import (by_class, carry_over, check_workers, configure, live_problems,
                                         owner_problems, refuse_colliding_renames, renames, settle, start_over,
                                         validate_all)
from mirrorstack.mirror.teardown import delete_connectors

REFRESH_TIMEOUT = 10  # seconds a request of `pulumi refresh` may take (3 s misfired on a loaded host)


class MirrorMaker2Provider(ResourceProvider):
    def create(self, props):
        client = client_from(props)
        check_workers(client)
        connectors = props["connectors"]
        validate_all(client, connectors)
        if problems := owner_problems(client, connectors, props.get("adopt") or []):
            raise ConnectError("\n".join(problems))
        state = props.get("state") or "running"
        taken = set()
        for old, new in (props.get("take_over") or {}).items():
            if carry_over(client, old, client, new, connectors.get(new) if new else None, state):
                taken.add(new)
        for name, config in connectors.items():
            if name not in taken:
                configure(client, name, config, state)
        settle(client, connectors, state)  # adopted connectors keep theirs until told
        states = wait_state(client, list(connectors), state, float(props["timeout_seconds"]), flow=props["flow"])
        return CreateResult(id_=props["flow"], outs={**props, "states": states})

    def diff(self, _id, olds, news):
        replaces = ["flow"] if olds.get("flow") != news.get("flow") else []
        changed = [k for k in ("connect", "connect_url", "connect_urls", "connectors", "secrets_digest",
                               "restart_trigger", "take_over")
                   if (olds.get(k) or None) != (news.get(k) or None)]
        state = olds.get("state") or "running"
        if state != (news.get("state") or "running"):
            changed.append("state")
        # Failed, missing, paused or stopped out of band (seen by refresh, or live now): up repairs.
        live = live_problems(olds)
        for name, problem in live.items():
            if problem in TARGET_STATES and "state" not in changed:
                progress(f"{name} is {problem}, changed outside the stack (the flow's state is {state}); "
                          f"up puts it back")
        if live or any(s.get("state") != CONNECT_STATES[state] for s in (olds.get("states") or {}).values()):
            changed.append("states")
        return DiffResult(changes=bool(replaces or changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id, olds, news):
        client = client_from(news)
        check_workers(client)
        old, new = olds.get("connectors") or {}, news["connectors"]
        # Another Connect cluster: every connector moves there, offsets carried over
        # (state written before `connect` was recorded: a new URL is the sign).
        url_changed = olds.get("connect_url") != news["connect_url"]
        moved = olds.get("connect") != news.get("connect") if olds.get("connect") else url_changed
        changed = {name: cfg for name, cfg in new.items() if url_changed or moved or old.get(name) != cfg}
        state = news.get("state") or "running"
        live = {} if url_changed or moved else live_problems(news, client, say=False)
        live_failed = {name for name, problem in live.items() if problem in ("MISSING", "FAILED")}
        # Paused, stopped or resumed by hand while the stack's state stayed: up puts them back, saying so.
        drift = {} if (olds.get("state") or "running") != state else {
            **{name: s["state"] for name, s in (olds.get("states") or {}).items()
               if name in new and s.get("state") in TARGET_STATES and s["state"] != CONNECT_STATES[state]},
            **{name: problem for name, problem in live.items() if problem in TARGET_STATES}}
        changed.update({name: new[name] for name in live_failed if client.get_config(name) is None})  # deleted
        validate_all(client, changed)
        refuse_colliding_renames(news["flow"], old, changed)
        if problems := owner_problems(client, {n: changed[n] for n in changed.keys() - old.keys()},
                                       news.get("adopt") or []):
            raise ConnectError("\n".join(problems))
        # Old connectors that go away (moved or renamed): the new one of the same
        # class carries their offsets on, so nothing is copied twice or from the start.
        gone = old.keys() if moved else old.keys() - new.keys()
        old_client = (client_from(olds) if moved else client) if gone else None
        new_by_class, taken = by_class(new), set()
        for name in sorted(gone):
            successor = new_by_class.get(old[name].get("connector.class"))
            if successor and (moved or successor not in old):
                if carry_over(old_client, name, client, successor, new[successor], state,
                              keep_offsets=not renames(old[name], new[successor])):
                    taken.add(successor)
            else:
                old_client.delete(name)
        for stale, successor in (news.get("take_over") or {}).items():
            if carry_over(client, stale, client, successor, new.get(successor) if successor else None, state):
                taken.add(successor)
        for name, config in changed.items():
            if name in taken:
                continue
            if renames(old.get(name), config) and client.get_config(name) is not None:
                start_over(client, name, config, state)
            else:
                configure(client, name, config, state)
        # Secrets reach Connect as `${file:...}` references, resolved when a connector
        # starts: a rotated secret (a new digest) needs a restart to be read.
        restart = any(olds.get(k) != news.get(k) for k in ("restart_trigger", "secrets_digest"))
        # A stopped connector has no task to restart: it reads them when it starts.
        restarted, watched = set(), set()
        for name in new:
            if name in taken or state == "stopped":
                continue
            recorded = (olds.get("states") or {}).get(name) or {}
            had_failed = live.get(name) == "FAILED" or recorded.get("state") == "FAILED" or \
                (recorded.get("state") == "RUNNING" and recorded.get("running_tasks") != recorded.get("tasks"))
            # A new config restarts the connector, but a FAILED task only when its own
            # config changes: restart the failed parts of a reconfigured connector too,
            # and give it the restart's grace (it reports its old FAILED state a while).
            restarts = restart and name not in changed
            if restarts:
                client.restart(name)
            elif had_failed:
                client.restart_failed(name)
            if restarts or had_failed:
                restarted.add(name)
            if had_failed:
                watched.add(name)
        settle(client, new, state, drift)
        states = wait_state(client, list(new), state, float(news["timeout_seconds"]), restarted=restarted,
                            flow=news.get("flow"), watched=watched)
        return UpdateResult(outs={**news, "states": states})

    def delete(self, _id, props):
        delete_connectors(props)  # Connect down: said, and destroy goes on

    def read(self, id_, props):
        """`pulumi refresh`: each connector's config and state, read live, within
        seconds even during an outage (no retry, REFRESH_TIMEOUT a request): when
        Connect cannot answer, the connectors are recorded UNREACHABLE with their
        configs as last seen, and the output says what is down and the fix."""
        import urllib3
        client = client_from(props).quick(REFRESH_TIMEOUT)
        live, states = {}, {}
        try:
            for name in props["connectors"]:
                config = client.get_config(name)
                if config is not None:
                    live[name] = config
                # No config: deleted. Its status can linger a moment after (Connect removes it
                # once the worker has read the deletion): it would report a ghost UNASSIGNED.
                states[name] = summarize(client.status(name) if config is not None else None)
                if "failed" in states[name]:  # refresh records it; say it too
                    progress(f"{name}: {states[name]['failed']}; `pulumi up` restarts it")
        except (ConnectError, urllib3.exceptions.HTTPError) as exc:
            if isinstance(exc, ConnectError) and (exc.status or 500) < 500:
                raise  # Connect answered, and refused (credentials): not an outage
            say_outage(props, client, exc, REFRESH_TIMEOUT)
            down = {"state": "UNREACHABLE", "tasks": "0", "running_tasks": "0"}
            return ReadResult(id_=id_, outs={**props, "states": {name: dict(down) for name in props["connectors"]}})
        return ReadResult(id_=id_, outs={**props, "connectors": live, "states": states})
