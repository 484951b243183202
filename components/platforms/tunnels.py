"""Addresses whose clients open the way in themselves, from where `up` runs:
kube:// (a `kubectl port-forward`, kube_tunnel) and docker:// (a relay over
the Docker API, docker_tunnel). Whoever calls Connect or a broker goes
through here; any other URL is itself."""
from __future__ import annotations

from mirrorstack.platforms.docker import tunnel as docker_tunnel
from mirrorstack.platforms.kubernetes import tunnel as kube_tunnel

_KINDS = (kube_tunnel, docker_tunnel)


class TunnelError(RuntimeError):
    pass


def _kind(url: str):
    return next((kind for kind in _KINDS if kind.is_tunnelled(url)), None)


def is_tunnelled(url: str) -> bool:
    return _kind(url) is not None


def local(url: str, scheme: str = "http") -> str:
    """`url` itself, or the local URL of its tunnel (opened on first use)."""
    kind = _kind(url)
    if kind is None:
        return url
    try:
        return kind.local(url, scheme)
    except kind.TunnelError as exc:
        raise TunnelError(str(exc)) from exc


def forget(url: str) -> None:
    """Stop `url`'s tunnel (what it reached went away): the next use opens a new one."""
    kind = _kind(url)
    if kind is not None:
        kind.forget(url)


def failures(url: str) -> list[str]:
    """Why the last connections through `url`'s tunnel failed on the way (none known: [])."""
    kind = _kind(url)
    return list(getattr(kind, "failures", lambda _url: [])(url)) if kind is not None else []
