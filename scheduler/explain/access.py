"""Tenancy, explain's side: who may see which pod.

The server (scheduler.server, the serving side) authenticates the caller and passes
`can_read_pods(request, namespace)`: may this request's caller `get pods` in that
namespace (a SubjectAccessReview with the caller's identity). explain asks it

- for the URL's namespace before anything else: a caller who may not read it gets 403
  without learning whether the pod exists;
- for each other namespace holding a victim of the preemption plan: victims there are
  counted, not named (no name, uid or priority of another tenant's pod).

Each distinct namespace is asked once per request (the answers may be cached by the
serving side, as upstream's delegating authorizer caches them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

__all__ = ["CanReadPods", "readable_namespaces"]

CanReadPods = Callable[[web.Request, str], Awaitable[bool]]


async def readable_namespaces(
    can_read: CanReadPods, request: web.Request, namespaces: Iterable[str], known: str
) -> frozenset[str]:
    """The namespaces among `namespaces` (plus `known`, already allowed) that the caller
    may read; asks once per distinct namespace other than `known`."""
    others = sorted(set(namespaces) - {known})
    answers = await asyncio.gather(*(can_read(request, ns) for ns in others))
    return frozenset([known, *(ns for ns, ok in zip(others, answers, strict=True) if ok)])
