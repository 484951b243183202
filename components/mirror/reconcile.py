"""Reconciliation of one flow's connectors through the Connect client: check
the workers, validate configs, refuse connectors that are not this stack's,
move each connector to the flow's state, carry source offsets over when a
connector is renamed, moved or taken over. What the provider's create and
update are made of; the HTTP itself is mirrorstack.connect.api's.
"""
from __future__ import annotations

from mirrorstack.connect.api import (CONNECT_STATES, PROBE_TIMEOUT, TARGET_STATES, ConnectClient, ConnectError,
                                    client_from, failed_parts, progress)
from mirrorstack.mm2.connectors import KINDS, MIRROR_PACKAGE, OWNER_KEY, SOURCE
from mirrorstack.mirror.preview import outage_said
from mirrorstack.plan.rename_check import rename_problems

VERBS = {"running": "resuming", "paused": "pausing", "stopped": "stopping"}


def validate_all(client: ConnectClient, connectors: dict[str, dict[str, str]]) -> None:
    problems = [f"  {name}: {error}" for name, config in connectors.items() for error in client.validate(name, config)]
    if problems:
        raise ConnectError("Kafka Connect rejected the MirrorMaker 2 configuration:\n" + "\n".join(problems))


def check_workers(client: ConnectClient) -> None:
    """Before anything changes: the workers answer, accept the credentials and
    have the three MirrorMaker 2 connector plugins."""
    plugins = client.plugins()
    missing = [kind for kind in KINDS.values() if f"{MIRROR_PACKAGE}.{kind}" not in plugins]
    if missing:
        raise ConnectError(f"Kafka Connect at {client.url} has no {', '.join(missing)} plugin; fix: put Kafka's "
                           "connect-mirror and connect-mirror-client jars on every worker's plugin.path (or "
                           "classpath) and restart the workers, or run the flow on another Connect cluster")


def live_problems(props, client: ConnectClient | None = None, say: bool = True) -> dict[str, str]:
    """Connectors not as the stack wants them right now, in one quick call
    (`GET /connectors?expand=status`): name → MISSING, FAILED (a part of it), or
    the state someone moved it to outside the stack (PAUSED, STOPPED, RUNNING:
    not the flow's state). {} when Connect does not answer (the update itself
    will then say so), so a preview never hangs on it. `say`: print each failed
    part (the diff does; the update of the same `up` then does not repeat it).
    The diff does not ask again when this run's refresh found the flow's Connect
    down and said so a moment ago (the update always asks: `up` may have started
    the workers since)."""
    import urllib3
    if say and outage_said(props):
        return {}
    try:
        live = (client or client_from(props)).quick().expanded_status()
    except (urllib3.exceptions.HTTPError, ValueError, ConnectError) as exc:
        # A preview where Connect does not answer (a PR runner): no change, and say so.
        progress(f"{props.get('flow')}: Kafka Connect at {props.get('connect_url')} did not answer within "
                  f"{PROBE_TIMEOUT}s ({type(exc).__name__}); could not check its connectors from here")
        return {}
    want = CONNECT_STATES[props.get("state") or "running"]
    problems = {}
    for name in props.get("connectors") or {}:
        status = (live.get(name) or {}).get("status")
        parts = [status["connector"], *status.get("tasks", [])] if status else []
        if status is None:
            problems[name] = "MISSING"
        elif failed := failed_parts(status):
            problems[name] = "FAILED"
            if say:
                progress(f"{name}: {'; '.join(failed)}; `pulumi up` restarts it (and fails if it fails again)")
        elif status["connector"].get("state") in TARGET_STATES and status["connector"]["state"] != want:
            problems[name] = status["connector"]["state"]  # UNASSIGNED/RESTARTING pass: Connect is moving it
    return problems


def settle(client: ConnectClient, names, state: str, drift: dict[str, str] | None = None) -> None:
    """Move each connector that is not in the flow's state to it (Connect's
    pause, resume, stop). `drift`: connectors someone moved outside the stack
    (name → the state seen): `up` says what it repairs."""
    want = CONNECT_STATES[state]
    for name in names:
        status = client.status(name)
        now = (status or {}).get("connector", {}).get("state")
        if now == want and (state != "stopped" or not status.get("tasks")):
            continue
        if state == "running" and now not in ("PAUSED", "STOPPED"):
            continue  # starting or restarting: wait_state sees it run, or fails naming why
        if name in (drift or {}):
            progress(f"{name} on {client.url} is {now or drift[name]}, changed outside the stack; the flow's "
                      f"state is {state}: {VERBS[state]} it")
        client.set_state(name, state)


