"""GET /explain/{namespace}/{name}: the HTTP side of explain.

Query: `nodes=true` adds the per-node lists, `limit` and `continue` page them
(pages.py). Answers: 200 JSON; 400 a bad query; 403 the caller may not read pods in the
namespace (only when the server passes `can_read_pods`); 404 an unknown pod; 409 not a
pending pod of this scheduler; 429 with Retry-After when the evaluation queue is full.
Every error body is `{"error": "..."}`.

The server also routes the aggregated API path
(/apis/explain.kas.io/v1alpha1/namespaces/{namespace}/pods/{name}) here: only the
`namespace` and `name` of the match info are read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from scheduler.explain.access import CanReadPods, readable_namespaces
from scheduler.explain.explainer import Explainer, Refusal
from scheduler.explain.gate import Busy
from scheduler.explain.group_answer import group_victims
from scheduler.explain.pages import PageError, page_request

__all__ = ["EXPLAIN_PATH", "http_handler"]

EXPLAIN_PATH = "/explain/{namespace}/{name}"


def _error(code: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=code, headers=headers)


def http_handler(
    explainer: Explainer, *, can_read_pods: CanReadPods | None = None
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler. With `can_read_pods`: 403 for a namespace the caller may not read
    (before revealing whether the pod exists); victims elsewhere counted, not named."""

    async def handle(request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        name = request.match_info["name"]
        if can_read_pods is not None and not await can_read_pods(request, namespace):
            # worded as the API server words a refusal: "forbidden: ..."
            return _error(403, f"forbidden: the caller may not get pods in namespace {namespace}")
        try:
            pod = explainer.find(namespace, name)
            page = page_request(request.query, pod.uid)
            now = await explainer.now(pod)
        except Refusal as exc:
            return _error(exc.code, str(exc))
        except PageError as exc:
            return _error(400, str(exc))
        except Busy as exc:
            return _error(429, str(exc), {"Retry-After": str(exc.retry_after)})
        readable = None
        victims = [
            *(now.preemption.victims if now.preemption is not None else ()),
            *(group_victims(now.group) if now.group is not None else ()),
        ]
        if can_read_pods is not None and victims:
            spaces = (v.namespace for v in victims)
            readable = await readable_namespaces(can_read_pods, request, spaces, namespace)
        return web.json_response(explainer.answer(pod, now, page, readable))

    return handle
