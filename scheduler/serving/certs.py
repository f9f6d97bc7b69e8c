"""The serving certificate: a mounted pair (--tls-cert-file/--tls-private-key-file), or
a self-signed one, as upstream's SecureServingOptions.MaybeDefaultWithSelfSignedCerts
(k8s.io/apiserver@v0.37.2 pkg/server/options/serving.go) with client-go's
GenerateSelfSignedCertKeyWithOptions (k8s.io/client-go@v0.37.2 util/cert/cert.go):

- with --cert-dir, the pair is <cert-dir>/kube-async-scheduler.crt/.key; an existing
  readable pair there is reused, else one is generated and written there;
- without --cert-dir it is generated in memory (here: an anonymous memory file, so a
  read-only root filesystem is no obstacle);
- generated = a CA "<host>-ca@<unix time>" and a leaf "<host>@<unix time>" signed by it,
  both RSA 2048, valid from an hour ago for a year; the leaf's names are the host
  ("localhost", as kube-scheduler passes), 127.0.0.1, and the bind address when it is not
  unspecified (else "localhost" again, as upstream); the .crt holds the leaf then the CA.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["PAIR_NAME", "CertError", "ServingCert", "generate_self_signed", "serving_cert"]

log = logging.getLogger(__name__)

# kube-scheduler's PairName is "kube-scheduler"; ours names this scheduler
PAIR_NAME = "kube-async-scheduler"
PUBLIC_HOST = "localhost"  # kube-scheduler: MaybeDefaultWithSelfSignedCerts("localhost", ...)
VALIDITY = datetime.timedelta(days=365)
CLOCK_SKEW = datetime.timedelta(hours=1)


class CertError(Exception):
    """A serving certificate that cannot be read or written (exit 2: bad input)."""


@dataclass(frozen=True, slots=True)
class ServingCert:
    cert_pem: bytes
    key_pem: bytes
    cert_file: str | None  # where it lives on disk, when it does
    generated: bool

    def load_into(self, context: ssl.SSLContext) -> None:
        """ssl loads a chain only from files: hand it the PEM read at start-up through
        memory files (the same path for a mounted, a reused and a generated pair)."""
        with _memory_file(self.cert_pem) as cert, _memory_file(self.key_pem) as key:
            context.load_cert_chain(cert, key)


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path whose contents are `data`, for ssl's file-only loaders: an anonymous memory
    file (Linux memfd) where there is one, else a private temporary file."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        fd = memfd_create("kas-serving", 0)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile() as f:  # pragma: no cover - not Linux
        f.write(data)
        f.flush()
        yield f.name


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _builder(
    subject: x509.Name, issuer: x509.Name, key: rsa.RSAPrivateKey, valid_from: datetime.datetime,
    *, ca: bool,
) -> x509.CertificateBuilder:  # fmt: skip
    """What the CA and the leaf share: names, key, serial, validity, basic constraints and
    key usage (client-go: KeyEncipherment|DigitalSignature, plus CertSign for the CA)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid_from)
        .not_valid_after(valid_from + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=True,
                data_encipherment=False, key_agreement=False, key_cert_sign=ca,
                crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    )  # fmt: skip


def generate_self_signed(
    host: str, alternate_ips: list[str], alternate_dns: list[str]
) -> tuple[bytes, bytes]:
    """(cert PEM: leaf then CA, key PEM) as client-go's GenerateSelfSignedCertKeyWithOptions."""
    now = datetime.datetime.now(datetime.UTC)
    valid_from = now - CLOCK_SKEW
    stamp = int(now.timestamp())
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = _name(f"{host}-ca@{stamp}")
    ca = _builder(ca_name, ca_name, ca_key, valid_from, ca=True).sign(ca_key, hashes.SHA256())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names: list[x509.GeneralName] = []
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        names.append(x509.DNSName(host))
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in alternate_ips]
    names += [x509.DNSName(d) for d in alternate_dns]
    leaf = (
        _builder(_name(f"{host}@{stamp}"), ca_name, key, valid_from, ca=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    cert_pem = leaf.public_bytes(pem) + ca.public_bytes(pem)
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return cert_pem, key_pem


def _read_pair(cert_file: str, key_file: str) -> tuple[bytes, bytes]:
    try:
        return Path(cert_file).read_bytes(), Path(key_file).read_bytes()
    except OSError as exc:
        raise CertError(f"cannot read the serving certificate: {exc}") from exc


def serving_cert(*, cert_file: str, key_file: str, cert_dir: str, bind_address: str) -> ServingCert:
    """The pair to serve with (see the module's doc). Raises CertError."""
    if bool(cert_file) != bool(key_file):
        raise CertError("--tls-cert-file and --tls-private-key-file must be given together")
    if cert_file:
        cert_pem, key_pem = _read_pair(cert_file, key_file)
        _check_pair(cert_file, key_file)
        return ServingCert(cert_pem, key_pem, cert_file, generated=False)
    if cert_dir:
        crt = os.path.join(cert_dir, PAIR_NAME + ".crt")
        key = os.path.join(cert_dir, PAIR_NAME + ".key")
        # certutil.CanReadCertAndKey: both readable -> reuse
        if os.access(crt, os.R_OK) and os.access(key, os.R_OK):
            cert_pem, key_pem = _read_pair(crt, key)
            _check_pair(crt, key)
            return ServingCert(cert_pem, key_pem, crt, generated=False)
    alternate_ips = ["127.0.0.1"]
    alternate_dns: list[str] = []
    if _unspecified(bind_address):
        alternate_dns.append("localhost")
    else:
        alternate_ips.append(bind_address)
    cert_pem, key_pem = generate_self_signed(PUBLIC_HOST, alternate_ips, alternate_dns)
    if not cert_dir:
        log.info("Generated self-signed cert in-memory")
        return ServingCert(cert_pem, key_pem, None, generated=True)
    try:
        os.makedirs(cert_dir, mode=0o755, exist_ok=True)
        Path(crt).write_bytes(cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
    except OSError as exc:
        raise CertError(f"--cert-dir {cert_dir}: cannot write the certificate: {exc}") from exc
    log.info("Generated self-signed cert (%s, %s)", crt, key)
    return ServingCert(cert_pem, key_pem, crt, generated=True)


def _check_pair(cert_file: str, key_file: str) -> None:
    """Fail at start-up, with the file names, on a pair ssl cannot use."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise CertError(f"serving certificate {cert_file} / {key_file} unusable: {exc}") from exc


def _unspecified(address: str) -> bool:
    try:
        return ipaddress.ip_address(address or "0.0.0.0").is_unspecified
    except ValueError:
        return False
