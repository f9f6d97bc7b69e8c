"""What the API server publishes for delegated authentication: ConfigMap
kube-system/extension-apiserver-authentication (k8s.io/apiserver@v0.37.2
pkg/server/options/authentication.go: createRequestHeaderConfig and the client-ca
ConfigMap controller): the client CA, and the front proxy's CA, allowed names and header
names, each list a JSON array of strings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from cryptography import x509

from scheduler.serving.identity import RequestHeaderNames

__all__ = [
    "CONFIGMAP_NAME",
    "CONFIGMAP_NAMESPACE",
    "AuthenticationConfig",
    "ClientCA",
    "ConfigMapError",
    "config_from_configmap",
]

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"


class ConfigMapError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class RequestHeaderConfig:
    ca_pem: bytes
    cas: tuple[x509.Certificate, ...]
    allowed_names: tuple[str, ...]
    names: RequestHeaderNames


@dataclass(frozen=True, slots=True)
class AuthenticationConfig:
    client_ca_pem: bytes = b""
    client_cas: tuple[x509.Certificate, ...] = ()
    request_header: RequestHeaderConfig | None = None
    source: str = field(default="none", compare=False)


@dataclass(frozen=True, slots=True)
class ClientCA:
    """A client CA bundle given by file (--client-ca-file)."""

    pem: bytes
    cas: tuple[x509.Certificate, ...]

    @classmethod
    def from_file(cls, path: str) -> ClientCA:
        """Raises OSError or ValueError (not a PEM bundle)."""
        with open(path, "rb") as f:
            pem = f.read()
        cas = tuple(x509.load_pem_x509_certificates(pem))
        return cls(pem, cas)

    def over(self, config: AuthenticationConfig) -> AuthenticationConfig:
        return replace(config, client_ca_pem=self.pem, client_cas=self.cas)


def _string_list(data: dict[str, str], key: str) -> tuple[str, ...] | None:
    raw = data.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigMapError(f"{key}: not a JSON list: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigMapError(f"{key}: expected a JSON list of strings")
    return tuple(value)


def _cas(data: dict[str, str], key: str) -> tuple[bytes, tuple[x509.Certificate, ...]]:
    pem = (data.get(key) or "").encode()
    if not pem.strip():
        return b"", ()
    try:
        return pem, tuple(x509.load_pem_x509_certificates(pem))
    except ValueError as exc:
        raise ConfigMapError(f"{key}: not a PEM certificate bundle: {exc}") from exc


def config_from_configmap(cm: dict[str, Any]) -> AuthenticationConfig:
    data = cm.get("data") or {}
    if not isinstance(data, dict):
        raise ConfigMapError("data: expected a map")
    client_pem, client_cas = _cas(data, "client-ca-file")
    rh_pem, rh_cas = _cas(data, "requestheader-client-ca-file")
    request_header = None
    if rh_cas:  # upstream: no request-header CA, no request-header authentication
        default = RequestHeaderNames()
        request_header = RequestHeaderConfig(
            ca_pem=rh_pem,
            cas=rh_cas,
            allowed_names=_string_list(data, "requestheader-allowed-names") or (),
            names=RequestHeaderNames(
                username=_string_list(data, "requestheader-username-headers") or default.username,
                uid=_string_list(data, "requestheader-uid-headers") or default.uid,
                group=_string_list(data, "requestheader-group-headers") or default.group,
                extra_prefixes=_string_list(data, "requestheader-extra-headers-prefix")
                or default.extra_prefixes,
            ),
        )
    return AuthenticationConfig(client_pem, client_cas, request_header, source="configmap")
