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
    # the front proxy (the aggregator forwarding users to aggregated APIs such as the
    # scheduler's explain API): its own CA, as kubeadm, and the client the API server
    # presents (--proxy-client-cert-file) with the CN allowed in requestheader-allowed-names
    front_proxy_ca_cert: Path
    front_proxy_ca_key: Path
    front_proxy_client_cert: Path
    front_proxy_client_key: Path


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
        front_proxy_ca_cert=folder / "front-proxy-ca.crt",
        front_proxy_ca_key=folder / "front-proxy-ca.key",
        front_proxy_client_cert=folder / "front-proxy-client.crt",
        front_proxy_client_key=folder / "front-proxy-client.key",
    )


FRONT_PROXY_CLIENT_CN = "front-proxy-client"  # kubeadm's name for it


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


def _validity() -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    return now, now + datetime.timedelta(days=365)


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    now, until = _validity()
    ca_key = _key()
    ca_name = _name(cn)
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
    return ca, ca_key


def issue_client_cert(
    ca_cert: Path, ca_key: Path, cn: str, orgs: list[str], cert_out: Path, key_out: Path
) -> None:
    """A client certificate (CN = user, O = groups) signed by the CA in these files."""
    ca = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    signer = serialization.load_pem_private_key(ca_key.read_bytes(), None)
    assert isinstance(signer, ec.EllipticCurvePrivateKey)
    now, until = _validity()
    key = _key()
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(signer, hashes.SHA256())
    )
    cert_out.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_out, key)


def make_pki(folder: Path) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    now, until = _validity()
    ca, ca_key = _ca("kube-async-scheduler-local-ca")
    ca_name = ca.subject

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
    proxy_ca, proxy_ca_key = _ca("kube-async-scheduler-local-front-proxy-ca")
    p.front_proxy_ca_cert.write_bytes(proxy_ca.public_bytes(pem))
    _write_key(p.front_proxy_ca_key, proxy_ca_key)
    issue_client_cert(
        p.front_proxy_ca_cert, p.front_proxy_ca_key, FRONT_PROXY_CLIENT_CN, [],
        p.front_proxy_client_cert, p.front_proxy_client_key,
    )  # fmt: skip
    return p
