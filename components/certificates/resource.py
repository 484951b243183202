"""ClusterCertificates: a cluster's private CA (its key kept in Pulumi state as
a secret) and one certificate per node plus the client's.

Every `up` looks at them (diff): a new node gets a certificate of its own,
existing ones stay byte for byte (so nothing restarts for nothing), a
certificate inside its renewal window is re-issued by the same CA, and a raised
`ca_generation` rotates the CA in three phases, one per `up`
(mirrorstack.certificates.lifecycle). What an `up` does is printed as
`mirrorstack: ...` lines.

Test/dry-run hook: MIRRORSTACK_TLS_CLOCK_OFFSET_DAYS (a number of days) shifts
the clock of the renewal DECISION only; certificates are always issued from the
real now. E.g. `MIRRORSTACK_TLS_CLOCK_OFFSET_DAYS=340 pulumi preview` shows
what the `up` of that day would renew.
"""
from __future__ import annotations

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming
from mirrorstack.certificates.args import ClusterCertificatesArgs

CLOCK_OFFSET_ENV = "MIRRORSTACK_TLS_CLOCK_OFFSET_DAYS"
SECRET_OUTPUTS = ["ca_key", "next_ca_key", "leaves"]
STATE_KEYS = ("ca_key", "ca_cert", "trusted", "next_ca_key", "next_ca_cert", "generation", "phase", "leaves")
INPUT_KEYS = ("cluster", "nodes", "validity_days", "renew_before_days", "ca_validity_days", "ca_generation")


def decision_clock():
    """Now, shifted by the test/dry-run hook (renewal decisions only)."""
    import datetime
    import os
    offset = float(os.environ.get(CLOCK_OFFSET_ENV) or 0)
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=offset)


def _say(cluster: str, lines) -> None:
    import sys
    for line in lines:
        print(f"mirrorstack: {cluster} certificates: {line}", file=sys.stderr, flush=True)


def _outs(props, state) -> dict:
    from mirrorstack.certificates import lifecycle as life
    return {**{k: props.get(k) for k in INPUT_KEYS}, **{k: state.get(k) for k in STATE_KEYS},
            "truststore": life.truststore(state), "certificates": life.summary(state)}


class ClusterCertificatesProvider(ResourceProvider):
    def create(self, props):
        import uuid

        from mirrorstack.certificates import lifecycle as life
        state = life.new_state(props["cluster"], props["nodes"], life.Policy.of(props))
        return CreateResult(id_=uuid.uuid4().hex, outs=_outs(props, state))

    def diff(self, _id, olds, news):
        from mirrorstack.certificates import lifecycle as life
        if olds.get("cluster") != news.get("cluster"):
            return DiffResult(changes=True, replaces=["cluster"])
        if not olds.get("ca_key"):  # made by a mirrorstack that did not keep the CA key: only a new CA can sign
            _say(news["cluster"], ["pending: a new CA and certificates, once (the old CA's key was not kept)"])
            return DiffResult(changes=True, replaces=["nodes"])
        policy, now = life.Policy.of(news), decision_clock()
        steps = life.plan(olds, news["nodes"], policy, now)  # a lowered ca_generation raises here: the preview fails
        if warning := life.ca_warning(olds, policy, now):
            steps.append(f"warning: {warning}")
        _say(news["cluster"], [f"pending: {s}" for s in steps])
        inputs_changed = any(olds.get(k) != news.get(k) for k in INPUT_KEYS)
        return DiffResult(changes=bool(steps) or inputs_changed, replaces=[])

    def update(self, _id, olds, news):
        from mirrorstack.certificates import lifecycle as life
        state, steps = life.advance(olds, news["cluster"], news["nodes"], life.Policy.of(news), decision_clock())
        then = life.next_step(olds, state)
        _say(news["cluster"], [*(f"done: {s}" for s in steps), *([then] if then else [])])
        return UpdateResult(outs=_outs(news, state))


class ClusterCertificates(Resource, module="tls", name="ClusterCertificates"):
    """A cluster's CA and certificates, built from ClusterCertificatesArgs. Outputs:
    `truststore` (PEM: the CAs every node and client trusts), `ca_cert` (the
    CA that signs now), `leaves` (a secret: node name, and `client`, → PEM
    keystore: unencrypted PKCS#8 key, certificate, CA), `ca_key` (a secret),
    `certificates` (not secret: fingerprints, expiries, rotation phase)."""

    ca_cert: pulumi.Output[str]
    truststore: pulumi.Output[str]
    leaves: pulumi.Output[dict]
    certificates: pulumi.Output[dict]

    def __init__(self, name: str, args: ClusterCertificatesArgs, opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        cluster, nodes, settings = args.cluster, args.nodes, args.settings
        super().__init__(ClusterCertificatesProvider(), resource_name, {
            "cluster": cluster, "nodes": {n: sorted(set(h)) for n, h in nodes.items()},
            "validity_days": settings.validity_days, "renew_before_days": settings.renew_before_days,
            "ca_validity_days": settings.ca_validity_days, "ca_generation": settings.ca_generation,
            **{k: None for k in (*STATE_KEYS, "truststore", "certificates")},
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=SECRET_OUTPUTS)))

    def keystore(self, node: str) -> pulumi.Output[str]:
        """One node's PEM keystore (a secret)."""
        return self.leaves.apply(lambda leaves: leaves[node])
