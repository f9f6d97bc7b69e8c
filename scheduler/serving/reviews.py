"""Posting TokenReviews and SubjectAccessReviews to the API server, bounded.

Every review a request needs is one POST; a flood of callers must not turn into a flood
of POSTs nor of waiting tasks. So: identical reviews in flight share one POST (the second
caller awaits the first's answer); at most `max_concurrent` POSTs at once; at most
`max_waiting` more callers wait for a slot, beyond that a review is refused at once
(ReviewBusy: the server answers 429 with Retry-After). Each POST is limited to `timeout`
seconds (upstream's TokenRequestTimeout/the webhook timeout: 10 s)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

__all__ = ["Post", "ReviewBusy", "ReviewError", "Reviewer"]

Post = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class ReviewError(Exception):
    """The API server did not answer the review (an error, not a denial)."""


class ReviewBusy(ReviewError):
    """Too many reviews waiting already."""


class Reviewer:
    def __init__(
        self, post: Post, *, max_concurrent: int = 16, max_waiting: int = 256,
        timeout: float = 10.0,
    ) -> None:  # fmt: skip
        self._post = post
        self._slots = asyncio.Semaphore(max_concurrent)
        self.max_waiting = max_waiting
        self._waiting = 0
        self.timeout = timeout
        self._in_flight: dict[Hashable, asyncio.Future[dict[str, Any]]] = {}
        self.posted = 0  # POSTs sent (tests, metrics)

    async def review(self, key: Hashable, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The review's answer (its `status`). Raises ReviewError/ReviewBusy."""
        shared = self._in_flight.get(key)
        if shared is not None:
            return await asyncio.shield(shared)
        if self._waiting >= self.max_waiting:
            raise ReviewBusy("too many authentication/authorization reviews waiting")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            result = await self._post_one(path, body)
        except BaseException as exc:
            failure = exc if isinstance(exc, ReviewError) else ReviewError("review cancelled")
            future.set_exception(failure)
            future.exception()  # retrieved: sharers get it, nobody else must
            raise
        finally:
            self._in_flight.pop(key, None)
        future.set_result(result)
        return result

    async def _post_one(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            self.posted += 1
            answer = await asyncio.wait_for(self._post(path, body), self.timeout)
        except (asyncio.CancelledError, ReviewError):
            raise
        except Exception as exc:
            raise ReviewError(f"{path}: {exc}") from exc
        finally:
            self._slots.release()
        status = answer.get("status")
        return status if isinstance(status, dict) else {}
