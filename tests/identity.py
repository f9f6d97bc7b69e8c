"""A kubeconfig per scheduler, each with a client certificate of its own (groups
system:masters and any others), so the API server, its audit log and the tests' webhooks
can tell who sent a request. Used by the differential oracle and the fault suite."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kas_dev.cluster.local import LocalCluster


def kubeconfig_for(
    local: LocalCluster,
    user: str,
    out: Path,
    groups: Sequence[str] = ("system:masters",),
) -> Path:
    """`out/<user>.kubeconfig`, with a client certificate signed by the cluster's CA:
    CN=user, one organization per group."""
    pki = local.pki_dir
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    cert_path, key_path = write_pem_pair(out, user, cert, key)
    kubeconfig = out / f"{user}.kubeconfig"
    local.write_kubeconfig(kubeconfig, user, cert_path, key_path)
    kubeconfig.chmod(0o600)
    return kubeconfig


def write_pem_pair(
    out: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> tuple[Path, Path]:
    """Write `<stem>.crt` and `<stem>.key` (PEM, unencrypted PKCS8) under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = out / f"{stem}.crt", out / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
