"""The one error tree of the client layer, chosen by HTTP status.

Everything above the client layer catches these, never aiohttp or kubernetes_asyncio
exceptions. Translation happens in one place, `error_translation.translate()` (and the
`api_errors()` context manager built on it), and every translated error is raised `from`
the original. This module imports neither library, so code that only catches these
(plugins, preemption, the configuration check's imports) does not load the transport.

```
ApiError(status, reason, message)
├── BadRequest            400
│   └── Invalid           422 (reason Invalid: validation failed)
├── Unauthorized          401
├── Forbidden             403
├── NotFound              404
├── Conflict              409 (optimistic concurrency: the object changed, or is bound)
│   └── AlreadyExists     409 with reason AlreadyExists
├── Gone                  410 (resourceVersion too old / expired continue token)
├── TooManyRequests       429 (retry_after from the Status details or Retry-After)
├── ServerError           5xx (and any other unexpected status)
├── LeaseNotHeld          status 0: not sent, the leader lease is not surely held
└── TransportError        status 0: no HTTP answer at all
    ├── Timeout           the request or a stream read took too long
    └── ConnectionFailed  refused, reset, TLS failure, a stream cut mid-body
```

`transient` says whether the failure is of a kind a later attempt may not meet (429, 5xx,
no answer) rather than a refusal (4xx). Whether a call may be sent again is a separate,
stricter question (a write may have taken effect): `scheduler.client.retries.may_retry`.
A `TransportError` says whether any byte of the request may have reached the server
(`sent`): False only when the failure came before the request was written (no
connection could be made or taken in time).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "Gone",
    "Invalid",
    "LeaseNotHeld",
    "NotFound",
    "ServerError",
    "Timeout",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "error_from_response",
]


class ApiError(Exception):
    """An API call failed. `status` is the HTTP status (0 when none arrived), `reason`
    the Status reason (e.g. "NotFound", "AlreadyExists") and `message` its message."""

    transient = False
    attempts = 1
    """How many attempts the dispatcher made before giving up with this error."""

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        *,
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.retry_after = retry_after
        text = f"{status} {reason}".strip() if status else reason
        super().__init__(f"{text}: {message}" if message else text)

    @property
    def code(self) -> str:
        """The label for request metrics: the HTTP status, or "<error>" as client-go."""
        return str(self.status) if self.status else "<error>"


class BadRequest(ApiError):
    pass


class Invalid(BadRequest):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class AlreadyExists(Conflict):
    pass


class Gone(ApiError):
    pass


class TooManyRequests(ApiError):
    transient = True


class ServerError(ApiError):
    transient = True


class TransportError(ApiError):
    """No (whole) answer. `sent` is False only when nothing of the request was written:
    the connect failed or timed out, or no pooled connection came free in time. True
    otherwise, conservatively: the server may have received and applied the request."""

    transient = True

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(0, type(self).__name__, message)
        self.sent = sent


class Timeout(TransportError):
    pass


class LeaseNotHeld(ApiError):
    """Not sent: a write only the leader may make (a bind, a victim DELETE, a pod status
    patch) found the leader-election fence closed right before it would have gone out
    (scheduler.leader.LeaderElector.holds_lease). Nothing reached the API server."""

    def __init__(self, operation: str) -> None:
        super().__init__(
            0, "LeaseNotHeld", f"{operation} not sent: the leader lease is not surely held"
        )


class ConnectionFailed(TransportError):
    pass


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def _parse_body(body: bytes | str | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if body is None or isinstance(body, Mapping):
        return body
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _retry_after(
    status: Mapping[str, Any] | None, headers: Mapping[str, str] | None
) -> float | None:
    details = status.get("details") if status else None
    if isinstance(details, Mapping):
        seconds = details.get("retryAfterSeconds")
        if isinstance(seconds, int | float) and seconds > 0:
            return float(seconds)
    if headers:
        value = headers.get("Retry-After")
        if value is not None:
            # whole seconds only, as client-go's retryAfterSeconds (strconv.Atoi: an
            # HTTP-date or a fraction is no Retry-After at all)
            try:
                return float(max(0, int(value.strip(), 10)))
            except ValueError:
                return None
    return None


def error_from_response(
    status: int,
    body: bytes | str | Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    http_reason: str = "",
) -> ApiError:
    """The error for a non-2xx answer; `body` is usually a metav1.Status."""
    parsed = _parse_body(body)
    is_status = parsed is not None and parsed.get("kind") == "Status"
    reason = str(parsed.get("reason", "")) if is_status and parsed else ""
    message = str(parsed.get("message", "")) if is_status and parsed else ""
    if not message and isinstance(body, bytes | str):
        message = (body.decode("utf-8", "replace") if isinstance(body, bytes) else body)[:500]
    if not reason:
        reason = http_reason
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError
    if cls is Conflict and reason == "AlreadyExists":
        cls = AlreadyExists
    return cls(status, reason, message, body=parsed, retry_after=_retry_after(parsed, headers))
