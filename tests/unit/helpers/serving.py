"""In-memory parts for the serving unit tests: a fake API server answering TokenReviews
and SubjectAccessReviews, a HealthServer wired to it with a real TLS port, and a client."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from kas_dev.cluster.pki import Pki, issue_client_cert, make_pki
from kas_dev.cluster.scheduler_https import ClientCert, serving_ca
from scheduler.server import HealthServer, ServingOptions
from scheduler.serving.authn import Authenticator
from scheduler.serving.authn_config import config_from_configmap
from scheduler.serving.authz import Authorizer
from scheduler.serving.certs import serving_cert
from scheduler.serving.reviews import Reviewer


@dataclass
class FakeApi:
    """tokens: token -> TokenReview status.user; allowed: (user, what) pairs where what
    is a non-resource path or "pods/<namespace>"."""

    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    allowed: set[tuple[str, str]] = field(default_factory=set)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    fail: bool = False

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.reviews.append(body)
        if self.fail:
            raise ConnectionError("API server down")
        spec = body["spec"]
        if body["kind"] == "TokenReview":
            user = self.tokens.get(spec["token"])
            return {"status": {"authenticated": True, "user": user} if user else {}}
        if "nonResourceAttributes" in spec:
            what = spec["nonResourceAttributes"]["path"]
        else:
            ra = spec["resourceAttributes"]
            what = f"{ra['resource']}/{ra.get('namespace', '')}"
        return {"status": {"allowed": (spec["user"], what) in self.allowed}}


def authentication_configmap(pki: Pki) -> dict[str, Any]:
    """What kube-apiserver publishes for the local cluster's PKI."""
    return {
        "data": {
            "client-ca-file": pki.ca_cert.read_text(),
            "requestheader-client-ca-file": pki.front_proxy_ca_cert.read_text(),
            "requestheader-allowed-names": '["front-proxy-client"]',
            "requestheader-username-headers": '["X-Remote-User"]',
            "requestheader-group-headers": '["X-Remote-Group"]',
            "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
        }
    }


@dataclass
class Served:
    server: HealthServer
    api: FakeApi
    pki: Pki
    cert_dir: Path

    @property
    def admin(self) -> ClientCert:
        return ClientCert(self.pki.admin_cert, self.pki.admin_key)

    @property
    def front_proxy(self) -> ClientCert:
        return ClientCert(self.pki.front_proxy_client_cert, self.pki.front_proxy_client_key)

    def user_cert(self, name: str, groups: list[str]) -> ClientCert:
        out = self.cert_dir.parent / f"user-{name}"
        issue_client_cert(self.pki.ca_cert, self.pki.ca_key, name, groups,
                          out.with_suffix(".crt"), out.with_suffix(".key"))  # fmt: skip
        return ClientCert(out.with_suffix(".crt"), out.with_suffix(".key"))

    async def get(
        self, path: str, *, client: ClientCert | None = None, token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:  # fmt: skip
        ctx = ssl.create_default_context(cafile=str(serving_ca(self.cert_dir)))
        if client is not None:
            ctx.load_cert_chain(str(client.cert), str(client.key))
        sent = dict(headers or {})
        if token:
            sent["Authorization"] = f"Bearer {token}"
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.server.url + path, ssl=ctx, headers=sent) as resp,
        ):
            return resp.status, await resp.text()


def make_served(tmp: Path, registry: Any = None, **authz: Any) -> Served:
    pki = make_pki(tmp / "pki")
    api = FakeApi()
    reviewer = Reviewer(api.post)
    cert_dir = tmp / "serving"
    server = HealthServer(
        registry,
        cert=serving_cert(
            cert_file="", key_file="", cert_dir=str(cert_dir), bind_address="127.0.0.1"
        ),
        authenticator=Authenticator(reviewer),
        authorizer=Authorizer(reviewer, **authz),
        options=ServingOptions(bind_address="127.0.0.1", secure_port=0),
    )
    server.set_authentication_config(config_from_configmap(authentication_configmap(pki)))
    return Served(server, api, pki, cert_dir)