def owner_problems(client: ConnectClient, connectors: dict[str, dict], adopt: list[str]) -> list[str]:
    """Connectors of these names that exist already and are not this stack's to
    configure: another stack's, or made by hand without being adopted."""
    problems = []
    for name, config in connectors.items():
        live = client.get_config(name)
        if live is None:
            continue
        ours, theirs = config.get(OWNER_KEY), live.get(OWNER_KEY)
        if theirs is not None and theirs != ours:
            problems.append(f"{name} on {client.url} belongs to the stack {theirs!r}; fix: give this flow other "
                            "connector names (connector_names), or remove the flow from that stack first")
        elif theirs is None and name not in adopt:
            problems.append(f"{name} on {client.url} exists and was made outside mirrorstack; fix: adopt it "
                            "(flow connector_names) to reconfigure it in place, take it over (take_over) under "
                            "mirrorstack's names, or delete it")
    return problems


def carry_over(old_client: ConnectClient, old: str, client: ConnectClient, new: str, config: dict | None,
               state: str = "running", keep_offsets: bool = True) -> bool:
    """Replace connector `old` by `new` without replication starting over:
    stop `old` (its tasks commit), copy its source offsets to `new` (created
    stopped, or stopped), put `new` in the flow's `state`, delete `old`. `config`
    None: only delete `old`. False when there is no `old` (never was, or a re-run
    after a failure part-way): `new` is then the caller's to configure.
    `keep_offsets` False (the names changed): `new` starts from no offsets."""
    if old_client.status(old) is None:
        return False
    old_client.stop(old)
    if old == new and config is not None and (client.status(new) or {}).get("connector", {}).get("state") == "STOPPED":
        client.put_config(new, config)  # one Connect group after all (its workers moved): nothing to carry
        if not keep_offsets:
            client.reset_offsets(new)
        if state != "stopped":
            client.set_state(new, state)
        return True
    offsets = old_client.offsets(old) if config is not None and keep_offsets else []
    if config is not None:
        if client.get_config(new) is None:
            client.create_stopped(new, config)
        else:
            client.stop(new)
            client.put_config(new, config)
            if not keep_offsets:
                client.reset_offsets(new)
        if offsets:
            client.set_offsets(new, offsets)
        if state != "stopped":
            client.set_state(new, state)
    old_client.delete(old)
    where = "" if old_client.url == client.url else f" on {old_client.url}"
    progress(f"{old}{where} replaced by {new} on {client.url}, {len(offsets)} source offsets carried over"
              if config is not None else f"{old}{where} deleted (taken over)")
    return True


# The keys that name what a connector writes: a change renames every remote and internal
# topic, and offsets committed under the old names must not carry on (plan.RENAME_WARNING).
NAMING_KEYS = ("replication.policy.class", "replication.policy.separator")


def renames(old: dict[str, str] | None, new: dict[str, str] | None) -> bool:
    return bool(old) and bool(new) and any(old.get(k) != new.get(k) for k in NAMING_KEYS)


def refuse_colliding_renames(flow: str, old: dict[str, dict], changed: dict[str, dict]) -> None:
    """Before anything changes: a rename Kafka cannot create would stall the flow."""
    for name, config in changed.items():
        if renames(old.get(name), config) and config.get("connector.class") == f"{MIRROR_PACKAGE}.{SOURCE}":
            if problems := rename_problems(config):
                raise ConnectError(f"flow {flow}: nothing changed: " + "; ".join(problems))


def start_over(client: ConnectClient, name: str, config: dict[str, str], state: str) -> None:
    """Give a connector its new config with its offsets reset (KIP-875: stopped,
    DELETE .../offsets), then its flow state: MM2 copies the source topics again
    from their start, under the new names."""
    client.stop(name)
    client.put_config(name, config)
    client.reset_offsets(name)
    if state != "stopped":
        client.set_state(name, state)
    progress(f"{name}: the replication policy or separator changed: offsets reset, the source topics are copied "
              "again under the new names; the old remote topics stay on the target")


def configure(client: ConnectClient, name: str, config: dict[str, str], state: str) -> None:
    """Write a connector's config; one that does not exist yet is created in the
    flow's state (a config change keeps an existing one's paused or stopped state)."""
    if state != "running" and client.get_config(name) is None:
        client.create(name, config, state)
    else:
        client.put_config(name, config)


def by_class(connectors: dict[str, dict]) -> dict[str, str]:
    return {config.get("connector.class"): name for name, config in connectors.items()}
