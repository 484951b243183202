"""`pulumi destroy` of a flow's connectors: deleted through Kafka Connect, or,
when Connect cannot act, left there with a line that says where and what to
do, so the destroy goes on (the engine removes the stack's Connect workers
next) instead of failing on a Connect cluster that is down, e.g. a worker
that cannot start because its Kafka cluster refuses it.
"""
from __future__ import annotations

from mirrorstack.connect.api import ConnectClient, ConnectError, answers, client_from, progress


def delete_connectors(props) -> None:
    """Delete each of the flow's connectors. No worker answering, or Connect
    failing the request (5xx: e.g. its own Kafka cluster is down), is an
    outage: said, and not a failure. A refusal (401, 403, another 4xx) fails
    the destroy: Connect answered and said no."""
    import urllib3
    client = client_from(props)
    names = list(props.get("connectors") or {})
    if not names:
        return
    if not answers(client.url, client.http.headers, props.get("connect_ca_file") or None):
        progress(left_behind(props, client, names, "does not answer"))
        return
    try:
        for name in names:
            client.delete(name)
    except (ConnectError, urllib3.exceptions.HTTPError) as exc:
        if isinstance(exc, ConnectError) and (exc.status or 500) < 500:
            raise
        progress(left_behind(props, client, names, f"could not delete them ({type(exc).__name__}: {exc})"))


def left_behind(props, client: ConnectClient, names: list[str], why: str) -> str:
    """What destroy says about connectors it could not delete."""
    return (f"{props.get('flow')}: Kafka Connect at {client.url} {why}; destroy goes on and leaves "
            f"{', '.join(names)} to it. A Connect cluster this stack runs goes next, its workers stopped (the "
            "connectors' configs stay in its config topic until its Kafka cluster goes too); on one the stack does "
            "not run, delete them once it answers: DELETE /connectors/<name> on its REST API, for each")
