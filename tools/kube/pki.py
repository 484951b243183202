"""The cluster's certificates, service-account keys and kubeconfigs, made once
per data folder: one CA signs the API server's serving certificate and every
client's (the group in the certificate's organization, as Kubernetes reads it)."""
from __future__ import annotations

import base64
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mirrorstack.certificates import tls
from tools.kube import layout

# name → (common name, group): what each client of the API server is.
CLIENTS = {
    "admin": ("mirrorstack-admin", "system:masters"),
    "kubelet": (f"system:node:{layout.NODE}", "system:nodes"),
    "controller-manager": ("system:kube-controller-manager", "system:kube-controller-manager"),
    "scheduler": ("system:kube-scheduler", "system:kube-scheduler"),
    "proxy": ("system:kube-proxy", "system:node-proxier"),
    "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", "system:masters"),
    # A group bound to nothing: exactly the rights a test binds to it (the docs' deployer role).
    "deployer": ("mirrorstack-deployer", "mirrorstack-deployers"),
}


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=mode, exist_ok=True)
    path.chmod(mode)
    path.write_text(text)


def ensure() -> None:
    """Make what is missing (a second start reuses the first's; a client added
    since gets its certificate from the same CA)."""
    pki = layout.PKI
    if (pki / ".complete").exists():
        _add_clients([c for c in CLIENTS if not kubeconfig_path(c).exists()])
        return
    ca_key, ca_cert = tls.new_ca("mirrorstack-kube-ca")
    _write(pki / "ca.key", ca_key)
    _write(pki / "ca.crt", ca_cert, 0o644)
    hosts = [layout.GATEWAY, layout.API_SERVICE_IP, "127.0.0.1", "localhost", "kubernetes", "kubernetes.default",
             "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"]
    for name, (cn, group, names) in {"apiserver": ("kube-apiserver", "mirrorstack", hosts),
                                     "kubelet-serving": (layout.NODE, "system:nodes", [layout.GATEWAY, layout.NODE])}.items():
        key, cert = tls.issue(ca_key, ca_cert, cn, names, organization=group)
        _write(pki / f"{name}.key", key)
        _write(pki / f"{name}.crt", cert, 0o644)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(pki / "sa.key", sa.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()).decode())
    _write(pki / "sa.pub", sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo).decode(), 0o644)
    _add_clients(list(CLIENTS))
    (pki / ".complete").touch()


def _add_clients(clients: list[str]) -> None:
    """Each client's key, certificate (from the CA on disk) and kubeconfig."""
    ca_key, ca_cert = ((layout.PKI / f).read_text() for f in ("ca.key", "ca.crt"))
    for name in clients:
        key, cert = tls.issue(ca_key, ca_cert, CLIENTS[name][0], [], organization=CLIENTS[name][1])
        _write(layout.PKI / f"{name}.key", key)
        _write(layout.PKI / f"{name}.crt", cert, 0o644)
        _write(kubeconfig_path(name), kubeconfig(name))


def kubeconfig_path(client: str) -> Path:
    return layout.KUBECONFIG if client == "admin" else layout.PKI / f"{client}.kubeconfig"


def kubeconfig(client: str) -> str:
    """A kubeconfig with the client's certificate inline (valid wherever it is copied)."""
    def b64(name: str) -> str:
        return base64.b64encode((layout.PKI / name).read_bytes()).decode()
    return f"""apiVersion: v1
kind: Config
clusters:
- name: mirrorstack-kube
  cluster:
    server: https://{layout.GATEWAY}:{layout.API_PORT}
    certificate-authority-data: {b64("ca.crt")}
users:
- name: {client}
  user:
    client-certificate-data: {b64(f"{client}.crt")}
    client-key-data: {b64(f"{client}.key")}
contexts:
- name: mirrorstack-kube
  context: {{cluster: mirrorstack-kube, user: {client}}}
current-context: mirrorstack-kube
"""
