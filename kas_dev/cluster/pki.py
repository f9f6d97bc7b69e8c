"""The local cluster's own certificate authority and keys.

Clients verify the API server's certificate against this CA (TLS is never skipped); the
admin identity is a client certificate in group system:masters; the service-account key
pair signs and verifies ServiceAccount tokens (the TokenRequest API needs it)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from kas_dev.cluster.errors import ClusterError

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    raise ClusterError(
        "the local cluster needs the 'cryptography' package (pip install '.[dev]')"
    ) from exc


@dataclass(frozen=True, slots=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    admin_cert: Path
    admin_key: Path
    kwok_cert: Path
    kwok_key: Path
    sa_key: Path
    sa_pub: Path


def pki_paths(folder: Path) -> Pki:
    return Pki(
        ca_cert=folder / "ca.crt",
        ca_key=folder / "ca.key",
        server_cert=folder / "apiserver.crt",
        server_key=folder / "apiserver.key",
        admin_cert=folder / "admin.crt",
        admin_key=folder / "admin.key",
        kwok_cert=folder / "kwok.crt",
        kwok_key=folder / "kwok.key",
        sa_key=folder / "sa.key",
        sa_pub=folder / "sa.pub",
    )


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def make_pki(folder: Path) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=365)

    ca_key = _key()
    ca_name = _name("kube-async-scheduler-local-ca")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        cn: str, org: str | None, server: bool
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = _key()
        b = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, org))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            b = b.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
                    ]
                ),
                critical=False,
            )
        return b.sign(ca_key, hashes.SHA256()), key

    server, server_key = leaf("kube-apiserver", None, server=True)
    admin, admin_key = leaf("kubernetes-admin", "system:masters", server=False)
    # kwok acts as every node's kubelet; its own identity lets tests tell its calls (the
    # final DELETE of a terminating pod) from the scheduler's
    kwok, kwok_key = leaf("system:kwok", "system:masters", server=False)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    p = pki_paths(folder)
    pem = serialization.Encoding.PEM
    p.ca_cert.write_bytes(ca.public_bytes(pem))
    _write_key(p.ca_key, ca_key)
    p.server_cert.write_bytes(server.public_bytes(pem))
    _write_key(p.server_key, server_key)
    p.admin_cert.write_bytes(admin.public_bytes(pem))
    _write_key(p.admin_key, admin_key)
    p.kwok_cert.write_bytes(kwok.public_bytes(pem))
    _write_key(p.kwok_key, kwok_key)
    _write_key(p.sa_key, sa_key)
    p.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return p
