"""The refusals' bodies, as the API server writes them (metav1.Status): 401 from
filters.Unauthorized, 403 from responsewriters.ForbiddenStatusError, 500 from
responsewriters.InternalError (k8s.io/apiserver@v0.37.2 pkg/endpoints), and our 429 for
a review queue that is full."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from scheduler.serving.authz import Attributes, forbidden_message
from scheduler.serving.identity import UserInfo

__all__ = ["forbidden", "internal_error", "too_many_requests", "unauthorized"]

RETRY_AFTER_SECONDS = 1


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None) -> web.Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return web.json_response(body, status=code)


def unauthorized() -> web.Response:
    return _status(401, "Unauthorized", "Unauthorized", None)


def forbidden(user: UserInfo, attrs: Attributes, reason: str = "") -> web.Response:
    """apierrors.NewForbidden: "<resource>.<group> "<name>" is forbidden: <why>", or
    "forbidden: <why>" for a path."""
    why = forbidden_message(user, attrs) + (f": {reason}" if reason else "")
    details: dict[str, Any] = {}
    if attrs.is_resource:
        qualified = attrs.resource + (f".{attrs.group}" if attrs.group else "")
        message = f'{qualified} "{attrs.name}" is forbidden: {why}'
        if attrs.name:
            details["name"] = attrs.name
        if attrs.group:
            details["group"] = attrs.group
        details["kind"] = attrs.resource
    else:
        message = f"forbidden: {why}"
    return _status(403, "Forbidden", message, details)


def internal_error(message: str) -> web.Response:
    return _status(
        500, "InternalError", f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )  # fmt: skip


def too_many_requests() -> web.Response:
    response = _status(
        429, "TooManyRequests", "too many requests, please try again later",
        {"retryAfterSeconds": RETRY_AFTER_SECONDS},
    )  # fmt: skip
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
