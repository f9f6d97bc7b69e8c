"""Who is asking: the user of a request, as upstream's authenticators read it.

- a client certificate (k8s.io/apiserver@v0.37.2 pkg/authentication/request/x509/x509.go,
  CommonNameUserConversion): the name is the subject's CommonName (required), the groups
  its Organizations;
- the front proxy's headers (pkg/authentication/request/headerrequest/requestheader.go):
  the name from the first non-empty username header, the uid likewise, the groups from
  every value of every group header, the extras from every header that starts with an
  extra prefix (case-insensitive), the rest of its name lowercased then %-unescaped (kept
  as it is when the escape is malformed);
- the authenticated-group adder (pkg/authentication/group/authenticated_group_adder.go):
  every authenticated user but system:anonymous is also in system:authenticated.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import ItemsView, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = [
    "ALL_AUTHENTICATED",
    "ALL_UNAUTHENTICATED",
    "ANONYMOUS",
    "Headers",
    "RequestHeaderNames",
    "UserInfo",
    "cert_user",
    "header_user",
    "unescape_extra_key",
    "with_authenticated_group",
]


class Headers(Protocol):
    """A request's headers, case-insensitive, a name possibly repeated (aiohttp's
    CIMultiDictProxy)."""

    def get(self, key: str, default: str, /) -> str: ...
    def getall(self, key: str, default: list[str], /) -> list[str]: ...
    def items(self) -> ItemsView[str, str]: ...


ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS_NAME = "system:anonymous"


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def key(self) -> tuple[object, ...]:
        """Hashable: the part of a review that depends on the user."""
        return (self.name, self.uid, self.groups, tuple(sorted(self.extra.items())))


ANONYMOUS = UserInfo(ANONYMOUS_NAME, groups=(ALL_UNAUTHENTICATED,))


@dataclass(frozen=True, slots=True)
class RequestHeaderNames:
    """The header names of the front proxy's identity, from the API server's
    extension-apiserver-authentication ConfigMap (upstream's defaults when absent)."""

    username: tuple[str, ...] = ("X-Remote-User",)
    uid: tuple[str, ...] = ()
    group: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)


def cert_user(cert: x509.Certificate) -> UserInfo | None:
    """None when the subject has no CommonName (upstream: an error, hence 401)."""
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    name = str(cns[0].value) if cns else ""
    if not name:
        return None
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return UserInfo(name, groups=tuple(str(o.value) for o in orgs))


_BAD_ESCAPE = re.compile(r"%(?![0-9a-fA-F]{2})")


def unescape_extra_key(encoded: str) -> str:
    """url.PathUnescape, or the key unchanged when it has a malformed escape."""
    if _BAD_ESCAPE.search(encoded):
        return encoded
    return urllib.parse.unquote(encoded, errors="strict") if "%" in encoded else encoded


def _first(headers: Headers, names: Iterable[str]) -> str:
    for name in names:
        value = headers.get(name, "")
        if value:
            return value
    return ""


def header_user(headers: Headers, names: RequestHeaderNames) -> UserInfo | None:
    """The front proxy's user, or None when no username header is set."""
    name = _first(headers, names.username)
    if not name:
        return None
    groups = [v for h in names.group for v in headers.getall(h, []) if v]
    extra: dict[str, list[str]] = {}
    for prefix in names.extra_prefixes:  # prefix order first, as upstream's newExtra
        n = len(prefix)
        for header, value in headers.items():
            if len(header) >= n and header[:n].lower() == prefix.lower():
                extra.setdefault(unescape_extra_key(header[n:].lower()), []).append(value)
    return UserInfo(
        name,
        uid=_first(headers, names.uid),
        groups=tuple(groups),
        extra={k: tuple(v) for k, v in extra.items()},
    )


def with_authenticated_group(user: UserInfo) -> UserInfo:
    if user.name == ANONYMOUS_NAME:
        return user
    if ALL_AUTHENTICATED in user.groups or ALL_UNAUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, ALL_AUTHENTICATED), user.extra)
