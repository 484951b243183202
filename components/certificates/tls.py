"""A private CA and the certificates a secured cluster needs, as PEM text.

Kafka reads PEM directly (`ssl.keystore.type=PEM`: an unencrypted PKCS#8 key
followed by the certificate chain; `ssl.truststore.type=PEM`: CA certificates),
so no keystore passwords exist to leak. Pure: `cryptography`, no pulumi.
"""
from __future__ import annotations

import datetime
import ipaddress
import re

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825  # the longest validity common TLS clients accept for leaf certificates


def _key_pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _cert_pem(cert) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _name(common_name: str, organization: str = "mirrorstack") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=days))


def new_ca(common_name: str, days: int = 3650) -> tuple[str, str]:
    """(key PEM, certificate PEM) of a self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _validity(x509.CertificateBuilder(), days).subject_name(_name(common_name)).issuer_name(
        _name(common_name)).public_key(key.public_key()).serial_number(x509.random_serial_number())
    builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).add_extension(
        x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                      key_encipherment=False, data_encipherment=False, key_agreement=False,
                      encipher_only=False, decipher_only=False), critical=True)
    return _key_pem(key), _cert_pem(builder.sign(key, hashes.SHA256()))


def issue(ca_key_pem: str, ca_cert_pem: str, common_name: str, hosts: list[str] = (),
          days: int = VALID_DAYS, organization: str = "mirrorstack") -> tuple[str, str]:
    """(key PEM, certificate PEM) signed by the CA, for servers (`hosts` as
    subject alternative names) and clients alike (both key usages);
    `organization`: Kubernetes reads it as the client's group."""
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), password=None)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _validity(x509.CertificateBuilder(), days).subject_name(_name(common_name, organization)).issuer_name(
        ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True).add_extension(
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    if hosts:
        names = []
        for host in dict.fromkeys(hosts):
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return _key_pem(key), _cert_pem(builder.sign(ca_key, hashes.SHA256()))


def keystore_pem(key_pem: str, cert_pem: str, ca_cert_pem: str) -> str:
    """What `ssl.keystore.type=PEM` reads from `ssl.keystore.location`: key, then chain."""
    return key_pem + cert_pem + ca_cert_pem


_CERT_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", re.S)
_KEY_BLOCK = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----\n?", re.S)


def keystore_parts(keystore: str) -> tuple[str, str]:
    """The inverse of keystore_pem: (key PEM, own certificate PEM), e.g. for
    librdkafka's in-memory `ssl.key.pem` / `ssl.certificate.pem`."""
    return _KEY_BLOCK.search(keystore)[0], _CERT_BLOCK.search(keystore)[0]


def certificates_in(pem: str) -> list[x509.Certificate]:
    """Every certificate of a PEM text (a keystore's chain, a truststore bundle), in order."""
    return [x509.load_pem_x509_certificate(block.encode()) for block in _CERT_BLOCK.findall(pem)]


def leaf_of(keystore: str) -> x509.Certificate:
    """A keystore's own certificate (the first of its chain)."""
    return certificates_in(keystore)[0]


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 fingerprint as `AB:CD:...` (what `openssl x509 -fingerprint -sha256` prints)."""
    return ":".join(f"{b:02X}" for b in cert.fingerprint(hashes.SHA256()))


def not_after(cert: x509.Certificate) -> datetime.datetime:
    return cert.not_valid_after_utc


def iso(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def host_names(cert: x509.Certificate) -> list[str]:
    """The subject alternative names (DNS names and IPs) a certificate was issued for."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n.value) for n in sans]


def signed_by(cert: x509.Certificate, ca_cert_pem: str) -> bool:
    """Whether the CA's key signed `cert`."""
    ca = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):  # another issuer name, key or signature
        return False
    return True
