"""ClusterCertificates: a cluster's private CA and its node and client
certificates, generated once (at create) and kept in Pulumi state as secrets.

A new host list (e.g. more brokers) re-issues them; otherwise they are stable
across ups, so services are not restarted for nothing.
"""
from __future__ import annotations

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

from components import naming

SECRET_OUTPUTS = ["server_pem", "client_pem"]


class ClusterCertificatesProvider(ResourceProvider):
    def create(self, props):
        import uuid

        from components.config import tls
        ca_key, ca_cert = tls.new_ca(f"mirrorstack {props['cluster']} CA")
        server_key, server_cert = tls.issue(ca_key, ca_cert, f"{props['cluster']}-broker", list(props["hosts"]))
        client_key, client_cert = tls.issue(ca_key, ca_cert, f"{props['cluster']}-client")
        return CreateResult(id_=uuid.uuid4().hex, outs={
            **props, "ca_cert": ca_cert,
            # The CA key is not kept: nothing new is signed later (new hosts make a new CA).
            "server_pem": tls.keystore_pem(server_key, server_cert, ca_cert),
            "client_pem": tls.keystore_pem(client_key, client_cert, ca_cert)})

    def diff(self, _id, olds, news):
        changed = [k for k in ("cluster", "hosts") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=changed)


class ClusterCertificates(Resource, module="tls", name="ClusterCertificates"):
    """Outputs: `ca_cert` (PEM), `server_pem` and `client_pem` (secret PEM
    keystores: unencrypted PKCS#8 key, certificate, CA)."""

    ca_cert: pulumi.Output[str]
    server_pem: pulumi.Output[str]
    client_pem: pulumi.Output[str]

    def __init__(self, name: str, *, cluster: str, hosts: list[str], opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        super().__init__(ClusterCertificatesProvider(), resource_name, {
            "cluster": cluster, "hosts": sorted(set(hosts)), "ca_cert": None, "server_pem": None, "client_pem": None,
        }, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=SECRET_OUTPUTS)))
