"""The life of a cluster's certificates, as steps on a plain state dict: one
leaf certificate per node plus the client's, renewed in their window, issued
for new nodes, dropped for removed ones, and a CA rotation in three phases.

`plan` says what the next `pulumi up` does (a diff and a preview print it);
`advance` does it. Both take `now` so the renewal decision can be tested
without waiting a year. Pure: `cryptography`, no pulumi.

State keys: ca_key/ca_cert (the CA that signs), trusted (CA PEMs every
truststore holds), next_ca_key/next_ca_cert (a rotation's new CA while it is
only trusted), generation (the CA generation deployed), phase (ROTATION_*),
leaves (name → PEM keystore: key, certificate, signing CA).
"""
from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, fields

from mirrorstack.certificates import tls

CLIENT = "client"  # the leaves' key of the client certificate (node names carry their cluster's alias)
STEADY, TRUSTING_NEW_CA, REISSUED = "none", "trusting-new-ca", "reissued-by-new-ca"


@dataclass(frozen=True)
class Policy:
    """A cluster's `security.certificates` (model.Certificates)."""
    validity_days: int
    renew_before_days: int
    ca_validity_days: int
    ca_generation: int

    @classmethod
    def of(cls, props: Mapping) -> Policy:
        return cls(*(int(float(props[f.name])) for f in fields(cls)))  # dynamic-resource numbers come back as floats

    @property
    def window(self) -> datetime.timedelta:
        return datetime.timedelta(days=self.renew_before_days)


class GenerationLowered(ValueError):
    pass


def _due(keystore: str, policy: Policy, now: datetime.datetime) -> datetime.datetime | None:
    """The leaf's expiry when `now` is inside its renewal window, else None."""
    expiry = tls.not_after(tls.leaf_of(keystore))
    return expiry if now >= expiry - policy.window else None


def _rotation_step(state: Mapping, policy: Policy) -> str | None:
    phase = state.get("phase") or STEADY
    if phase == TRUSTING_NEW_CA:
        return "CA rotation phase 2/3: re-issue every certificate with the new CA (truststores keep both CAs)"
    if phase == REISSUED:
        return "CA rotation phase 3/3: drop the old CA from every truststore"
    deployed = int(float(state.get("generation") or 1))
    if policy.ca_generation < deployed:
        raise GenerationLowered(
            f"clusters.{state.get('cluster')}.security.certificates.ca_generation: {policy.ca_generation} is below "
            f"the deployed CA generation {deployed}; a CA cannot be rotated back; fix: set ca_generation: "
            f"{deployed} (or higher to rotate)")
    if policy.ca_generation > deployed:
        return (f"CA rotation phase 1/3: make CA generation {policy.ca_generation} and trust it alongside the old "
                "one (certificates unchanged)")
    return None


def _leaf_step(name: str, leaves: Mapping, hosts: list[str], policy: Policy, now: datetime.datetime) -> str | None:
    """Why the leaf `name` must be (re-)issued now, or None."""
    if name not in leaves:
        return f"issue a certificate for new node {name}"
    if name != CLIENT and sorted(tls.host_names(tls.leaf_of(leaves[name]))) != sorted(set(hosts)):
        return f"re-issue {name}'s certificate: its hosts changed"
    if expiry := _due(leaves[name], policy, now):
        what = "the client certificate" if name == CLIENT else f"{name}'s certificate"
        return f"renew {what} (expires {tls.iso(expiry)}, inside the {policy.renew_before_days}-day renewal window)"
    return None


def plan(state: Mapping, nodes: Mapping[str, list[str]], policy: Policy, now: datetime.datetime) -> list[str]:
    """What `advance` would do now, one line per step ([] = nothing)."""
    rotation = _rotation_step(state, policy)
    steps = [rotation] if rotation else []
    leaves = state.get("leaves") or {}
    if (state.get("phase") or STEADY) != TRUSTING_NEW_CA:  # else phase 2 re-issues every leaf anyway
        steps += [step for name, hosts in {**nodes, CLIENT: []}.items()
                  if (step := _leaf_step(name, leaves, hosts, policy, now))]
    steps += [f"drop the certificate of removed node {name}" for name in leaves if name not in nodes and name != CLIENT]
    return steps


def ca_warning(state: Mapping, policy: Policy, now: datetime.datetime) -> str | None:
    """The CA itself is inside the renewal window: only a rotation replaces it."""
    if not state.get("ca_cert"):
        return None
    expiry = tls.not_after(tls.certificates_in(state["ca_cert"])[0])
    if now >= expiry - policy.window:
        return (f"the CA expires {tls.iso(expiry)}: rotate it (raise clusters.{state.get('cluster')}.security."
                f"certificates.ca_generation to {int(float(state.get('generation') or 1)) + 1})")
    return None


