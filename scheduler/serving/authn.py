"""Delegated authentication, as upstream's DelegatingAuthenticatorConfig.New
(k8s.io/apiserver@v0.37.2 pkg/authentication/authenticatorfactory/delegating.go): the
front proxy first, then the client certificate, then the bearer token; the first that
recognises the caller wins, every user so found joins system:authenticated.

- front proxy: the peer's certificate verifies against the request-header CA and its
  CommonName is in the allowed names (any, when the list is empty): the user is in the
  X-Remote-* headers (identity.header_user);
- client certificate: verifies against the client CA: the user is its CN/O
  (identity.cert_user);
- bearer token: `Authorization: Bearer <token>` sent to TokenReview; answers (yes and no)
  cached for `cache_ttl` (upstream's --authentication-token-webhook-cache-ttl, 10 s),
  errors not cached (cache.New(tokenAuth, false, ttl, ttl)), keyed by the token's SHA-256;
- a caller that presents none of them is anonymous (None here); one whose credentials
  fail (a certificate neither CA signed, a token TokenReview rejects) is refused: upstream's
  union fails on error before anonymous is tried.

The TLS layer (server.py) asks for a client certificate and lets through only those that
chain to one of the two CAs; here it is matched to the CA that signed it: a certificate
must be issued directly by a CA of the bundle (the API server's CAs sign their clients
directly) and be within its validity period.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509

from scheduler.serving.authn_config import AuthenticationConfig
from scheduler.serving.identity import (
    Headers,
    UserInfo,
    cert_user,
    header_user,
    with_authenticated_group,
)
from scheduler.serving.reviews import Reviewer, ReviewError
from scheduler.serving.ttl_cache import TTLCache

__all__ = ["AuthenticationFailed", "Authenticator", "issued_by_any"]

log = logging.getLogger(__name__)

TOKEN_REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
DEFAULT_TOKEN_CACHE_TTL = 10.0  # --authentication-token-webhook-cache-ttl


class AuthenticationFailed(Exception):
    """Credentials were presented and are not valid: 401."""


def issued_by_any(cert: x509.Certificate, cas: tuple[x509.Certificate, ...]) -> bool:
    now = datetime.datetime.now(datetime.UTC)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        return False
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, Exception):  # wrong issuer, bad signature, key type
            continue
        if ca.not_valid_before_utc <= now <= ca.not_valid_after_utc:
            return True
    return False


@dataclass(frozen=True, slots=True)
class _TokenAnswer:
    user: UserInfo | None  # None: not authenticated


def bearer_token(headers: Headers) -> str | None:
    """upstream's bearertoken authenticator: "Bearer <token>" (scheme case-insensitive),
    else no token at all."""
    auth = headers.get("Authorization", "").strip()
    parts = auth.split(" ")
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    token = parts[1]
    return token or None


class Authenticator:
    def __init__(
        self, reviewer: Reviewer, *, cache_ttl: float = DEFAULT_TOKEN_CACHE_TTL,
        max_cached: int = 4096, clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.config = AuthenticationConfig()
        self._reviewer = reviewer
        self.cache_ttl = cache_ttl
        self._tokens: TTLCache[bytes, _TokenAnswer] = TTLCache(max_cached, clock=clock)

    async def authenticate(
        self, headers: Headers, peer: x509.Certificate | None
    ) -> UserInfo | None:
        """The caller, or None when it presented no credentials. Raises
        AuthenticationFailed (401) or ReviewError (the API server did not answer: 401 too,
        as upstream)."""
        failure: str | None = None
        if peer is not None:
            user, failure = self._from_certificate(headers, peer)
            if user is not None:
                return with_authenticated_group(user)
        token = bearer_token(headers)
        if token is not None:
            user = await self._from_token(token)
            if user is None:
                raise AuthenticationFailed("invalid bearer token")
            return with_authenticated_group(user)
        if failure is not None:
            raise AuthenticationFailed(failure)
        return None

    def _from_certificate(
        self, headers: Headers, peer: x509.Certificate
    ) -> tuple[UserInfo | None, str | None]:
        cfg = self.config
        failure = "x509: certificate signed by unknown authority"
        rh = cfg.request_header
        if rh is not None and issued_by_any(peer, rh.cas):
            cn = cert_user(peer)
            cn_name = cn.name if cn is not None else ""
            if rh.allowed_names and cn_name not in rh.allowed_names:
                failure = f"x509: subject with cn={cn_name} is not in the allowed list"
            else:
                user = header_user(headers, rh.names)
                if user is not None:
                    return user, None
        if cfg.client_cas and issued_by_any(peer, cfg.client_cas):
            user = cert_user(peer)
            if user is None:
                return None, "x509: certificate is missing a CommonName"
            return user, None
        return None, failure

    async def _from_token(self, token: str) -> UserInfo | None:
        key = hashlib.sha256(token.encode()).digest()
        cached = self._tokens.get(key)
        if cached is not None:
            return cached.user
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            status = await self._reviewer.review(("token", key), TOKEN_REVIEW_PATH, body)
        except ReviewError as exc:
            log.warning("TokenReview failed (not cached): %s", exc)
            raise
        user = _reviewed_user(status)
        self._tokens.set(key, _TokenAnswer(user), self.cache_ttl)
        return user


def _reviewed_user(status: dict[str, object]) -> UserInfo | None:
    if status.get("authenticated") is not True:
        return None
    raw = status.get("user")
    if not isinstance(raw, dict) or not raw.get("username"):
        return None
    groups = raw.get("groups") or []
    extra = raw.get("extra") or {}
    return UserInfo(
        str(raw["username"]),
        uid=str(raw.get("uid") or ""),
        groups=tuple(str(g) for g in groups) if isinstance(groups, list) else (),
        extra={
            str(k): tuple(str(x) for x in v)
            for k, v in (extra.items() if isinstance(extra, dict) else [])
            if isinstance(v, list)
        },
    )
