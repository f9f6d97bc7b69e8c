"""Delegated authorization, as upstream's DelegatingAuthorizationOptions
(k8s.io/apiserver@v0.37.2 pkg/server/options/authorization.go), in its order:

1. the privileged groups (system:masters) may do anything;
2. the always-allowed paths (--authorization-always-allow-paths, default
   /healthz,/readyz,/livez) are allowed to anyone, for non-resource requests
   (pkg/authorization/path/path.go: exact paths, or prefixes written with a trailing "*");
3. else a SubjectAccessReview with the caller's user, uid, groups and extra
   (plugin/pkg/authorizer/webhook/webhook.go): allowed answers are cached for
   --authorization-webhook-cache-authorized-ttl (10 s), denied ones for
   --authorization-webhook-cache-unauthorized-ttl (10 s), keyed by the review's spec;
   an unanswered review is an error (500), never an allow, and is not cached.

`can_read_pods` is the explain API's question: may this caller `get pods` in a namespace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scheduler.serving.identity import UserInfo
from scheduler.serving.reviews import Reviewer
from scheduler.serving.ttl_cache import TTLCache

__all__ = [
    "DEFAULT_ALWAYS_ALLOW_PATHS",
    "Attributes",
    "Authorizer",
    "Decision",
    "PathMatcher",
    "forbidden_message",
]

log = logging.getLogger(__name__)

SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
PRIVILEGED_GROUPS = ("system:masters",)
DEFAULT_ALLOW_TTL = 10.0
DEFAULT_DENY_TTL = 10.0


@dataclass(frozen=True, slots=True)
class Attributes:
    """A non-resource request (path set) or a resource request (resource set)."""

    verb: str
    path: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)

    def spec(self) -> dict[str, object]:
        if not self.is_resource:
            return {"nonResourceAttributes": {"path": self.path, "verb": self.verb}}
        ra: dict[str, str] = {"verb": self.verb, "group": self.group, "resource": self.resource}
        for key, value in (("version", self.version), ("subresource", self.subresource),
                           ("namespace", self.namespace), ("name", self.name)):  # fmt: skip
            if value:
                ra[key] = value
        return {"resourceAttributes": ra}


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


def forbidden_message(user: UserInfo, attrs: Attributes) -> str:
    """responsewriters.forbiddenMessage (pkg/endpoints/handlers/responsewriters/errors.go)."""
    if not attrs.is_resource:
        return f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    if attrs.namespace:
        return (
            f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group '
            f'"{attrs.group}" in the namespace "{attrs.namespace}"'
        )
    return (
        f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group '
        f'"{attrs.group}" at the cluster scope'
    )


class PathMatcher:
    """pkg/authorization/path: "/x" exact, "/x*" prefix, "" or "/" the root."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.exact: set[str] = set()
        self.prefixes: list[str] = []
        for raw in paths:
            p = raw.strip().removeprefix("/")
            if not p:
                self.exact.add(p)
                continue
            if "*" in p[:-1]:
                raise ValueError(f'only trailing * allowed in "{raw}"')
            if p.endswith("*"):
                self.prefixes.append(p[:-1])
            else:
                self.exact.add(p)

    def matches(self, path: str) -> bool:
        p = path.removeprefix("/")
        return p in self.exact or any(p.startswith(prefix) for prefix in self.prefixes)


def _sar_body(user: UserInfo, attrs: Attributes) -> dict[str, object]:
    spec: dict[str, object] = {"user": user.name, **attrs.spec()}
    if user.uid:
        spec["uid"] = user.uid
    if user.groups:
        spec["groups"] = list(user.groups)
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": spec,
    }


class Authorizer:
    def __init__(
        self,
        reviewer: Reviewer,
        *,
        always_allow_paths: Iterable[str] = DEFAULT_ALWAYS_ALLOW_PATHS,
        allow_ttl: float = DEFAULT_ALLOW_TTL,
        deny_ttl: float = DEFAULT_DENY_TTL,
        max_cached: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reviewer = reviewer
        self.always_allow = PathMatcher(always_allow_paths)
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self._answers: TTLCache[tuple[object, ...], Decision] = TTLCache(max_cached, clock=clock)

    def always_allowed(self, attrs: Attributes) -> bool:
        return not attrs.is_resource and self.always_allow.matches(attrs.path)

    async def authorize(self, user: UserInfo, attrs: Attributes) -> Decision:
        """Raises reviews.ReviewError when the API server does not answer."""
        if any(g in PRIVILEGED_GROUPS for g in user.groups):
            return Decision(True)
        if self.always_allowed(attrs):
            return Decision(True)
        key = (user.key(), attrs)
        cached = self._answers.get(key)
        if cached is not None:
            return cached
        status = await self._reviewer.review(("sar", key), SAR_PATH, _sar_body(user, attrs))
        allowed = status.get("allowed") is True and status.get("denied") is not True
        reason = str(status.get("reason") or "")
        if status.get("evaluationError"):
            log.info("SubjectAccessReview evaluation error: %s", status["evaluationError"])
        decision = Decision(allowed, reason)
        self._answers.set(key, decision, self.allow_ttl if allowed else self.deny_ttl)
        return decision

    async def can_read_pods(self, user: UserInfo, namespace: str) -> bool:
        decision = await self.authorize(
            user, Attributes(verb="get", resource="pods", namespace=namespace, version="v1")
        )
        return decision.allowed
