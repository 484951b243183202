"""What the preview and `pulumi refresh` say about a flow's connectors beyond
the diff itself: which existing connectors `up` adopts or takes over, and what
is down when Connect cannot answer.
"""
from __future__ import annotations

from mirrorstack.connect.api import ConnectClient, ConnectError, answers, client_from, progress, summarize
from mirrorstack.mm2.connectors import OWNER_KEY

# Flows (and their Connect URL) whose outage this provider process has said already: `pulumi refresh`
# reads each flow, then diffs it against the program, and both find Connect down; one line is enough.
_OUTAGES_SAID: set[tuple] = set()


def takeover_plan(props) -> list[str]:
    """What `up` will do to existing connectors of a flow (adopted or taken
    over), read live, for the preview; says so when Connect cannot be asked."""
    import urllib3
    adopt, take_over = props.get("adopt") or [], props.get("take_over") or {}
    if not adopt and not take_over:
        return []
    try:
        client = client_from(props).quick()
        status = {name: client.status(name) for name in [*adopt, *take_over]}
        owners = {name: (client.get_config(name) or {}).get(OWNER_KEY) for name in adopt if status[name]}
    except (ConnectError, urllib3.exceptions.HTTPError) as exc:
        return [f"could not ask Kafka Connect which of {', '.join([*adopt, *take_over])} exist ({exc}); up adopts "
                "or takes over those it finds"]
    lines = []
    for name in adopt:
        if status[name] is None:
            lines.append(f"{name}: does not exist; up creates it")
        elif owners.get(name) is None:
            lines.append(f"{name}: exists ({summarize(status[name])['state']}, made outside mirrorstack); up adopts "
                         "it: its config is replaced in place, its source offsets are kept")
    for old, new in take_over.items():
        if status[old] is None:
            lines.append(f"{old}: not found; nothing to take over (remove it from take_over)")
        elif new:
            lines.append(f"{old}: exists ({summarize(status[old])['state']}); up stops it, copies its source offsets "
                         f"to {new}, starts {new} and deletes {old}")
        else:
            lines.append(f"{old}: exists; up stops and deletes it (the flow runs no connector of its kind)")
    return lines


def outage(props, client: ConnectClient, exc: Exception, timeout: float) -> str:
    """What refresh says when Connect could not answer: which part is down, and the fix."""
    recorded = "recorded its connectors as UNREACHABLE (their configs as last seen)"
    if answers(client.url, client.http.headers, props.get("connect_ca_file") or None):
        return (f"{props.get('flow')}: Kafka Connect at {client.url} answers but could not read its connectors "
                f"within {timeout:g}s ({type(exc).__name__}): a worker keeps them in topics of its own Kafka "
                f"cluster (Connect cluster {props.get('connect') or client.url} runs on it), which is likely down; "
                f"{recorded}; fix: bring that Kafka cluster back (`pulumi up` restarts the brokers and controllers "
                "the stack runs), then `pulumi up` checks the connectors")
    return (f"{props.get('flow')}: Kafka Connect at {client.url} is down ({type(exc).__name__}: {exc}); {recorded}; "
            "fix: `pulumi up` restarts the Connect workers the stack runs (an external Connect cluster: start its "
            "workers), then checks the connectors")


def say_outage(props, client: ConnectClient, exc: Exception, timeout: float) -> None:
    """Say `outage` once for this run of the engine (its provider process)."""
    _OUTAGES_SAID.add((props.get("flow"), props.get("connect_url")))
    progress(outage(props, client, exc, timeout))


def outage_said(props) -> bool:
    """Whether this run has said already that the flow's Connect is down (a refresh's read did)."""
    return (props.get("flow"), props.get("connect_url")) in _OUTAGES_SAID
