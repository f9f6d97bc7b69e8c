"""GET a path of a kube-async-scheduler process over its HTTPS port with the local
cluster's admin credentials: the one helper every in-repo consumer of /metrics, the
health endpoints and /explain calls (tests, benchmarks, the demo, the local Prometheus).

The admin identity is the cluster's client certificate (CN kubernetes-admin, O
system:masters, signed by the CA the API server publishes as client-ca-file): the
scheduler authenticates it itself and lets system:masters through without a review, as
kube-scheduler does. The scheduler's serving certificate is verified against the CA its
--cert-dir pair carries (the self-signed .crt holds the leaf, then its CA) when
`server_ca` is given; a probe that passes `client=None` is anonymous, as the kubelet's."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SERVING_PAIR", "ClientCert", "client_context", "scheduler_get", "serving_ca"]

SERVING_PAIR = "kube-async-scheduler"  # scheduler.serving.certs.PAIR_NAME


@dataclass(frozen=True, slots=True)
class ClientCert:
    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class ClusterAdmin:
    """A local cluster's admin certificate and the CA that signs its clients (the file a
    scheduler gets as --client-ca-file, so it knows the admin without reading anything
    from the API server: its own identity may not be allowed to)."""

    client: ClientCert
    client_ca: Path


# the clusters this process started, by API server URL (LocalCluster registers each)
_ADMINS: dict[str, ClusterAdmin] = {}


def register_admin(api_url: str, client: ClientCert, client_ca: Path) -> None:
    _ADMINS[api_url.rstrip("/")] = ClusterAdmin(client, client_ca)


def admin_of(api_url: str) -> ClusterAdmin | None:
    """The admin of a cluster this process started, by its API server's URL."""
    return _ADMINS.get(api_url.rstrip("/"))


def serving_ca(cert_dir: Path) -> Path:
    """The certificate file a scheduler started with `--cert-dir cert_dir` serves."""
    return cert_dir / f"{SERVING_PAIR}.crt"


def client_context(client: ClientCert | None, server_ca: Path | None) -> ssl.SSLContext:
    """The TLS context of a caller presenting `client` (None: anonymous), checking the
    scheduler's certificate against `server_ca` (None: accepting any)."""
    if server_ca is not None:
        ctx = ssl.create_default_context(cafile=str(server_ca))
    else:  # no CA to check it against: the caller accepts any serving certificate
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if client is not None:
        ctx.load_cert_chain(str(client.cert), str(client.key))
    return ctx


def scheduler_get(
    base_url: str,
    path: str,
    *,
    client: ClientCert | None,
    server_ca: Path | None = None,
    token: str | None = None,
    timeout: float = 10.0,
) -> tuple[int, str]:
    """(status, body) of GET base_url+path; HTTP errors are answers, not exceptions.
    Connection failures raise OSError."""
    request = urllib.request.Request(base_url.rstrip("/") + path)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    ctx = client_context(client, server_ca)
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=timeout) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