def _leaf(state: Mapping, policy: Policy, cluster: str, name: str, hosts: list[str]) -> str:
    common_name = f"{cluster}-client" if name == CLIENT else name
    key, cert = tls.issue(state["ca_key"], state["ca_cert"], common_name, list(hosts), days=policy.validity_days)
    return tls.keystore_pem(key, cert, state["ca_cert"])


def new_state(cluster: str, nodes: Mapping[str, list[str]], policy: Policy) -> dict:
    """A new CA and every leaf (create)."""
    ca_key, ca_cert = tls.new_ca(f"mirrorstack {cluster} CA {policy.ca_generation}", days=policy.ca_validity_days)
    state = {"ca_key": ca_key, "ca_cert": ca_cert, "trusted": [ca_cert], "next_ca_key": None, "next_ca_cert": None,
             "generation": str(policy.ca_generation), "phase": STEADY}
    state["leaves"] = {name: _leaf(state, policy, cluster, name, hosts) for name, hosts in {**nodes, CLIENT: []}.items()}
    return state


def advance(state: Mapping, cluster: str, nodes: Mapping[str, list[str]], policy: Policy,
            now: datetime.datetime) -> tuple[dict, list[str]]:
    """(the next state, what was done): one rotation phase at most, plus the
    leaves' own steps. Leaves not named in a step stay byte for byte."""
    steps = plan(state, nodes, policy, now)
    out = {**state, "leaves": dict(state.get("leaves") or {})}
    phase = state.get("phase") or STEADY
    reissue = set()
    if phase == TRUSTING_NEW_CA:  # 2/3: the new CA signs from now on
        out.update(ca_key=state["next_ca_key"], ca_cert=state["next_ca_cert"], next_ca_key=None, next_ca_cert=None,
                   phase=REISSUED)
        reissue = {*nodes, CLIENT}
    elif phase == REISSUED:  # 3/3: nothing signed by the old CA is left
        out.update(trusted=[state["ca_cert"]], phase=STEADY)
    elif policy.ca_generation > int(float(state.get("generation") or 1)):  # 1/3
        key, cert = tls.new_ca(f"mirrorstack {cluster} CA {policy.ca_generation}", days=policy.ca_validity_days)
        out.update(next_ca_key=key, next_ca_cert=cert, trusted=[*state["trusted"], cert],
                   generation=str(policy.ca_generation), phase=TRUSTING_NEW_CA)
    leaves = out["leaves"]
    for name in [n for n in leaves if n not in nodes and n != CLIENT]:
        del leaves[name]
    for name, hosts in {**nodes, CLIENT: []}.items():
        if name in reissue or _leaf_step(name, leaves, hosts, policy, now):
            leaves[name] = _leaf(out, policy, cluster, name, hosts)
    return out, steps


def next_step(before: Mapping, state: Mapping) -> str | None:
    """What the following `up` will do by itself (a rotation in progress), or
    that a rotation just ended."""
    phase = state.get("phase") or STEADY
    if before.get("phase") == REISSUED and phase == STEADY:
        return f"CA rotation done: only CA generation {state['generation']} is trusted"
    if phase == TRUSTING_NEW_CA:
        return ("next `pulumi up`: re-issue every certificate with the new CA (reload the client CA file "
                "(clients' ca.pem) in your own clients first)")
    if phase == REISSUED:
        return "next `pulumi up`: drop the old CA from every truststore"
    return None


def truststore(state: Mapping) -> str:
    return "".join(state["trusted"])


def summary(state: Mapping) -> dict:
    """Not secret: the CA's fingerprint and expiry, each certificate's expiry and
    serial, the trusted CAs, the rotation phase (the `certificates` output)."""
    ca = tls.certificates_in(state["ca_cert"])[0]

    def leaf(pem: str) -> dict:
        cert = tls.leaf_of(pem)
        return {"not_after": tls.iso(tls.not_after(cert)), "serial": format(cert.serial_number, "x"),
                "issuer_fingerprint": tls.fingerprint(tls.certificates_in(pem)[1])}
    trusted = [c for pem in state["trusted"] for c in tls.certificates_in(pem)]
    return {"ca": {"fingerprint_sha256": tls.fingerprint(ca), "not_after": tls.iso(tls.not_after(ca)),
                   "generation": int(float(state.get("generation") or 1))},
            "trusted_cas": [tls.fingerprint(c) for c in trusted],
            "certificates": {name: leaf(pem) for name, pem in sorted(state["leaves"].items())},
            "rotation_phase": state.get("phase") or STEADY}
